"""Benchmark: the cost of checking event conditions inside every step (issue #33 item 3).

Since the check grid (`jaxsim/_events/_guard.py`), every step of an event run checks each condition
on the step's dense output (values and rates at the step's ends and midpoint, more points only
where the condition comes near zero) instead of comparing signs at step ends. It changes neither
the steps nor the number of RHS evaluations; this script measures what it costs in run time.

Cases (all with events, all finding the same firings with and without the checks):

- `ball Tsit5`: bdsim's zero-crossing case (`tests/data/bdsim/zero_crossing`: a ball dropped from
  10 m, restitution 0.8, and a terminal event on the distance travelled), rtol 1e-12: the RHS is a
  few flops, so this is the worst case for the relative cost of the checks;
- `ball RK4`: the same with RK4 at dt = 1e-3 (4000 checked steps);
- `combined RK4`: the `combined` spacecraft (`effectors.scenarios.combined`: hub, 3 reaction
  wheels, 2 hinged panels, point-mass Earth, gravity gradient, external torque), RK4 at 0.1 s for
  600 s (6000 steps) with two events (time = 300 s, fires once; the orbit radius 1 km below its
  start, never fires): a realistic RHS;
- `orbit Tsit5`: a spacecraft (`effectors.Spacecraft`, point-mass Earth) on an eccentric orbit
  (perigee 6800 km, apogee 8000 km), three orbits, an event on the radius crossing 7400 km in both
  directions (6 firings), rtol 1e-10.

Each case is run warm (compiled once) `REPEATS` times; the median time is reported. With
`--baseline DIR` (a checkout of jaxsim before the checks, e.g. `git worktree add /tmp/base
ecd864d~1`), the same cases run in a subprocess on that checkout and the table compares both:
time ratio, RHS count and event times.

Run: `python -m benchmarks.bench_event_checks [--baseline DIR]` (writes
`benchmarks/results/event_checks.json`, `.md`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


if "--worker" not in sys.argv:  # the worker imports the baseline's jaxsim (its PYTHONPATH)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

NAME = "event_checks"
TITLE = "Events: cost of the check grid inside every step"
REPEATS = 21
ROUNDS = 2  # alternating rounds per checkout with --baseline
G = 9.81
MU = 3.986004418e14  # [m^3/s^2]


def _cases():
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np

    import effectors as fx
    import jaxsim as js

    class Ball(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="ball")

        def init_state(self):
            return {"v": jnp.asarray(0.0), "h": jnp.asarray(10.0), "d": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"v": jnp.asarray(-G), "h": y["v"], "d": jnp.abs(y["v"])}

    def bounce(t, y, z, args):
        return {**y, "v": -0.8 * y["v"]}, z

    ground = js.Event(lambda t, y, a: y["h"], direction="falling", reset=bounce, name="ground")
    stop = js.Event(lambda t, y, a: y["d"] - 25.0, direction="rising", terminal=True, name="stop")
    ball = Ball()

    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), gravity=(fx.PointMassGravity(MU),))
    r_p, r_a = 6800e3, 8000e3
    a = 0.5 * (r_p + r_a)
    v_p = np.sqrt(MU * (2 / r_p - 1 / a))
    z3 = np.zeros(3)
    y_orbit = sc.init_state(np.array([r_p, 0.0, 0.0]), np.array([0.0, v_p, 0.0]), z3, z3)
    period = 2 * np.pi * np.sqrt(a**3 / MU)
    radius = js.Event(
        lambda t, y, a: (jnp.linalg.norm(y["hub"]["r_BN_N"]) - 7400e3) / 7400e3,
        direction="both",
        name="radius",
    )

    from effectors.scenarios import combined

    sc_c, y_c, _ = combined()
    r0 = float(np.linalg.norm(np.asarray(y_c["hub"]["r_BN_N"])))
    # One firing (t = 300 s) and one condition that never fires: both checked at every step.
    half = js.Event(lambda t, y, a: t - 300.0, direction="rising", name="half")
    low = js.Event(
        lambda t, y, a: (jnp.linalg.norm(y["hub"]["r_BN_N"]) - (r0 - 1e3)) / r0,
        direction="falling",
        name="low",
    )

    return {
        "combined RK4": lambda: js.simulate(
            sc_c,
            y_c,
            600.0,
            dt=0.1,
            events=(half, low),
            max_events=2,
            outputs=False,
        ),  # fmt: skip
        "ball Tsit5": lambda: js.simulate(
            ball,
            ball.init_state(),
            10.0,
            solver=js.Tsit5(),
            rtol=1e-12,
            atol=1e-14,
            events=(ground, stop),
            max_events=4,
        ),  # fmt: skip
        "ball RK4": lambda: js.simulate(
            ball,
            ball.init_state(),
            10.0,
            solver=js.RK4(),
            dt=1e-3,
            events=(ground, stop),
            max_events=4,
        ),  # fmt: skip
        "orbit Tsit5": lambda: js.simulate(
            sc,
            y_orbit,
            3 * period,
            solver=js.Tsit5(),
            rtol=1e-10,
            atol=1e-4,
            events=(radius,),
            max_events=8,
        ),  # fmt: skip
    }


def measure(repeats: int = REPEATS) -> dict:
    """`{case: {run_s, first_call_s, num_rhs, num_steps, events}}` on the jaxsim importable here."""
    import jax
    import numpy as np

    out = {}
    for name, fn in _cases().items():
        t0 = time.perf_counter()
        sol = jax.block_until_ready(fn())
        first = time.perf_counter() - t0
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sol = jax.block_until_ready(fn())
            runs.append(time.perf_counter() - t0)
        n = int(sol.events.count)
        out[name] = {
            "run_s": statistics.median(runs),
            "first_call_s": first,
            "num_rhs": int(sol.stats["num_rhs"]),
            "num_steps": int(sol.stats["num_steps"]),
            "events": np.asarray(sol.events.t[:n]).tolist(),
        }
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a jaxsim checkout before the checks (compared)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # run in the baseline checkout: print the measurements
        import jaxsim

        print(json.dumps({**measure(), "jaxsim": jaxsim.__file__}))
        return

    from benchmarks import _common as cm

    def worker(checkout):
        # One process per checkout and round; rounds alternate, so that a change of the machine's
        # load hits both alike; per case the fastest round's median is kept.
        env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}
        code = (
            "import runpy, sys; sys.argv = ['bench', '--worker']; "
            f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
            cwd=str(Path(checkout).resolve()),
        )  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    def fastest(results):
        out = {}
        for name in results[0]:
            if name != "jaxsim":
                out[name] = min((r[name] for r in results), key=lambda m: m["run_s"])
        return out

    if args.baseline:
        bases, nows = [], []
        for _ in range(ROUNDS):
            bases.append(worker(args.baseline))
            nows.append(worker(cm.ROOT))
        if Path(bases[0]["jaxsim"]).resolve() == Path(nows[0]["jaxsim"]).resolve():
            raise RuntimeError(f"the baseline run imported this checkout ({bases[0]['jaxsim']})")
        base, now = fastest(bases), fastest(nows)
    else:
        base, now = None, measure()
    rows = []
    for name, m in now.items():
        row = {
            "case": name,
            "run_ms": 1e3 * m["run_s"],
            "num_rhs": m["num_rhs"],
            "num_steps": m["num_steps"],
            "events": len(m["events"]),
        }
        if base is not None:
            b = base[name]
            row["base_run_ms"] = 1e3 * b["run_s"]
            row["ratio"] = m["run_s"] / b["run_s"]
            row["base_num_rhs"] = b["num_rhs"]
            row["base_events"] = len(b["events"])
            if len(b["events"]) == len(m["events"]):
                row["max_event_time_diff_s"] = max(
                    (abs(x - y) for x, y in zip(m["events"], b["events"])), default=0.0
                )
        rows.append(row)
    cols = [("case", "case"), ("events", "firings"), ("num_steps", "steps"), ("num_rhs", "RHS")]
    if base is not None:
        cols += [
            ("base_num_rhs", "RHS before"),
            ("base_run_ms", "before [ms]"),
            ("run_ms", "after [ms]"),
            ("ratio", "after / before"),
            ("max_event_time_diff_s", "max |dt_event| [s]"),
        ]
    else:
        cols += [("run_ms", "run [ms]")]
    md = (
        f"## {TITLE}\n\n"
        f"Warm runs, median of {REPEATS} (the faster of {ROUNDS} alternating rounds per\n"
        "checkout); before = `--baseline` checkout (sign test at step ends, diffrax's `Event`),\n"
        "after = the check grid. The machine is shared (load average in the JSON): timings of\n"
        "the small cases vary by 2x between rounds.\n\n" + cm.markdown_table(rows, cols) + "\n"
    )
    data = {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "repeats": REPEATS,
        "rows": rows,
    }
    paths = cm.write_results(NAME, data, md)
    print(md)
    print("wrote", *paths)


if __name__ == "__main__":
    main()
