"""Benchmark: RHS evaluations and accuracy of the clocked driver on the seven bdsim cases, vs bdsim.

The cases are the bdsim 1.4.0 reference runs in `tests/data/bdsim/` (spec `.json`: parameters,
solver settings and what bdsim measured, including its RHS count `rhs_evals_counted`; `.npz`: its
logged samples). The models are restated compactly here from `tests/engine/events/test_bdsim_cases.py` (same
equations, same jaxsim calls), so the benchmark needs no pytest.

For every case jaxsim runs with `Tsit5` at bdsim's tolerances (rtol 1e-3, atol 1e-6; scipy RK45
in bdsim), once without a maximum step (`bdsim tol`: jaxsim declares scheduled discontinuities as
segment boundaries, so it needs none; `step_response` also passes its step as a discontinuity, which
routes it through the clocked driver) and once with bdsim's `max_step` as `dtmax` (`+ max_step`);
where bdsim also recorded a tight-tolerance run (`step_response`, `zero_crossing`), jaxsim runs at
those tolerances too (`tight`). RHS evaluations: jaxsim's `stats["num_rhs"]` (counts every drift
call, see `tests/engine/events/test_bdsim_cases.py::test_rhs_count_is_true`), bdsim's `rhs_evals_counted`.

Error (the same measure for both codes, per case):

- `step_response`: max |x - analytic| over bdsim's 103 sample times;
- `square_wave`: max |x - x_exact| over bdsim's 182 sample times (exact piecewise-LTI solution);
- `zero_crossing`: max error of the two impact times and the STOP time (analytic);
- `stop_bool`: |t_stop - 0.2|;
- `sampled_pid`: max error of theta(3), omega(3) vs the closed-form tick recursion;
- `multi_clock_discrete`: max |z_k - sin(2 pi 0.2 t_k)| over both clocks' logs (no continuous state);
- `simultaneous_events`: |x(1) - exact| of the integrator driven by a step at 0.7000005.

An `equal accuracy` row per bdsim run: the fewest-RHS point of a jaxsim tolerance sweep (rtol
1e-3 ... 1e-12, atol = 1e-3 rtol, no maximum step) whose error is <= bdsim's (errors below `ROUNDOFF` = 1e-14, round-off of these O(1) quantities,
count as equal). Target (issue #4,
from the events issue): jaxsim needs no more RHS evaluations than bdsim at equal or better
accuracy, checked on those rows.

Run: `python -m benchmarks.bench_events [--quick]` (`--quick`: no `+ max_step` rows; writes `benchmarks/results/events.json`, `.md`).
"""

from __future__ import annotations

import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm  # noqa: E402


NAME = "events"
TITLE = "Events and clocks: RHS evaluations on the seven bdsim cases, jaxsim vs bdsim 1.4.0"
DATA = cm.ROOT / "tests" / "data" / "bdsim"
# jaxsim tolerance sweep for the equal-accuracy rows; atol/rtol = 1e-3 as in bdsim's runs
# (rtol 1e-3, atol 1e-6). rtol and atol are dynamic in the clocked driver (no recompilation).
SWEEP_RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12)
SWEEP_ATOL_OVER_RTOL = 1e-3
# Errors below this count as equal: every compared quantity is O(0.1 - 25), so 1e-14 absolute is a
# few ulps of double round-off (stop_bool: bdsim 2.8e-16, jaxsim ~1e-15, both the float rounding of
# t = 0.2 found by root finding).
ROUNDOFF = 1e-14


def _spec(name):
    return json.loads((DATA / f"{name}.json").read_text()), np.load(DATA / f"{name}.npz")


