"""Issue #19's figure table, every row measured in one run, side by side, with a kernel-count check.

Rows (the figures of issue #19; each reuses the benchmark that measures it in depth):

- **kernels**: XLA kernels of one compiled `combined` drift (`effectors.scenarios.combined`): the
  `fusion` and `dot` instructions of the optimized HLO of `jax.jit(lambda sc, t, y: sc.drift(t, y,
  None))` (model and state as arguments, nothing constant-folded; jaxsim's compile options), counted
  in every computation that runs as a kernel sequence (entry, loop bodies, branches), not inside
  fusions or reducers. Also reported: one RK4 step of the same model and one tick of the slew's
  flight software (`tests.reference.basilisk_slew`, `RWAttitudeFSW.update` after `prepare()`). The
  check line `kernel_check: N <= MAX: ok|FAIL` is printed and recorded; `--check` turns a FAIL
  into a non-zero exit (`--max-kernels`, default the target).
- **combined / Basilisk**: the `combined` one-orbit run with 10 s samples and derived outputs
  (`bench_combined`'s `samples+outputs` mode), jaxsim's warm run vs Basilisk's
  `ExecuteSimulation()` with recorders, alternated run by run; ratio of the minima.
- **first simulate**: a fresh process (`JAXSIM_CACHE=0`: neither jaxsim's program cache nor
  JAX's persistent cache), JAX initialised (import, one trivial jit) and the model built before the
  timer; first call of the one-orbit `simulate` with samples and outputs (compile + run). Best of
  `--processes` processes.
- **first gradient**: as above, the first call of the reverse gradient of `bench_combined`'s
  final-state scalar w.r.t. every spacecraft parameter (600 s, RK4 0.1 s).
- **gradient / forward**: in the same fresh process, after the first calls, the warm gradient and
  the warm final-state forward run alternated; ratio of the minima.
- **batch vs Basilisk**: `bench_batch`'s 1024 dispersed members, run as one
  `jaxsim.jit(jax.vmap(run))` program, `CHUNK` members at a time in one program, and through
  `jaxsim.montecarlo.run_batch` (chunks of 128 and 256, one worker thread per core: the way a
  user runs a Monte Carlo; the fastest counts) vs Basilisk's two-process Monte Carlo
  (`bench_batch.bsk_two_process`, per member x 1024), alternated; speedup from the minima.
- **J2 vs heyoka**: `bench_orbit_adaptive`'s one-day J2 LEO at rtol 1e-12, jaxsim's closed-form
  point model (Tsit5, Dopri8; the better counts) vs heyoka's time at equal final-position error,
  each jaxsim round alternated with a heyoka tolerance sweep; skipped without heyoka.
- **CI time**: the default test run's wall time, read from a pytest log (`--ci-log`: the summary
  line `N passed ... in X s` with the most tests, i.e. the default run rather than a `-m slow`
  run in the same log); "not measured here" without one.

Basilisk rows are skipped when `bsk` is not importable, the heyoka row when heyoka is not
(`pip install 'jaxsim-spacecraft[bench]'`). `--quick` shortens every horizon (600 s orbit rows, 60 s gradient,
20 s batch) and repeats less; the table then says so.

Run: `python -m benchmarks.bench_fused [--quick] [--ci-log LOG] [--check --max-kernels N]`
(writes `benchmarks/results/fused.json` and `fused.md`; a few minutes on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm  # noqa: E402


NAME = "fused"
TITLE = "Issue #19 figures side by side (one run)"
ORBIT_S = 5830.0  # [s] the combined scenario's horizon (one orbit, 58,300 RK4 steps)
GRAD_S = 600.0  # [s] horizon of the gradient rows (RK4 0.1 s)
DT = 0.1  # [s]
BATCH = 1024  # members of the batch row

# key: (figure, target value, "<=" or ">=", unit, value at the writing)
FIGURES = {
    "kernels": ("XLA kernels in one `combined` drift (fusions + dots)", 20, "<=", "", "76"),
    "combined_ratio": ("`combined` per step with outputs, jaxsim / Basilisk", 0.10, "<=", "",
                       "0.18-0.20"),
    "first_simulate_s": ("first one-orbit `simulate` in a process (compile + run)", 1.5, "<=",
                         " s", "2.2 s"),
    "first_gradient_s": ("reverse gradient w.r.t. the whole model, first call (600 s)", 5.0, "<=",
                         " s", "8.5 s"),
    "gradient_over_forward": ("reverse gradient / forward run (600 s, RK4 0.1 s)", 5.0, "<=", "x",
                              "15-16x"),
    "batch_speedup": ("1024 dispersed `combined` runs vs Basilisk's 2-process Monte Carlo", 30.0,
                      ">=", "x faster", "9x faster"),
    "j2_over_heyoka": ("J2 LEO day at rtol 1e-12, time vs heyoka at equal error", 15.0, "<=", "x",
                       "32x"),
    "ci_wall_min": ("CI wall time of the default test run", 15.0, "<=", " min", "23-25 min"),
}  # fmt: skip
ROWS = tuple(FIGURES)


# ------------------------------------------------------------------------------------ kernel count
def hlo_kernels(hlo_text: str) -> collections.Counter:
    """Opcode counts of the instructions that run as kernels in an optimized HLO module's text.

    Counts the instructions of every computation except those called by a `fusion` (`calls=`,
    the fused bodies: one kernel each, counted as their `fusion` instruction) or applied by a
    reduction, scatter, sort, ... (`to_apply=`); loop bodies, conditions and branches count.
    """
    called = set(re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", hlo_text))
    ops = collections.Counter()
    for comp in re.split(r"\n(?=\S.*\{\n)", hlo_text):
        head = comp.split("\n", 1)[0].strip()
        m = re.match(r"(?:ENTRY\s+)?%?([\w.\-]+)", head)
        if m is None or head.startswith("HloModule") or m.group(1) in called:
            continue
        for line in comp.split("\n")[1:]:
            # `%name = <shape> opcode(operands), ...`; a tuple shape `(f64[3]{0}, s64[])` has spaces
            op = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(", line)
            if op:
                ops[op.group(1)] += 1
    return ops


def count_kernels(fn, *args) -> dict:
    """`fusion` and `dot` kernels of `jax.jit(fn)(*args)` compiled with jaxsim's options.

    **Returns:** `{"fusions", "dots", "kernels" (their sum), "other"}`; `other`: the remaining
    instructions at kernel level, by opcode (parameters, constants, tuples and bitcasts aside).
    """
    import jax

    import jaxsim as js

    text = jax.jit(fn, compiler_options=js.compiler_options()).lower(*args).compile().as_text()
    ops = hlo_kernels(text)
    free = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "fusion", "dot"}
    return {
        "fusions": ops["fusion"],
        "dots": ops["dot"],
        "kernels": ops["fusion"] + ops["dot"],
        "other": {k: v for k, v in sorted(ops.items()) if k not in free},
    }


def kernel_counts() -> dict:
    """Kernel counts of the `combined` drift, one RK4 step of it, and one slew FSW tick."""
    import jaxsim as js
    from effectors.scenarios import combined
    from tests.reference import basilisk_slew as bsl

    sc, y0, _ = combined()
    out = {
        "combined_drift": count_kernels(lambda m, t, y: m.drift(t, y, None), sc, 0.0, y0),
        "combined_rk4_step": count_kernels(
            lambda m, t, y: js.RK4().step(m.drift, t, y, DT, None), sc, 0.0, y0
        ),
    }
    _, fsw, ys = bsl.build_jaxsim({**bsl.SCENARIO, "fsw_dt": DT, "dyn_dt": DT})
    z = fsw.init_state()
    out["slew_fsw_tick"] = count_kernels(
        lambda f, t, y, z: f.update(t, y, z, {}), fsw.prepare(), 0.0, ys, z
    )
    return out


def kernel_check(kernels: int, max_kernels: int) -> tuple[str, bool]:
    """The recorded check line and whether it passes."""
    ok = kernels <= max_kernels
    return f"kernel_check: {kernels} <= {max_kernels}: {'ok' if ok else 'FAIL'}", ok


# ------------------------------------------------------------------------------ combined/Basilisk
def combined_vs_basilisk(horizon: float, reps: int) -> dict:
    """jaxsim (samples + outputs) and Basilisk (recorders) on the `combined` run, alternated."""
    import jax

    import jaxsim as js
    from effectors.scenarios import combined
    from tests.reference import basilisk_scenarios as bs

    if not bs.available():
        return {"skipped": "Basilisk (bsk) not importable"}
    spec = bs.load_spec("combined")
    sample = spec["time"]["sample_interval_s"]
    sc, y0, _ = combined()
    run = lambda: jax.block_until_ready(js.simulate(sc, y0, horizon, dt=DT, sample_dt=sample).ys)
    run()  # compile
    bs.BasiliskScenario(spec, duration=10.0, record=True).run()  # Basilisk's first-run set-up
    tj, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        tj.append(time.perf_counter() - t0)
        tb.append(bs.BasiliskScenario(spec, duration=horizon, record=True).run())
    n = int(round(horizon / DT))
    return {
        "value": min(tj) / min(tb),
        "horizon_s": horizon,
        "reps": reps,
        "jaxsim_us_per_step": min(tj) / n * 1e6,
        "bsk_us_per_step": min(tb) / n * 1e6,
        "pairwise_ratio_median": statistics.median(a / b for a, b in zip(tj, tb)),
        "jaxsim_s": tj,
        "bsk_s": tb,
    }


# ----------------------------------------------------------------------------- fresh processes
def child(kind: str, horizon: float, reps: int) -> dict:
    """One fresh process: first call of `kind` ("simulate" or "gradient") after JAX is set up."""
    t_start = time.perf_counter()
    import jax
    import jax.numpy as jnp

    import jaxsim as js

    jax.block_until_ready(jax.jit(lambda x: x + 1.0)(jnp.ones(3)))  # JAX initialised
    from effectors.scenarios import combined

    sc, y0, p = combined()
    setup = time.perf_counter() - t_start
    if kind == "simulate":
        fn = lambda: js.simulate(sc, y0, horizon, dt=DT, sample_dt=p["sample_interval_s"]).ys
        arg = ()
    else:
        from benchmarks.bench_combined import _grad_fn

        grad, params = _grad_fn(sc, y0, horizon, DT)
        fn, arg = grad, (params,)
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*arg))
    out = {"kind": kind, "horizon_s": horizon, "setup_s": setup}
    out["first_call_s"] = time.perf_counter() - t0
    if kind == "gradient":  # warm gradient vs warm forward run, alternated
        fwd = lambda: js.simulate(sc, y0, horizon, dt=DT, outputs=False).ys
        jax.block_until_ready(fwd())
        tg, tf, cg, cf = [], [], [], []
        for _ in range(reps):
            c0, t0 = time.process_time(), time.perf_counter()
            jax.block_until_ready(fn(*arg))
            tg.append(time.perf_counter() - t0)
            cg.append(time.process_time() - c0)
            c0, t0 = time.process_time(), time.perf_counter()
            jax.block_until_ready(fwd())
            tf.append(time.perf_counter() - t0)
            cf.append(time.process_time() - c0)
        out.update(gradient_s=tg, forward_s=tf, gradient_cpu_s=cg, forward_cpu_s=cf)
    return out


def run_child(kind: str, horizon: float, reps: int = 3) -> dict:
    """`child(...)` in a fresh interpreter with jaxsim's and JAX's persistent caches off."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JAXSIM_CACHE", "JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))
    }
    env["JAXSIM_CACHE"] = "0"
    cmd = [sys.executable, "-m", "benchmarks.bench_fused", "--child", kind,
           "--horizon", repr(horizon), "--reps", str(reps)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cm.ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"bench_fused child {kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_calls(orbit: float, grad_horizon: float, processes: int, reps: int) -> dict:
    sims = [run_child("simulate", orbit) for _ in range(processes)]
    grads = [run_child("gradient", grad_horizon, reps) for _ in range(processes)]
    tg = [t for g in grads for t in g["gradient_s"]]
    tf = [t for g in grads for t in g["forward_s"]]
    return {
        "first_simulate_s": {
            "value": min(s["first_call_s"] for s in sims),
            "horizon_s": orbit,
            "processes": [s["first_call_s"] for s in sims],
        },
        "first_gradient_s": {
            "value": min(g["first_call_s"] for g in grads),
            "horizon_s": grad_horizon,
            "processes": [g["first_call_s"] for g in grads],
        },
        "gradient_over_forward": {
            "value": min(tg) / min(tf),
            "horizon_s": grad_horizon,
            "gradient_s": min(tg),
            "forward_s": min(tf),
            "pairwise_ratio_median": statistics.median(a / b for a, b in zip(tg, tf)),
            # CPU time of the process (all threads): less sensitive to other load on the machine
            "cpu_ratio": min(t for g in grads for t in g["gradient_cpu_s"])
            / min(t for g in grads for t in g["forward_cpu_s"]),
        },
    }


# ------------------------------------------------------------------------------------ batch row
def batch_runners(horizon: float, quick: bool) -> dict:
    """`{label: runner}` of the batch row: one program over all members (`vmap`), `CHUNK`
    members at a time in one program (`lax.map`), and `jaxsim.montecarlo.run_batch` with chunks
    of 128 and 256 run by one worker thread per core (its CPU default)."""
    from benchmarks import bench_batch as bb
    from jaxsim.montecarlo.batch import usable_cores

    out = {} if quick else {f"vmap {BATCH}": bb.batched_runner(horizon, DT)}
    out[f"lax.map {bb.CHUNK}"] = bb.batched_runner(horizon, DT, bb.CHUNK)
    for chunk in (128,) if quick else (128, 256):
        out[f"run_batch {chunk}, {usable_cores()} workers"] = bb.run_batch_runner(
            horizon, DT, chunk
        )
    return out


def batch_vs_basilisk(horizon: float, quick: bool, reps: int) -> dict:
    """1024 dispersed members, jaxsim (each way of `batch_runners`) vs Basilisk's 2-process pool,
    alternated."""
    import jax
    import jax.numpy as jnp

    from benchmarks import bench_batch as bb
    from tests.reference import basilisk_scenarios as bs

    if not bs.available():
        return {"skipped": "Basilisk (bsk) not importable"}
    d = bb.dispersions(BATCH)
    args = [jnp.asarray(d[k]) for k in ("mass", "moments", "omega0", "Omega0")]
    runners = batch_runners(horizon, quick)
    for r in runners.values():
        jax.block_until_ready(r(*args))  # compile
    tj = {c: [] for c in runners}
    tb = []
    for _ in range(reps):
        for c, r in runners.items():
            t0 = time.perf_counter()
            jax.block_until_ready(r(*args))
            tj[c].append(time.perf_counter() - t0)
        tb.append(bb.bsk_two_process(d, bb.BSK_PARALLEL, horizon) / bb.BSK_PARALLEL)
    best = min(tj, key=lambda c: min(tj[c]))
    return {
        "value": min(tb) * BATCH / min(tj[best]),
        "horizon_s": horizon,
        "reps": reps,
        "best": best,
        "jaxsim_s": tj,
        "bsk_2proc_s_per_member": tb,
        "bsk_members_measured": bb.BSK_PARALLEL,
    }


# ---------------------------------------------------------------------------------- heyoka row
def j2_vs_heyoka(solvers: tuple, rounds: int) -> dict:
    """jaxsim closed-form J2 point model at rtol 1e-12 vs heyoka's time at equal error."""
    from benchmarks import bench_orbit_adaptive as bo

    if not bo.heyoka_available():
        return {"skipped": "heyoka not importable"}
    import jaxsim as js

    r0, v0 = bo.kepler_to_rv(*bo.ELEMENTS)
    x0 = np.r_[r0, v0]
    ref = bo._heyoka_case(x0, np.finfo(np.longdouble).eps, 1, fp_type=np.longdouble)["r_final"]
    err = lambda r: float(np.linalg.norm(np.asarray(r, dtype=np.longdouble) - ref))
    point = bo.point_models()[0]
    y0 = point.init_state(r0, v0)
    hy = collections.defaultdict(list)
    jx = collections.defaultdict(list)
    for _ in range(rounds):
        for tol in bo.HEYOKA_TOLS:
            h = bo._heyoka_case(x0, tol, 5)
            hy[tol].append((h["run_s"], err(h["r_final"])))
        for name in solvers:
            c = bo._jax_case(
                point, y0, getattr(js, name)(), bo.TARGET_RTOL, lambda s: s.ys["r_BN_N"][-1], 10
            )
            jx[name].append((c["run_s"], err(c["r_final"])))
    # heyoka's time-vs-error curve (points where a tighter tolerance still lowered the error)
    curve = []
    for tol in bo.HEYOKA_TOLS:
        t, e = min(s for s, _ in hy[tol]), hy[tol][0][1]
        if e > 0 and (not curve or e < curve[-1][1]):
            curve.append((t, e))
    ratios = {}
    for name, runs in jx.items():
        t, e = min(s for s, _ in runs), runs[0][1]
        t_hy = bo.interp_loglog([c[1] for c in curve], [c[0] for c in curve], e)
        ratios[name] = {"run_s": t, "err_m": e, "heyoka_s": t_hy,
                        "ratio": None if t_hy is None else t / t_hy}  # fmt: skip
    valid = {k: v["ratio"] for k, v in ratios.items() if v["ratio"] is not None}
    if not valid:
        return {"skipped": "jaxsim's error outside heyoka's sweep", "solvers": ratios}
    best = min(valid, key=valid.get)
    return {"value": valid[best], "best_solver": best, "solvers": ratios, "rounds": rounds,
            "heyoka": bo._heyoka_version()}  # fmt: skip


# -------------------------------------------------------------------------------------- CI row
_SUMMARY = re.compile(r"=+ (.*?\b(\d+) passed.*?) in ([\d.]+)s\b.*=+")


def ci_wall_time(log_text: str) -> dict:
    """The default test run's wall time from a pytest log: the summary line with the most tests."""
    found = []
    for line in log_text.splitlines():
        m = _SUMMARY.search(line)
        if m:
            n = sum(int(k) for k in re.findall(r"(\d+) (?:passed|failed|error)", m.group(1)))
            found.append((n, float(m.group(3)), line.strip(" =")))
    if not found:
        return {"skipped": "no pytest summary line in the log"}
    n, seconds, line = max(found, key=lambda f: f[0])
    return {"value": seconds / 60.0, "seconds": seconds, "summary": line, "tests": n}


# ------------------------------------------------------------------------------------- the table
def _met(key: str, value) -> bool:
    target, sense = FIGURES[key][1], FIGURES[key][2]
    return value <= target if sense == "<=" else value >= target


def table_rows(data: dict) -> list[dict]:
    """One row per figure (every key of `FIGURES`, in order), measured or with the reason not."""
    rows = []
    for key, (figure, target, sense, unit, then) in FIGURES.items():
        r = data["rows"].get(key) or {"skipped": "not measured in this run"}
        row = {"key": key, "figure": figure, "then": then, "target": f"{sense} {target:g}{unit}"}
        if "value" in r:
            v = r["value"]
            row["measured"] = f"{v:d}{unit}" if isinstance(v, int) else f"{v:.3g}{unit}"
            row["met"] = "yes" if _met(key, v) else "no"
        else:
            row["measured"] = r.get("skipped", "not measured here")
            row["met"] = "-"
        rows.append(row)
    return rows


def to_markdown(data: dict) -> str:
    env = data["environment"]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), {env['cpu_count']} CPUs, "
        f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at start, "
        f"{data.get('loadavg_1m_end', float('nan')):.1f} at end, {env['time']}"
        + (" (**--quick**: shortened horizons)" if data["quick"] else "")
        + ". Ratios from alternated runs in one process (minima); first calls in fresh processes "
        "with `JAXSIM_CACHE=0`."
    )
    md += ["", cm.markdown_table(table_rows(data), [
        ("figure", "figure"), ("measured", "measured"), ("target", "target"), ("met", "met"),
        ("then", "at the issue")])]  # fmt: skip
    k = data["kernels"]
    if k:
        md += ["", f"`{data['kernel_check']}`", ""]
        md.append(
            "Kernels (fusions + dots, compiled with jaxsim's options): "
            + "; ".join(
                f"{name.replace('_', ' ')} {c['kernels']} ({c['fusions']} + {c['dots']}"
                + (", other " + ", ".join(f"{o} {n}" for o, n in c["other"].items()) if c["other"] else "")
                + ")"
                for name, c in k.items()
            )
            + "."
        )  # fmt: skip
    details = []
    r = data["rows"]
    if "value" in r.get("combined_ratio", {}):
        c = r["combined_ratio"]
        details.append(
            f"combined ({c['horizon_s']:.0f} s, {c['reps']} alternated pairs): jaxsim "
            f"{c['jaxsim_us_per_step']:.2f} us/step, Basilisk {c['bsk_us_per_step']:.2f} us/step "
            f"(median of pairwise ratios {c['pairwise_ratio_median']:.3f})"
        )
    for key, what in (("first_simulate_s", "simulate"), ("first_gradient_s", "gradient")):
        if "value" in r.get(key, {}):
            f = r[key]
            details.append(
                f"first {what} call per fresh process ({f['horizon_s']:.0f} s): "
                + ", ".join(f"{x:.2f}" for x in f["processes"])
                + " s"
            )
    if "value" in r.get("gradient_over_forward", {}):
        q = r["gradient_over_forward"]
        details.append(
            f"warm gradient {q['gradient_s']:.3f} s vs forward {q['forward_s']:.4f} s "
            f"({q['horizon_s']:.0f} s; median of pairwise ratios {q['pairwise_ratio_median']:.1f}; "
            f"ratio of CPU times {q['cpu_ratio']:.1f})"
        )
    if "value" in r.get("batch_speedup", {}):
        b = r["batch_speedup"]
        details.append(
            f"batch ({b['horizon_s']:.0f} s per member): jaxsim "
            + ", ".join(f"{c} {min(v):.3f} s" for c, v in b["jaxsim_s"].items())
            + f"; Basilisk 2 processes {min(b['bsk_2proc_s_per_member']) * 1e3:.1f} ms per member "
            f"({b['bsk_members_measured']} members measured, x {BATCH})"
        )
    if "value" in r.get("j2_over_heyoka", {}):
        j = r["j2_over_heyoka"]
        details.append(
            f"J2 (heyoka {j['heyoka']}): "
            + ", ".join(
                f"{n} {v['run_s'] * 1e3:.2f} ms at {v['err_m']:.1e} m vs heyoka "
                f"{cm.fmt(None if v['heyoka_s'] is None else v['heyoka_s'] * 1e3)} ms"
                for n, v in j["solvers"].items()
            )
        )
    if "value" in r.get("ci_wall_min", {}):
        details.append(f"CI log `{data['ci_log']}`: {r['ci_wall_min']['summary']}")
    if details:
        md += [""] + [f"- {d}." for d in details]
    return "\n".join(md)


