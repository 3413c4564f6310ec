"""Restart cost: the first call of the demo model in a fresh process, with and without JAX's
persistent compilation cache (issue: setting `JAX_COMPILATION_CACHE_DIR` did not shorten it).

Each configuration runs two fresh processes one after the other on one empty cache folder: the
first fills the cache, the second is the restart that should profit. Each process imports jaxsim,
builds the `combined` spacecraft (`effectors.scenarios.combined`, eager JAX operations), and times
`simulate` for one orbit (RK4, as `python -m effectors.demo`): the first call (trace, lower,
compile or cache load, run) and a warm call (run only). JAX's monitoring events split the compile
work into tracing, lowering to StableHLO and XLA compilation; its compiler log tells whether the
simulation program (`jit__run_fixed`) was written to / read from the cache.

Configurations (the first four with jaxsim's own cache off, `JAXSIM_CACHE=0`: JAX's cache alone,
as before jaxsim had one; the last is what a user gets by default):

- `none`: no persistent cache.
- `default`: a cache folder with JAX's default thresholds (entries that compiled in >= 1 s).
- `all`: every entry cached (`jax_persistent_cache_min_compile_time_secs=0`,
  `jax_persistent_cache_min_entry_size_bytes=-1`), `throw=True` (the default).
- `all, throw=False`: as `all`, running `simulate(..., throw=False)`.
- `jaxsim default`: nothing configured but the folder (`JAXSIM_CACHE_DIR`, standing in for the
  user's cache directory): jaxsim's cache as `import jaxsim` sets it up (`jaxsim._cache`), JAX's
  persistent cache with every entry, `throw=True` checked on the host, and the simulation program
  stored compiled (`jaxsim._program_cache`), so that a restart neither traces nor lowers it.

Run: `python -m benchmarks.bench_restart` (about 2 minutes on 2 cores); writes
`benchmarks/results/restart.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import environment, markdown_table, write_results


MAIN_PROGRAM = "jit__run_fixed"  # the jitted fixed-step driver that runs the demo's simulation
CONFIGS = [
    ("none", {"cache": False, "all": False, "throw": True, "jaxsim": False}, 1),
    ("default", {"cache": True, "all": False, "throw": True, "jaxsim": False}, 2),
    ("all", {"cache": True, "all": True, "throw": True, "jaxsim": False}, 2),
    ("all, throw=False", {"cache": True, "all": True, "throw": False, "jaxsim": False}, 2),
    ("jaxsim default", {"cache": False, "all": False, "throw": True, "jaxsim": True}, 2),
]


def child(cache_dir: str | None, cache_all: bool, throw: bool) -> dict:
    """One fresh process: times and compile statistics of the demo model's first and warm call."""
    t_start = time.perf_counter()
    import collections
    import logging

    import jax

    durations = collections.defaultdict(float)
    events = collections.Counter()

    def on_duration(event, duration, **kwargs):
        durations[event] += duration

    def on_event(event, **kwargs):
        events[event] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    messages = []

    class _Capture(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if MAIN_PROGRAM in text:
                messages.append(text)

    for name in ("jax._src.compiler", "jax._src.compilation_cache"):
        log = logging.getLogger(name)
        log.addHandler(_Capture())
        log.setLevel(logging.DEBUG)
        log.propagate = False
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        if cache_all:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    import jaxsim as js
    from effectors.scenarios import combined

    t_import = time.perf_counter() - t_start
    t0 = time.perf_counter()
    sc, y0, p = combined()
    t_build = time.perf_counter() - t0

    def run():
        sol = js.simulate(sc, y0, p["duration_s"], dt=p["step_s"],
                          sample_dt=p["sample_interval_s"], throw=throw)  # fmt: skip
        return jax.block_until_ready(sol.ys)

    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        run()
        warm.append(time.perf_counter() - t0)
    text = " ".join(messages)
    from jaxsim import _program_cache

    held = [e for e in _program_cache._memory.values() if e is not None]
    return {
        "import_s": t_import,
        "build_s": t_build,
        "first_call_s": first,
        "warm_call_s": min(warm),
        "trace_s": durations["/jax/core/compile/jaxpr_trace_duration"],
        "lower_s": durations["/jax/core/compile/jaxpr_to_mlir_module_duration"],
        "xla_compile_s": durations["/jax/core/compile/backend_compile_duration"],
        "compiles": events["/jax/compilation_cache/compile_requests_use_cache"],
        "cache_hits": events["/jax/compilation_cache/cache_hits"],
        "main_hit": "cache hit" in text,
        "main_written": "Writing" in text,
        # JAX logs this whenever it compiles the program, cache or not: never cacheable.
        "main_refused_host_callback": "host callbacks" in text,
        # jaxsim's program cache: the simulation program was loaded from its file (not traced).
        "main_from_jaxsim": any(e.path is not None for e in held),
    }


def run_child(cache_dir: str | None, cache_all: bool, throw: bool, jaxsim_dir=None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_restart", "--child", json.dumps(
        {"cache_dir": cache_dir, "cache_all": cache_all, "throw": throw})]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXSIM_CACHE")}
    if jaxsim_dir is None:
        env["JAXSIM_CACHE"] = "0"
    else:
        env.update(JAXSIM_CACHE="1", JAXSIM_CACHE_DIR=jaxsim_dir)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env,
                         cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(data: dict) -> str:
    """The Markdown section of the results (the table and what it shows)."""
    rows = data["rows"]
    columns = [("config", "cache"), ("process", "process"), ("import_s", "import [s]"),
               ("build_s", "build model [s]"), ("first_call_s", "first call [s]"),
               ("warm_call_s", "warm call [s]"), ("first_minus_warm_s", "first - warm [s]"),
               ("trace_s", "trace [s]"), ("lower_s", "lower [s]"), ("xla_compile_s", "XLA [s]"),
               ("compiles", "compiles"), ("cache_hits", "cache hits"),
               ("cache_entries", "cache entries"), ("main_written", "sim. program written"),
               ("main_hit", "sim. program from cache"),
               ("main_refused_host_callback", "sim. program has host callbacks"),
               ("programs", "jaxsim programs"),
               ("main_from_jaxsim", "sim. program from jaxsim's cache")]  # fmt: skip
    load = data["environment"].get("loadavg_1m")
    return (
        "## Restart: the demo model's first call in a fresh process\n\n"
        "Two fresh processes per configuration on one cache folder (the first fills it). "
        "`combined` spacecraft, one orbit, RK4 (as `python -m effectors.demo`). Trace, lower and "
        "XLA are summed over every compile of the process (model build and simulation). "
        f"CPU load average at the end: {load if load is None else round(load, 1)} on "
        f"{data['environment'].get('cpu_count')} cores (absolute times vary with it).\n\n"
        + markdown_table(rows, columns)
        + "\n\nWhat the columns show:\n\n"
        "- The first four configurations run with jaxsim's own cache off (`JAXSIM_CACHE=0`): "
        "JAX's persistent cache alone. With `throw=True` the simulation program was never "
        "written to it while its run-time checks (`equinox.error_if`, diffrax's `throw`) were "
        "host callbacks in the program, which JAX does not serialize; a top-level `simulate` now "
        "checks `throw` on the host after the run (`jaxsim._host_checks`), so `all` caches it "
        "too.\n"
        "- With JAX's default thresholds (entries that compiled in >= 1 s) little is cached: "
        "building the model runs about 90 small eager operations, each compiled in well under "
        "1 s. Caching every entry (thresholds 0) cuts the build of the second process.\n"
        "- With every entry cached, the second process loads the simulation program from JAX's "
        "cache, yet its first call stays above the warm call by the tracing and lowering, which "
        "that cache cannot skip (its key is the lowered module).\n"
        "- `jaxsim default` is what `import jaxsim` sets up with nothing configured: JAX's cache "
        "with every entry in jaxsim's folder, and the compiled simulation program stored by "
        "jaxsim (`jaxsim._program_cache`, keyed by the model's structure, the static options and "
        "the source). The second process loads it without tracing or lowering: "
        + _default_summary(rows)
        + "\n"
    )