def _models():
    """The case models (as in `tests/engine/events/test_bdsim_cases.py`); imported lazily (JAX)."""
    import equinox as eqx
    import jax.numpy as jnp

    import jaxsim as js

    class Lag(js.AbstractDynamicObject):
        u: js.Step
        tau: float = 0.5
        name: str = eqx.field(static=True, default="lag")

        def init_state(self):
            return {"x": jnp.asarray(0.5)}

        def drift(self, t, y, args):
            return {"x": (self.u(t) - y["x"]) / self.tau}

        def breakpoints(self):
            return self.u.breakpoints()

    class SecondOrder(js.AbstractDynamicObject):
        u: js.SquareWave
        name: str = eqx.field(static=True, default="plant")

        def init_state(self):
            return {"x": jnp.zeros(2)}

        def drift(self, t, y, args):
            x1, x2 = y["x"]
            return {"x": jnp.stack([x2, -16.0 * x1 - 2.4 * x2 + 16.0 * self.u(t)])}

    class Motor(js.AbstractDynamicObject):
        Km: float
        tau_m: float
        name: str = eqx.field(static=True, default="motor")

        def init_state(self):
            return {"theta": jnp.asarray(0.0), "omega": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            u = args["motor"]["u"]
            return {"theta": y["omega"], "omega": (-y["omega"] + self.Km * u) / self.tau_m}

    class Ball(js.AbstractDynamicObject):
        g: float = -9.81
        name: str = eqx.field(static=True, default="ball")

        def init_state(self, h0=10.0):
            return {"v": jnp.asarray(0.0), "h": jnp.asarray(h0), "d": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"v": jnp.asarray(self.g), "h": y["v"], "d": jnp.abs(y["v"])}

    class Integrator(js.AbstractDynamicObject):
        u: js.Step
        name: str = eqx.field(static=True, default="int3")

        def init_state(self):
            return {"x": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"x": self.u(t)}

    class Nothing(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="none")

        def init_state(self):
            return {}

        def drift(self, t, y, args):
            return {}

    class Ramp1(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="x")

        def init_state(self):
            return {"x": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"x": jnp.asarray(1.0)}

    return dict(Lag=Lag, SecondOrder=SecondOrder, Motor=Motor, Ball=Ball, Integrator=Integrator,
                Nothing=Nothing, Ramp1=Ramp1)  # fmt: skip


def _case(name, spec, solve, bdsim, metric, tight=None, discrete=False):
    """A case: `solve(rtol, atol, dtmax) -> (solution, error)` and bdsim's `(RHS, error)` figures
    under `"bdsim tol"` (its default run) and `"tight"` (its tight run, settings `tight`)."""
    return dict(name=name, spec=spec, solve=solve, bdsim=bdsim, metric=metric, tight=tight,
                discrete=discrete)  # fmt: skip


def _row(case, label, rtol, atol, dtmax, rhs, err, bd_key):
    bdsim_rhs, bdsim_err = case["bdsim"][bd_key]
    return {
        "case": case["name"],
        "setting": label,
        "rtol": rtol,
        "atol": atol,
        "dtmax": dtmax,
        "jaxsim_rhs": rhs,
        "bdsim_rhs": bdsim_rhs,
        "bdsim_run": bd_key,
        "rhs_ratio": rhs / bdsim_rhs if bdsim_rhs else None,
        "jaxsim_err": float(err),
        "bdsim_err": float(bdsim_err),
        "error_metric": case["metric"],
        "target_met": bool(rhs <= bdsim_rhs and err <= max(bdsim_err, ROUNDOFF)),
    }


def case_rows(case, max_step_row: bool = True) -> tuple[list, list]:
    """Rows of one case (see the module docstring) and its tolerance sweep `[(rtol, RHS, error)]`."""
    spec = case["spec"]
    if case["discrete"]:
        sol, err = case["solve"](None, None, None)
        return [_row(case, "no continuous state", None, None, None, int(sol.stats["num_rhs"]), err,
                     "bdsim tol")], []  # fmt: skip
    s = spec["solver"]
    rtol, atol, max_step = s["rtol"], s["atol"], s["max_step"]
    if max_step == "T/100":
        max_step = (spec["horizon"]["tf"] - spec["horizon"]["t0"]) / 100.0
    run = lambda r, a, d: (lambda sol, e: (int(sol.stats["num_rhs"]), float(e)))(
        *case["solve"](r, a, d)
    )
    rows = [_row(case, "bdsim tol", rtol, atol, None, *run(rtol, atol, None), "bdsim tol")]
    if max_step_row:  # a second compilation (`dtmax` given or not is static)
        rows.append(
            _row(case, "+ max_step", rtol, atol, max_step, *run(rtol, atol, max_step), "bdsim tol")
        )
    # Tolerance sweep (rtol/atol are dynamic in the clocked driver: one compilation).
    sweep = [(r, *run(r, r * SWEEP_ATOL_OVER_RTOL, None)) for r in SWEEP_RTOLS]

    def equal_accuracy(bd_key):
        bd_err = case["bdsim"][bd_key][1]
        ok = [p for p in sweep if p[2] <= max(bd_err, ROUNDOFF)]
        r, n, e = min(ok, key=lambda p: p[1]) if ok else min(sweep, key=lambda p: p[2])
        label = f"equal accuracy{' (tight)' if bd_key == 'tight' else ''}"
        return _row(case, label, r, r * SWEEP_ATOL_OVER_RTOL, None, n, e, bd_key)

    rows.append(equal_accuracy("bdsim tol"))
    if case["tight"] is not None:
        t = case["tight"]
        rows.append(_row(case, "tight", t["rtol"], t["atol"], None,
                         *run(t["rtol"], t["atol"], None), "tight"))  # fmt: skip
        rows.append(equal_accuracy("tight"))
    return rows, sweep


# --------------------------------------------------------------------------------------- cases
def case_step_response(M):
    import jax.numpy as jnp

    import jaxsim as js

    spec, ref = _spec("step_response")
    p, ex = spec["parameters"], spec["bdsim_measured"]["extra"]
    model = M["Lag"](js.Step(p["T_step"], p["off"], p["on"]), p["tau"])
    ts, exact = jnp.asarray(ref["t"]), ref["x_analytic"]
    tight = ex["tight_tol"]
    bd = {"bdsim tol": (spec["bdsim_measured"]["summary"]["rhs_evals_counted"],
                        ex["max_abs_err_vs_analytic"]),
          "tight": (tight["summary"]["rhs_evals_counted"], tight["max_abs_err_vs_analytic"])}  # fmt: skip

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 3.0, solver=js.Tsit5(), rtol=rtol, atol=atol,
                          dtmax=dtmax, ts=ts, discontinuities=(model.u,))  # fmt: skip
        return sol, np.max(np.abs(np.asarray(sol.ys["x"]) - exact))

    return _case("step_response", spec, solve, bd, "max |x - analytic| at bdsim's samples", tight)


