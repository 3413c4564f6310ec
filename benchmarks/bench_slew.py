"""Benchmark: closed-loop reaction-wheel slew (RK4 + MRP feedback on a 10 Hz clock), jaxsim vs Basilisk.

The model is the flight-software cross-validation scenario of `tests/reference/basilisk_slew.py` (rigid
hub + 3 balanced reaction wheels, no gravity; flight software `mrpFeedback -> rwMotorTorque` on a
0.1 s task; 100 s, 1 s samples), run with classical RK4 at two dynamics steps:

- `dyn 0.1 s`: one RK4 step per FSW tick (1000 steps, 1000 ticks),
- `dyn 0.05 s`: the scenario's own step, two RK4 steps per tick (2000 steps, 1000 ticks).

jaxsim runs `effectors.RWAttitudeFSW` on a `jaxsim.Clock(0.1)` through the public
`jaxsim.simulate(..., solver=RK4(), clocks=(fsw,), sample_dt=1.0)` (as
`tests/effectors/test_flight_software.py`), timed with `jax.block_until_ready`:

- the compiled run: that call wrapped in the public `jaxsim.jit` (spacecraft, flight software and
  initial state as arguments): the first call (trace + compile + run) and the fastest of repeated
  calls (run); compile = first - run;
- a repeated bare `jaxsim.simulate` call (what a script's second identical call costs): it
  compiles again on every call when the driver's jit cache misses (column `repeat call`; the flag
  `repeat_call_recompiles` is set when it costs more than half the first call).

Basilisk is timed on `ExecuteSimulation()` alone (`basilisk_slew.run(timing=...)`), best of fresh
builds. The repetitions of the compiled jaxsim run and of Basilisk are interleaved (jaxsim call,
Basilisk run, jaxsim call, ...) so that load changes on a shared machine hit both alike. Ratio =
jaxsim run / Basilisk `ExecuteSimulation()` (< 1: jaxsim faster). The samples of both runs are
compared (max |sigma_BN diff|, |omega_BN_B diff|, |wheel speed diff|) as a sanity check.

For scale, `open-loop floor`: the same spacecraft, steps and samples without the clock (constant
wheel torque, plain fixed-step driver) under `jaxsim.jit`: what the dynamics alone cost.

Run: `python -m benchmarks.bench_slew [--quick] [--repeats N]` (writes `benchmarks/results/slew.json`
and `slew.md`). Without Basilisk (`bsk`) installed the Basilisk columns are skipped with a note.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm
from tests.reference import basilisk_scenarios as bs, basilisk_slew as bsl  # noqa: E402


NAME = "slew"
TITLE = "Closed-loop RW slew (RK4, MRP feedback on a 0.1 s clock, 100 s)"
FSW_DT = 0.1  # [s]
CASES = (("dyn 0.1 s", 0.1), ("dyn 0.05 s", 0.05))  # (label, dynamics step [s])


def _timed(fn):
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t0, out


def _diffs(sol, ref) -> dict:
    return {
        "max_abs_sigma_BN": float(
            np.max(np.abs(np.asarray(sol.outputs["sigma_BN"]) - ref["sigma_BN"]))
        ),
        "max_abs_omega_BN_B": float(
            np.max(np.abs(np.asarray(sol.outputs["omega_BN_B"]) - ref["omega_BN_B"]))
        ),
        "max_abs_rw_Omega": float(
            np.max(np.abs(np.asarray(sol.outputs["rw"]["Omega"]) - ref["Omega"]))
        ),
    }


def run(quick: bool = False, repeats: int | None = None) -> dict:
    import jax.numpy as jnp

    import jaxsim as js

    have_bsk = bs.available()
    reps = repeats if repeats is not None else (3 if quick else 25)
    call_reps = 1 if quick else 2
    if reps < 1:
        raise ValueError(f"bench_slew.run: repeats must be >= 1, got {reps!r}.")
    cases = CASES[:1] if quick else CASES
    rows, accuracy = [], {}
    for label, dyn_dt in cases:
        s = {**bsl.SCENARIO, "fsw_dt": FSW_DT, "dyn_dt": dyn_dt}
        t1 = float(s["duration"])
        n_steps, n_ticks = int(round(t1 / dyn_dt)), int(round(t1 / FSW_DT))
        sc, fsw, y0 = bsl.build_jaxsim(s)

        def call(sc, fsw, y0, t1=t1, dyn_dt=dyn_dt, sample_dt=s["sample_dt"]):
            return js.simulate(
                sc, y0, t1, dt=dyn_dt, solver=js.RK4(), clocks=(fsw,), sample_dt=sample_dt
            )

        # The compiled run: the same call under `jaxsim.jit` (traced once, then cached).
        jitted = js.jit(call)
        first, sol = _timed(lambda: jitted(sc, fsw, y0))
        runs_j, runs_b, ref = [], [], None
        for _ in range(reps):  # interleaved: a load change hits both codes alike
            w, sol = _timed(lambda: jitted(sc, fsw, y0))
            runs_j.append(w)
            if have_bsk:
                timing = {}
                ref = bsl.run(timing=timing, fsw_dt=FSW_DT, dyn_dt=dyn_dt)
                runs_b.append(timing["execute_s"])
        # The bare public call, repeated: what a user's second `simulate` costs.
        calls, bare = [], None
        for _ in range(call_reps):
            w, bare = _timed(lambda: call(sc, fsw, y0))
            calls.append(w)
        # Floor: the same spacecraft open loop (constant wheel torque, no clock) in the plain
        # fixed-step driver, same steps and samples: what the clock and the FSW add on top.
        u = {"rw": {"motor_torque": jnp.full(3, 1e-3)}}
        open_loop = js.jit(
            lambda sc, y0, args, t1=t1, dyn_dt=dyn_dt, sample_dt=s["sample_dt"]: js.simulate(
                sc, y0, t1, dt=dyn_dt, solver=js.RK4(), sample_dt=sample_dt, args=args
            )
        )
        t_open = cm.time_jax(open_loop, sc, y0, u, repeats=reps)
        run_s = min(runs_j)
        row = {
            "case": label,
            "dyn_dt_s": dyn_dt,
            "fsw_dt_s": FSW_DT,
            "n_steps": n_steps,
            "n_ticks": n_ticks,
            "repeats": reps,
            "jaxsim_first_call_s": first,
            "jaxsim_compile_s": max(first - run_s, 0.0),
            "jaxsim_run_s": run_s,
            "jaxsim_run_median_s": statistics.median(runs_j),
            "jaxsim_us_per_tick": run_s / n_ticks * 1e6,
            "jaxsim_open_loop_run_s": t_open["run_s"],
            "jaxsim_repeat_call_s": min(calls) if calls else None,
            "repeat_call_recompiles": (min(calls) > 0.5 * first) if calls else None,
        }
        if bare is not None:
            row["max_abs_diff_jit_vs_call_sigma_BN"] = float(
                np.max(np.abs(np.asarray(sol.outputs["sigma_BN"]) - bare.outputs["sigma_BN"]))
            )
        if have_bsk:
            b = min(runs_b)
            row["bsk_execute_s"] = b
            row["bsk_execute_median_s"] = statistics.median(runs_b)
            row["bsk_us_per_tick"] = b / n_ticks * 1e6
            row["ratio_jaxsim_over_bsk"] = run_s / b
            row["ratio_median"] = row["jaxsim_run_median_s"] / row["bsk_execute_median_s"]
            row["ratio_open_loop_over_bsk"] = t_open["run_s"] / b
            if calls:
                row["ratio_repeat_call_over_bsk"] = min(calls) / b
            accuracy[label] = _diffs(sol, ref)
        rows.append(row)
        print(
            f"{label:10s} steps={n_steps:5d} ticks={n_ticks:5d}  jaxsim run {run_s * 1e3:8.2f} ms "
            f"(median {row['jaxsim_run_median_s'] * 1e3:.2f}, first call {first:.1f} s, "
            f"repeat bare call {cm.fmt(row['jaxsim_repeat_call_s'])} s, "
            f"open-loop floor {t_open['run_s'] * 1e3:.2f} ms)"
            + (
                f"  Basilisk execute {row['bsk_execute_s'] * 1e3:8.2f} ms "
                f"(median {row['bsk_execute_median_s'] * 1e3:.2f})  ratio "
                f"{row['ratio_jaxsim_over_bsk']:.3f} (medians {row['ratio_median']:.3f})  "
                f"max|dsigma| {accuracy[label]['max_abs_sigma_BN']:.2e}"
                if have_bsk
                else "  Basilisk: skipped (bsk not installed)"
            ),
            flush=True,
        )
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "basilisk": bs.version() if have_bsk else None,
        "note": None if have_bsk else "Basilisk (bsk) not importable: Basilisk columns skipped",
        "duration_s": float(bsl.SCENARIO["duration"]),
        "rows": rows,
        "accuracy_vs_basilisk": accuracy,
    }


def to_markdown(data: dict) -> str:
    env = data["environment"]
    cols = [
        ("case", "case"),
        ("n_steps", "RK4 steps"),
        ("n_ticks", "FSW ticks"),
        ("jaxsim_run_s", "jaxsim run [s]"),
        ("jaxsim_first_call_s", "jaxsim first call [s]"),
        ("bsk_execute_s", "Basilisk execute [s]"),
        ("ratio_jaxsim_over_bsk", "jaxsim/Basilisk"),
        ("ratio_median", "ratio of medians"),
        ("jaxsim_open_loop_run_s", "open-loop floor [s]"),
        ("ratio_open_loop_over_bsk", "floor/Basilisk"),
        ("jaxsim_repeat_call_s", "repeat bare call [s]"),
        ("repeat_call_recompiles", "recompiles"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), Basilisk "
        f"{data['basilisk'] or 'not installed'}, {env['cpu_count']} CPUs, "
        f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}; "
        f"horizon {data['duration_s']:.0f} s."
    )
    if data["note"]:
        md += ["", f"**Note:** {data['note']}."]
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    md.append(
        "jaxsim run: `jaxsim.simulate(..., solver=RK4(), clocks=(fsw,), sample_dt=1.0)` under "
        "`jaxsim.jit`, fastest of repeated calls after a first (compiling) call; Basilisk: "
        "`ExecuteSimulation()` only, fastest of fresh builds; the repetitions of the two are "
        "interleaved. `repeat bare call`: the same `jaxsim.simulate` called again without a "
        "wrapping jit (`recompiles`: it cost more than half the first call). `open-loop floor`: "
        "the same spacecraft and steps without the clock (constant wheel torque, plain fixed-step "
        "driver, `jaxsim.jit`): the part of the run that is the dynamics alone."
    )
    if data["accuracy_vs_basilisk"]:
        md += ["", "Agreement with the live Basilisk run (1 s samples):", ""]
        for k, v in data["accuracy_vs_basilisk"].items():
            md.append(f"- `{k}`: " + ", ".join(f"{a} {cm.fmt(b)}" for a, b in v.items()))
    return "\n".join(md)


def main(argv=None) -> int:
    return cm.main(
        NAME,
        TITLE,
        lambda a: run(quick=a.quick, repeats=a.repeats),
        to_markdown,
        argv,
        quick="only the 0.1 s case, 3 repeats",
        options=[
            ("--repeats", dict(type=int, default=None, help="timed repetitions (default 25)"))
        ],
    )


if __name__ == "__main__":
    raise SystemExit(main())