def _default_summary(rows) -> str:
    second = [r for r in rows if r["config"] == "jaxsim default" and r["process"] == 2]
    if not second:
        return "(not measured)."
    r = second[0]
    return (
        f"first call {r['first_call_s']:.2f} s vs warm {r['warm_call_s']:.2f} s, "
        f"{r['first_minus_warm_s']:.2f} s apart (target: <= 0.5 s)."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite restart.md from the existing restart.json")  # fmt: skip
    args = parser.parse_args(argv)
    if args.markdown_only:
        from benchmarks._common import RESULTS

        data = json.loads((RESULTS / "restart.json").read_text())
        write_results("restart", data, markdown(data))
        return
    if args.child:
        opts = json.loads(args.child)
        print(json.dumps(child(opts["cache_dir"], opts["cache_all"], opts["throw"])))
        return
    rows = []
    for name, cfg, processes in CONFIGS:
        with tempfile.TemporaryDirectory(prefix="jaxsim-restart-") as tmp:
            for k in range(1, processes + 1):
                r = run_child(tmp if cfg["cache"] else None, cfg["all"], cfg["throw"],
                              tmp if cfg["jaxsim"] else None)  # fmt: skip
                entries = [p for p in Path(tmp).rglob("*") if p.is_file()]
                r.update(config=name, process=k, cache_entries=len(entries),
                         programs=sum(p.suffix == ".bin" for p in entries))  # fmt: skip
                r["first_minus_warm_s"] = r["first_call_s"] - r["warm_call_s"]
                r["to_first_result_s"] = r["import_s"] + r["build_s"] + r["first_call_s"]
                rows.append(r)
                print(f"{name:18s} process {k}: first {r['first_call_s']:.2f} s, warm "
                      f"{r['warm_call_s']:.3f} s, build {r['build_s']:.2f} s", flush=True)  # fmt: skip
    data = {"name": "restart", "title": "Restart cost with the persistent compilation cache",
            "environment": environment(), "rows": rows}  # fmt: skip
    md = markdown(data)
    pj, pm = write_results("restart", data, md)
    print(f"wrote {pj} and {pm}")


if __name__ == "__main__":
    main()