def case_square_wave(M):
    import jax.numpy as jnp

    import jaxsim as js

    spec, ref = _spec("square_wave")
    p = spec["parameters"]
    u = js.SquareWave(p["freq_hz"], p["duty"], p["phase_cycles"], p["amplitude"], p["offset"])
    model = M["SecondOrder"](u)
    ts = jnp.asarray(ref["t"])
    bd_rhs = spec["bdsim_measured"]["summary"]["rhs_evals_counted"]
    bd_err = np.max(np.abs(ref["x"] - ref["x_exact"]))

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 20.0, solver=js.Tsit5(), rtol=rtol,
                          atol=atol, dtmax=dtmax, ts=ts, discontinuities=(u,))  # fmt: skip
        return sol, np.max(np.abs(np.asarray(sol.ys["x"]) - ref["x_exact"]))

    return _case("square_wave", spec, solve, {"bdsim tol": (bd_rhs, bd_err)},
                 "max |x - exact| at bdsim's samples")  # fmt: skip


def case_zero_crossing(M):
    import jax.numpy as jnp

    import jaxsim as js

    spec, _ = _spec("zero_crossing")
    an = spec["analytic_event_times"]
    exact = np.r_[an["impacts"], an["stop"]]
    ex = spec["bdsim_measured"]["extra"]
    tight = ex["tight_tol"]
    bd_loose = np.max(np.abs(np.r_[ex["impact_times_bdsim"], ex["stop_time_bdsim"]] - exact))
    bd_tight = np.max(np.abs(np.asarray(tight["crossing_times"]) - exact))
    bd = {"bdsim tol": (spec["bdsim_measured"]["summary"]["rhs_evals_counted"], bd_loose),
          "tight": (tight["summary"]["rhs_evals_counted"], bd_tight)}  # fmt: skip

    def bounce(t, y, z, args):
        return {**y, "v": -0.8 * y["v"]}, z

    ground = js.Event(lambda t, y, a: y["h"], direction="falling", reset=bounce, name="ground")
    stop = js.Event(lambda t, y, a: y["d"] - 25.0, direction="rising", terminal=True, name="stop")
    model = M["Ball"]()

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 10.0, solver=js.Tsit5(), rtol=rtol,
                          atol=atol, dtmax=dtmax, events=(ground, stop), max_events=4,
                          ts=jnp.linspace(0.0, 10.0, 21))  # fmt: skip
        n = int(sol.events.count)
        t_ev = np.asarray(sol.events.t[:n])
        return sol, (np.max(np.abs(t_ev - exact)) if n == 3 else np.inf)

    return _case("zero_crossing", spec, solve, bd, "max |t_event - analytic| (2 impacts + STOP)",
                 tight)  # fmt: skip


