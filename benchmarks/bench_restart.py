"""Restart cost: the first call of the demo model in a fresh process, with JAX's persistent
compilation cache off (jaxsim's default) and on (`jaxsim.enable_cache()` / `JAXSIM_CACHE`).

Each configuration runs two fresh processes one after the other on one empty cache folder: the
first fills the cache, the second is the restart that should profit. Each process imports jaxsim,
builds the `combined` spacecraft (`effectors.scenarios.combined`, eager JAX operations), and times
`simulate` for one orbit (RK4, as `jaxsim-demo`): the first call (trace, lower, compile or cache
load, run) and a warm call (run only). JAX's monitoring events split the compile work into
tracing, lowering to StableHLO and XLA compilation; its compiler log tells whether the simulation
program (`jit__run_fixed`) was written to / read from the cache. Each process also records JAX's
compile-time threshold after `import jaxsim` (it must stay JAX's default, 1 s).

Configurations:

- `off`: nothing configured (the default: `import jaxsim` turns no cache on).
- `JAXSIM_CACHE`: the environment variable pointing at the folder: jaxsim's top-level programs
  are stored whatever their compile time; everything else under JAX's default threshold (the
  model build's small eager programs mostly are not).
- `JAXSIM_CACHE + every entry`: as the user may choose for their whole process
  (`jax_persistent_cache_min_compile_time_secs=0`): the model build is cached too.

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
TARGET_S = 1.0  # the second process's first call with the cache on [s] (issue 26)
CONFIGS = [
    ("off", {"jaxsim": False, "all": False}),
    ("JAXSIM_CACHE", {"jaxsim": True, "all": False}),
    ("JAXSIM_CACHE + every entry", {"jaxsim": True, "all": True}),
]


def child(cache_all: bool) -> dict:
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
    if cache_all:  # the user's own choice for the whole process
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    import jaxsim as js
    from effectors.scenarios import combined

    t_import = time.perf_counter() - t_start
    threshold = jax.config.jax_persistent_cache_min_compile_time_secs
    t0 = time.perf_counter()
    sc, y0, p = combined()
    t_build = time.perf_counter() - t0

    def run():
        sol = js.simulate(sc, y0, p["duration_s"], dt=p["step_s"],
                          sample_dt=p["sample_interval_s"])  # fmt: skip
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
        "min_compile_time_s": threshold,
        "cache_dir": None if js.cache_dir() is None else str(js.cache_dir()),
    }


def run_child(cache_dir: str | None, cache_all: bool) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_restart", "--child",
           json.dumps({"cache_all": cache_all})]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAXSIM_CACHE", "JAX_"))}
    if cache_dir is not None:
        env["JAXSIM_CACHE"] = cache_dir
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
               ("min_compile_time_s", "JAX threshold after import [s]")]  # fmt: skip
    load = data["environment"].get("loadavg_1m")
    return (
        "## Restart: the demo model's first call in a fresh process\n\n"
        "Two fresh processes per configuration on one cache folder (the first fills it). "
        "`combined` spacecraft, one orbit, RK4 (as `jaxsim-demo`). Trace, lower and XLA are "
        "summed over every compile of the process (model build and simulation). "
        f"CPU load average at the end: {load if load is None else round(load, 1)} on "
        f"{data['environment'].get('cpu_count')} cores (absolute times vary with it).\n\n"
        + markdown_table(rows, columns)
        + "\n\nWhat the columns show:\n\n"
        "- `off` is the default: `import jaxsim` turns no cache on and changes no JAX setting but "
        "float64 (the threshold column stays JAX's default, 1 s, in every configuration jaxsim "
        "controls). Every process compiles everything.\n"
        "- `JAXSIM_CACHE` (or `jaxsim.enable_cache()`): the simulation program is written by the "
        "first process and read by the second. jaxsim's top-level programs are stored whatever "
        "their compile time (JAX's threshold lowered to 0 for the calling thread during those "
        "calls only); the model build's small eager programs stay under JAX's default rule, so "
        "the second process still compiles them.\n"
        "- `+ every entry`: the user's own choice of threshold 0 for the whole process caches the "
        "model build too.\n\n" + _summary(rows) + "\n"
    )


def _summary(rows) -> str:
    def second(name):
        found = [r for r in rows if r["config"] == name and r["process"] == 2]
        return found[0] if found else None

    on, off = second("JAXSIM_CACHE"), second("off")
    if on is None or off is None:
        return "(not measured)."
    verdict = "meets" if on["first_call_s"] <= TARGET_S else "misses"
    return (
        f"Second process, first call: {on['first_call_s']:.2f} s with the cache on "
        f"(warm {on['warm_call_s']:.2f} s; {verdict} the target of <= {TARGET_S:.1f} s), "
        f"{off['first_call_s']:.2f} s with it off."
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
        print(json.dumps(child(opts["cache_all"])))
        return
    rows = []
    for name, cfg in CONFIGS:
        with tempfile.TemporaryDirectory(prefix="jaxsim-restart-") as tmp:
            for k in (1, 2):
                r = run_child(tmp if cfg["jaxsim"] else None, cfg["all"])
                entries = [p for p in Path(tmp).rglob("*") if p.is_file()]
                r.update(config=name, process=k, cache_entries=len(entries))
                r["first_minus_warm_s"] = r["first_call_s"] - r["warm_call_s"]
                r["to_first_result_s"] = r["import_s"] + r["build_s"] + r["first_call_s"]
                rows.append(r)
                print(f"{name:28s} process {k}: first {r['first_call_s']:.2f} s, warm "
                      f"{r['warm_call_s']:.3f} s, build {r['build_s']:.2f} s", flush=True)  # fmt: skip
    data = {"name": "restart", "title": "Restart cost with the persistent compilation cache",
            "environment": environment(), "rows": rows}  # fmt: skip
    md = markdown(data)
    pj, pm = write_results("restart", data, md)
    print(f"wrote {pj} and {pm}")


if __name__ == "__main__":
    main()
