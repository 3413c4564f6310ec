"""Run every benchmark and merge the results into `benchmarks/results/summary.json` and `summary.md`.

Benchmarks are the modules `benchmarks/bench_<name>.py` (found automatically, in name order). Each runs
in its own Python process (`python -m benchmarks.bench_<name>`, fresh JAX caches, a time limit) and
writes `benchmarks/results/<name>.json` and `<name>.md` (see `benchmarks/_common.py`). A benchmark
that fails, times out or writes no fresh result is reported as such in the summary; the others still run.

Usage:

    python benchmarks/run_all.py                  # all benchmarks
    python benchmarks/run_all.py --only hub       # a subset, by <name>
    python benchmarks/run_all.py --timeout 300    # per-benchmark limit [s] (default 240)
    python benchmarks/run_all.py --list
    python benchmarks/run_all.py --collect        # merge the existing result files, rerun nothing
    python benchmarks/run_all.py --only gpu       # bench_gpu alone (on a CUDA machine: see README)
    python benchmarks/run_all.py --only slew      # closed-loop FSW slew vs Basilisk (bench_slew)
    python benchmarks/run_all.py --only fused     # issue #19's figure table in one run (bench_fused)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
# Benchmarks that need more than --timeout: bench_gpu runs 1 to 1e5 members on an accelerator (1 and
# 1e3 on the CPU: ~110 s on a loaded 2-core machine); 540 s still fits a 10-minute device command.
# bench_fused measures every figure of issue #19 in one run (fresh processes, Basilisk pools).
# bench_compile_models and bench_stage_rule: cold compiles of large models in fresh processes.
MIN_TIMEOUT_S = {"gpu": 540.0, "fused": 480.0, "compile_models": 2400.0, "stage_rule": 1800.0}


def discover() -> list[str]:
    """Benchmark names `<name>` of the modules `bench_<name>.py`."""
    return sorted(p.stem[len("bench_") :] for p in HERE.glob("bench_*.py"))


def run_one(name: str, timeout: float, extra: list[str]) -> dict:
    """Run `benchmarks.bench_<name>` in a subprocess; returns its status and (fresh) result data."""
    out_json, out_md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    start = time.time()
    cmd = [sys.executable, "-m", f"benchmarks.bench_{name}", *extra]
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, timeout=timeout, capture_output=True, text=True)
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
        log = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        status = f"timed out after {timeout:.0f} s"
        log = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
    wall = time.perf_counter() - t0
    print(log.rstrip(), flush=True)
    entry = {"status": status, "wall_s": wall}
    fresh = out_json.exists() and out_json.stat().st_mtime >= start
    if status == "ok" and not fresh:
        entry["status"] = "no fresh result file"
    if entry["status"] == "ok":
        entry["data"] = json.loads(out_json.read_text())
        entry["markdown"] = out_md.read_text() if out_md.exists() else ""
    else:
        entry["log_tail"] = log[-4000:]
    print(f"== {name}: {entry['status']} ({wall:.0f} s)", flush=True)
    return entry


def collect_one(name: str) -> dict:
    """The existing result of `name` (not rerun), with the time it was measured."""
    out_json, out_md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if not out_json.exists():
        return {"status": "no result file", "wall_s": 0.0, "log_tail": ""}
    data = json.loads(out_json.read_text())
    measured = data.get("environment", {}).get("time", "unknown time")
    return {
        "status": f"ok (collected, measured {measured})",
        "wall_s": float(data.get("wall_s", 0.0)),
        "data": data,
        "markdown": out_md.read_text() if out_md.exists() else "",
    }


def summarize(entries: dict) -> tuple[dict, str]:
    summary = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "benchmarks": {
            k: {kk: vv for kk, vv in v.items() if kk != "markdown"} for k, v in entries.items()
        },
    }
    md = [
        "# Benchmark summary",
        "",
        f"Generated {summary['generated']} by `benchmarks/run_all.py`.",
        "",
    ]
    md += ["| benchmark | status | wall [s] |", "|---|---|---|"]
    for k, v in entries.items():
        md.append(f"| {k} | {v['status']} | {v['wall_s']:.0f} |")
    for k, v in entries.items():
        md.append("")
        if v["status"].startswith("ok"):
            md.append(v.get("markdown", "").rstrip())
        else:
            md += [f"## {k}", "", f"**{v['status']}**; last output:", "", "```"]
            md += [v.get("log_tail", "").rstrip()[-1500:], "```"]
    return summary, "\n".join(md) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Run all benchmarks and merge their results.")
    p.add_argument("--only", nargs="+", metavar="NAME", help="benchmark names to run")
    p.add_argument("--timeout", type=float, default=240.0, help="per-benchmark limit [s]")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument(
        "--collect",
        action="store_true",
        help="rerun nothing: merge the existing results/<name>.json files into the summary",
    )
    p.add_argument("extra", nargs="*", help="arguments passed to every benchmark (after --)")
    a = p.parse_args(argv)
    names = discover()
    if a.list:
        print("\n".join(names))
        return 0
    if a.only:
        unknown = sorted(set(a.only) - set(names))
        if unknown:
            print(f"unknown benchmark(s) {unknown}; available: {names}", file=sys.stderr)
            return 2
        names = [n for n in names if n in a.only]
    RESULTS.mkdir(parents=True, exist_ok=True)
    entries = {
        n: collect_one(n)
        if a.collect
        else run_one(n, max(a.timeout, MIN_TIMEOUT_S.get(n, 0.0)), a.extra)
        for n in names
    }
    summary, md = summarize(entries)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (RESULTS / "summary.md").write_text(md)
    print(f"wrote {RESULTS / 'summary.json'} and {RESULTS / 'summary.md'}")
    return 0 if all(v["status"].startswith("ok") for v in entries.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