def case_stop_bool(M):
    import jaxsim as js

    spec, _ = _spec("stop_bool")
    ex = spec["bdsim_measured"]["extra"]
    bd_rhs = spec["bdsim_measured"]["summary"]["rhs_evals_counted"]
    bd_err = abs(ex["stop_time"][0] - 0.2)
    stop = js.Event(lambda t, y, a: y["x"] > 0.2, direction="rising", terminal=True, name="stop")
    model = M["Ramp1"]()

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 5.0, solver=js.Tsit5(), rtol=rtol, atol=atol,
                          dtmax=dtmax, events=(stop,), max_events=1)  # fmt: skip
        return sol, abs(float(sol.t_final) - 0.2)

    return _case("stop_bool", spec, solve, {"bdsim tol": (bd_rhs, bd_err)}, "|t_stop - 0.2|")


def _pid_exact(p, n=300):
    """Closed-form tick recursion of the sampled PID case (plant LTI between ticks, u held)."""
    th = om = xI = u = e = 0.0
    h, tau, Km = p["T_vel"], p["tau_m"], p["Km"]
    a = np.exp(-h / tau)
    for k in range(1, n + 1):
        th, om = th + Km * u * h + (om - Km * u) * tau * (1 - a), Km * u + (om - Km * u) * a
        ev = p["Kp_pos"] * e - om
        u, xI = p["Kp_v"] * ev + xI, xI + p["Ki_v"] * h * ev
        if k % 5 == 0:
            e = (1.0 if Fraction(k, 100) >= Fraction(1, 2) else 0.0) - th
    return th, om


def case_sampled_pid(M):
    import jaxsim as js

    spec, _ = _spec("sampled_pid")
    p, ex = spec["parameters"], spec["bdsim_measured"]["extra"]
    th_x, om_x = _pid_exact(p)
    bd_rhs = spec["bdsim_measured"]["summary"]["rhs_evals_counted"]
    bd_err = max(abs(ex["theta_final"] - th_x), abs(ex["omega_final"] - om_x))
    step = js.Step(p["T_step"], 0.0, 1.0)

    def pos_update(t, y, z, args):
        e = step(t) - y["theta"]
        return {"e": e}, {"pos": {"e_held": e}}

    def vel_update(t, y, z, args):
        ev = p["Kp_pos"] * args["pos"]["e_held"] - y["omega"]
        u = p["Kp_v"] * ev + z["xI"]
        return {"xI": z["xI"] + p["Ki_v"] * p["T_vel"] * ev, "u": u}, {"motor": {"u": u}}

    vel = js.DiscreteModel("clock_vel", js.Clock(p["T_vel"]), vel_update, {"xI": 0.0, "u": 0.0})
    pos = js.DiscreteModel("clock_pos", js.Clock(p["T_pos"]), pos_update, {"e": 0.0})
    model = M["Motor"](p["Km"], p["tau_m"])

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 3.0, solver=js.Tsit5(), rtol=rtol, atol=atol,
                          dtmax=dtmax, clocks=(vel, pos), discontinuities=(step,))  # fmt: skip
        th, om = float(sol.ys["theta"][-1]), float(sol.ys["omega"][-1])
        return sol, max(abs(th - th_x), abs(om - om_x))

    return _case("sampled_pid", spec, solve, {"bdsim tol": (bd_rhs, bd_err)},
                 "max |theta(3), omega(3) - tick recursion|")  # fmt: skip