# -------------------------------------------------------------------------------------------- run
def run(quick=False, only=ROWS, ci_log=None, max_kernels=20, processes=None) -> dict:
    orbit = 600.0 if quick else ORBIT_S
    rows, kernels = {}, None

    def step(key, fn):
        if key not in only:
            return
        t0 = time.perf_counter()
        rows[key] = fn()
        print(f"{key}: {rows[key].get('value', rows[key].get('skipped'))} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip

    if "kernels" in only:
        kernels = kernel_counts()
        rows["kernels"] = {"value": kernels["combined_drift"]["kernels"]}
    check, _ = (
        kernel_check(kernels["combined_drift"]["kernels"], max_kernels) if kernels else (None, None)
    )
    if check:
        print(check, flush=True)
    step("combined_ratio", lambda: combined_vs_basilisk(orbit, 3))
    firsts = {"first_simulate_s", "first_gradient_s", "gradient_over_forward"}
    if firsts & set(only):
        t0 = time.perf_counter()
        fc = first_calls(orbit, 60.0 if quick else GRAD_S, processes or (1 if quick else 2), 3)
        rows.update({k: v for k, v in fc.items() if k in only})
        print({k: round(v["value"], 3) for k, v in fc.items()}, f"({time.perf_counter() - t0:.0f} s)",
              flush=True)  # fmt: skip
    step("batch_speedup",
         lambda: batch_vs_basilisk(20.0 if quick else 60.0, quick, 2))  # fmt: skip
    step("j2_over_heyoka", lambda: j2_vs_heyoka(("Dopri8",) if quick else ("Tsit5", "Dopri8"), 2))
    if "ci_wall_min" in only:
        rows["ci_wall_min"] = (
            ci_wall_time(Path(ci_log).read_text(errors="replace")) if ci_log
            else {"skipped": "not measured here (no --ci-log)"}
        )  # fmt: skip
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "quick": quick,
        "ci_log": str(ci_log) if ci_log else None,
        "kernels": kernels,
        "kernel_check": check,
        "max_kernels": max_kernels,
        "rows": rows,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--quick", action="store_true", help="shortened horizons, fewer repeats")
    p.add_argument("--only", nargs="+", choices=ROWS, default=list(ROWS), help="rows to measure")
    p.add_argument("--ci-log", help="pytest log of the default test run (CI-time row)")
    p.add_argument("--check", action="store_true", help="exit 1 if the kernel check fails")
    p.add_argument("--max-kernels", type=int, default=FIGURES["kernels"][1])
    p.add_argument("--processes", type=int, help="fresh processes per first-call row")
    p.add_argument("--out", help="results folder (default benchmarks/results)")
    p.add_argument("--child", choices=("simulate", "gradient"), help=argparse.SUPPRESS)
    p.add_argument("--horizon", type=float, help=argparse.SUPPRESS)
    p.add_argument("--reps", type=int, default=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.horizon, a.reps)))
        return 0
    if a.check and "kernels" not in a.only:
        a.only.append("kernels")
    t0 = time.perf_counter()
    data = run(a.quick, tuple(a.only), a.ci_log, a.max_kernels, a.processes)
    data["wall_s"] = time.perf_counter() - t0
    data["loadavg_1m_end"] = os.getloadavg()[0]
    data["table"] = table_rows(data)
    md = to_markdown(data)
    default, cm.RESULTS = cm.RESULTS, Path(a.out) if a.out else cm.RESULTS
    try:
        pj, pm = cm.write_results(NAME, data, md)
    finally:
        cm.RESULTS = default
    print(md)
    print(f"wrote {pj} and {pm} ({data['wall_s']:.0f} s)")
    if data["kernel_check"]:
        print(data["kernel_check"])
    failed = (
        data["kernel_check"] is not None
        and not kernel_check(data["kernels"]["combined_drift"]["kernels"], a.max_kernels)[1]
    )
    return 1 if a.check and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