def case_multi_clock_discrete(M):
    import jax.numpy as jnp

    import jaxsim as js

    spec, ref = _spec("multi_clock_discrete")
    bd_rhs = spec["bdsim_measured"]["summary"]["rhs_evals_counted"]
    f = lambda t: np.sin(2 * np.pi * 0.2 * np.asarray(t))
    bd_err = max(
        np.max(np.abs(ref[f"{c}_X"][:, 0] - f(ref[f"{c}_t"]))) for c in ("clock1", "clock2")
    )

    def sampler(key):
        def upd(t, y, z, args):
            s = jnp.sin(2 * jnp.pi * 0.2 * t)
            return {"x": s}, {key: s}

        return upd

    c1 = js.DiscreteModel("clock1", js.Clock(0.5), sampler("zoh1"), {"x": 0.0}, {"zoh1": 0.0})
    c2 = js.DiscreteModel("clock2", js.Clock("1/3"), sampler("zoh2"), {"x": 0.0}, {"zoh2": 0.0})
    model = M["Nothing"]()

    def solve(rtol, atol, dtmax):
        # No continuous state: the fixed-step path of the test (no tolerances).
        sol = js.simulate(model, {}, 5.0, clocks=(c1, c2), ts=ref["t"], dt=0.1)
        err = max(
            np.max(np.abs(np.asarray(sol.clock_logs[c]["z"]["x"]) - f(sol.clock_logs[c]["t"])))
            for c in ("clock1", "clock2")
        )
        return sol, err

    return _case("multi_clock_discrete", spec, solve, {"bdsim tol": (bd_rhs, bd_err)},
                 "max |z_k - sin(2 pi 0.2 t_k)|", discrete=True)  # fmt: skip


def case_simultaneous_events(M):
    import jax.numpy as jnp

    import jaxsim as js

    spec, _ = _spec("simultaneous_events")
    ex = spec["bdsim_measured"]["extra"]
    bd_rhs = spec["bdsim_measured"]["summary"]["rhs_evals_counted"]
    bd_err = abs(ex["int3_error"])
    T1, T2, T3 = spec["parameters"]["step_times"]
    s1, s2, s3 = js.Step(T1), js.Step(T2), js.Step(T3)

    def upd_a(t, y, z, args):
        za = jnp.stack([s1(t), s2(t), s3(t), args["B"]["z"][0]])
        return {"z": za}, {"A": {"z": za}}

    def upd_b(t, y, z, args):
        zb = jnp.stack([s1(t), args["A"]["z"][0]])
        return {"z": zb}, {"B": {"z": zb}}

    def snapshot(t, y, z, args):
        return {"A": args["A"]["z"], "B": args["B"]["z"]}, {}

    zero = {"A": jnp.zeros(4), "B": jnp.zeros(2)}
    clock_a = js.DiscreteModel("clockA", js.Clock(0.1), upd_a, {"z": jnp.zeros(4)},
                               {"A": {"z": jnp.zeros(4)}})  # fmt: skip
    clock_b = js.DiscreteModel("clockB", js.Clock(0.25), upd_b, {"z": jnp.zeros(2)},
                               {"B": {"z": jnp.zeros(2)}})  # fmt: skip
    cb1 = js.DiscreteModel("cb_first", js.Schedule([0.5]), snapshot, zero, {}, sequential=True)
    cb2 = js.DiscreteModel("cb_second", js.Schedule([0.5]), snapshot, zero, {}, sequential=True)
    cb3 = js.DiscreteModel("cb_03", js.Schedule([0.3]), snapshot, zero, {}, sequential=True)
    model = M["Integrator"](s3)
    exact = ex["int3_exact_at_T"]

    def solve(rtol, atol, dtmax):
        sol = js.simulate(model, model.init_state(), 1.0, solver=js.Tsit5(), rtol=rtol, atol=atol,
                          dtmax=dtmax, clocks=(cb1, clock_b, cb2, clock_a, cb3),
                          discontinuities=(s1, s2, s3))  # fmt: skip
        return sol, abs(float(sol.ys["x"][-1]) - exact)

    return _case("simultaneous_events", spec, solve, {"bdsim tol": (bd_rhs, bd_err)},
                 "|x(1) - exact|")  # fmt: skip


CASES = (
    case_step_response,
    case_square_wave,
    case_zero_crossing,
    case_stop_bool,
    case_sampled_pid,
    case_multi_clock_discrete,
    case_simultaneous_events,
)


def run(quick: bool = False) -> dict:
    M = _models()
    rows, sweeps = [], {}
    for make in CASES:
        t0 = time.perf_counter()
        case = make(M)
        case_r, sweeps[case["name"]] = case_rows(case, max_step_row=not quick)
        for r in case_r:
            rows.append(r)
            print(f"{r['case']:21s} {r['setting']:22s} rtol {cm.fmt(r['rtol']):>7s}: jaxsim "
                  f"{r['jaxsim_rhs']:5d} RHS, err {r['jaxsim_err']:.2e} | bdsim ({r['bdsim_run']}) "
                  f"{r['bdsim_rhs']:5d} RHS, err {r['bdsim_err']:.2e} | "
                  f"{'met' if r['target_met'] else 'not met'}", flush=True)  # fmt: skip
        print(f"    ({time.perf_counter() - t0:.1f} s with compilation)", flush=True)
    primary = [r for r in rows if r["setting"].startswith("equal accuracy")]
    primary += [r for r in rows if r["setting"] == "no continuous state"]
    bdv = json.loads((DATA / "step_response.json").read_text()).get("reference_versions")
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "bdsim_reference_versions": bdv,
        "rows": rows,
        "sweeps": {k: [dict(rtol=r, rhs=n, err=e) for r, n, e in v] for k, v in sweeps.items()},
        "target": {
            "rule": "jaxsim RHS <= bdsim RHS at an error <= bdsim's (rows `equal accuracy`: "
            "the fewest-RHS point of the jaxsim tolerance sweep whose error is <= bdsim's)",
            "rows_met": [f"{r['case']} ({r['bdsim_run']})" for r in primary if r["target_met"]],
            "rows_not_met": [
                f"{r['case']} ({r['bdsim_run']})" for r in primary if not r["target_met"]
            ],
            "met": all(r["target_met"] for r in primary),
            "total_rhs_jaxsim": sum(
                r["jaxsim_rhs"] for r in primary if r["bdsim_run"] == "bdsim tol"
            ),
            "total_rhs_bdsim": sum(
                r["bdsim_rhs"] for r in primary if r["bdsim_run"] == "bdsim tol"
            ),
        },
    }


def to_markdown(data: dict) -> str:
    env = data["environment"]
    cols = [
        ("case", "case"),
        ("setting", "jaxsim setting"),
        ("rtol", "rtol"),
        ("dtmax", "max step"),
        ("jaxsim_rhs", "jaxsim RHS"),
        ("bdsim_run", "bdsim run"),
        ("bdsim_rhs", "bdsim RHS"),
        ("rhs_ratio", "RHS jaxsim/bdsim"),
        ("jaxsim_err", "jaxsim error"),
        ("bdsim_err", "bdsim error"),
        ("target_met", "<= RHS and <= error"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), diffrax {env['diffrax']}, at "
        f"{env['time']}. bdsim figures from `tests/data/bdsim/*.json` (bdsim 1.4.0, scipy RK45). "
        "jaxsim: `Tsit5`; `bdsim tol` = bdsim's rtol/atol without a maximum step, `+ max_step` = "
        "also bdsim's `max_step` as `dtmax`, `tight` = the settings of bdsim's tight-tolerance "
        "run (bdsim columns from that run), `equal accuracy` = the fewest-RHS point of a jaxsim "
        f"tolerance sweep (rtol {cm.fmt(SWEEP_RTOLS[0])} ... {cm.fmt(SWEEP_RTOLS[-1])}, atol = "
        f"{cm.fmt(SWEEP_ATOL_OVER_RTOL)} rtol, no max step) with an error <= bdsim's (else its most "
        "accurate point). Errors below "
        f"{cm.fmt(ROUNDOFF)} (round-off of these O(1) quantities) count as equal."
    )
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    metrics = {}
    for r in data["rows"]:
        metrics.setdefault(r["case"], r["error_metric"])
    md.append("Error measures: " + "; ".join(f"`{k}`: {v}" for k, v in metrics.items()) + ".")
    t = data["target"]
    md += [
        "",
        f"**Target ({t['rule']}):** {'met' if t['met'] else 'NOT met'}"
        + (f" (not met: {', '.join(t['rows_not_met'])})" if t["rows_not_met"] else "")
        + f"; total RHS of the equal-accuracy rows vs bdsim's default runs: {t['total_rhs_jaxsim']} "
        f"(jaxsim) vs {t['total_rhs_bdsim']} (bdsim).",
    ]
    return "\n".join(md)


def main(argv=None) -> int:
    return cm.main(
        NAME,
        TITLE,
        lambda a: run(quick=a.quick),
        to_markdown,
        argv,
        quick="skip the `+ max_step` rows",
    )


if __name__ == "__main__":
    raise SystemExit(main())
