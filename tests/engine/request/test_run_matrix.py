"""Every solver x feature combination of `simulate` works against an oracle or is refused by name.

Solvers: Euler, RK4 (fixed step), Tsit5, Dopri8 (adaptive), EulerMaruyama, SRA1 (fixed-step SDE),
ShARK (adaptive SDE). Features: plain, clocks, events (terminal and non-terminal, with resets),
discontinuities, output frames, step map. The model is chosen so that every cell has a closed form:
a point drifting at a constant rate (plus held or scheduled commands, piecewise constant) and an
angle turning at a constant rate, wrapped into [-pi, pi) by the model's step map. Every scheme
integrates piecewise-constant rates exactly, so working cells are checked to round-off; SDE cells
use prescribed increments (or one Brownian tree) and the hand-written sum of the scheme.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import jaxsim as js
from jaxsim._cores import _fixed_grid


C = 0.3  # drift rate of x [1/s]
OMEGA = 1.0  # turn rate of theta [rad/s]
X0, THETA0 = 0.15, 0.5  # sawtooth events at 2.83, 6.17, 9.5 s: between samples
T1 = 10.0  # [s]; theta wraps at t = pi - 0.5 and 3 pi - 0.5 (two wraps)
DT = 0.1  # fixed step [s]
SIGMA = 0.2  # additive noise on x [1/sqrt(s)]
# Round-off of a few hundred steps of exact (piecewise-constant-rate) integration.
EXACT_TOL = 1e-12
# Event times: the root finder's tolerance on linear conditions (1e-13 relative) plus round-off.
EVENT_TOL = 1e-10
ADAPTIVE = {"rtol": 1e-10, "atol": 1e-12}

ODE_SOLVERS = {
    "Euler": (js.Euler(), {"dt": DT}),
    "RK4": (js.RK4(), {"dt": DT}),
    "Tsit5": (js.Tsit5(), ADAPTIVE),
    "Dopri8": (js.Dopri8(), ADAPTIVE),
}
SDE_SOLVERS = ("EulerMaruyama", "SRA1", "ShARK")


class Drifter(js.AbstractDynamicObject):
    """x' = c + u (+ sigma dW), theta' = omega; the step map wraps theta into [-pi, pi)."""

    signal: js.AbstractSignal | None = None
    name: str = eqx.field(static=True, default="drifter")

    def init_state(self):
        return {"x": jnp.asarray(X0), "theta": jnp.asarray(THETA0)}

    def drift(self, t, y, args):
        u = jnp.asarray(0.0)
        if isinstance(args, dict) and "u" in args:
            u = u + args["u"]
        if self.signal is not None:
            u = u + self.signal(t)
        return {"x": C + u + 0.0 * y["x"], "theta": OMEGA + 0.0 * y["theta"]}

    def breakpoints(self):
        return () if self.signal is None else tuple(self.signal.breakpoints())

    @property
    def noise_dim(self):
        return 1

    def diffusion(self, t, y, args):
        return {"x": jnp.full((1,), SIGMA), "theta": jnp.zeros((1,))}

    def step_map(self, t, y):
        # Whole turns removed, however long the step (adaptive steps here span several turns).
        turns = jnp.floor((y["theta"] + jnp.pi) / (2 * jnp.pi))
        return {**y, "theta": y["theta"] - 2 * jnp.pi * turns}, {"wraps": turns.astype(jnp.int32)}


MODEL = Drifter()
Y0 = MODEL.init_state()


def theta_exact(t):
    return np.mod(THETA0 + OMEGA * np.asarray(t) + np.pi, 2 * np.pi) - np.pi


def wraps_exact(t):
    return int(np.floor((THETA0 + OMEGA * t + np.pi) / (2 * np.pi)))


def check_common(sol, t_end=T1):
    """Schema, step map (canonical theta at the samples, switch count) and success."""
    assert set(sol.stats) >= {"num_steps", "num_rejected_steps", "num_rhs", "counts", "num_events"}
    assert sol.result == js.RESULTS.successful and bool(sol.ok)
    ts = np.asarray(sol.ts)
    live = ts <= t_end
    np.testing.assert_allclose(
        np.asarray(sol.ys["theta"])[live], theta_exact(ts[live]), rtol=0, atol=EXACT_TOL
    )
    assert int(sol.stats["counts"]["wraps"]) == wraps_exact(t_end)
    if sol.counts is not None:  # per-sample cumulative counts where the driver has them
        want = [wraps_exact(t) for t in ts[live]]
        np.testing.assert_array_equal(np.asarray(sol.counts["wraps"])[live], want)


def run(name, **kw):
    solver, opts = ODE_SOLVERS[name]
    return js.simulate(kw.pop("model", MODEL), Y0, T1, solver=solver, **opts, **kw)


# ------------------------------------------------------------------------------------------------
# ODE solvers


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_plain(name):
    sol = run(name, sample_dt=1.0)
    check_common(sol)
    np.testing.assert_allclose(sol.ys["x"], X0 + C * np.asarray(sol.ts), rtol=0, atol=EXACT_TOL)
    assert float(sol.t_final) == T1 and int(sol.stats["num_segments"]) == 1


def staircase(t_k):
    """Held command of the clock at tick t_k."""
    return 0.05 * t_k


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_clocks(name):
    cmd = js.DiscreteModel(
        "fsw", js.Clock(1.0), lambda t, y, z, a: (z + 1.0, {"u": staircase(t)}), z0=jnp.asarray(0.0)
    )
    sol = run(name, sample_dt=0.5, clocks=[cmd])
    check_common(sol)
    # Clock logs: post-tick discrete state and held output at each tick (here t = 1, ..., 10 s).
    log = sol.clock_logs["fsw"]
    ticks_run = np.asarray(log["t"])
    np.testing.assert_allclose(ticks_run, np.arange(1.0, T1 + 0.5, 1.0), rtol=0, atol=0)
    np.testing.assert_array_equal(log["z"], np.arange(1.0, ticks_run.size + 1))
    np.testing.assert_allclose(log["held"]["u"], staircase(ticks_run), rtol=0, atol=0)
    # Samples record left limits: the discrete state before the tick at the sample time.
    zs, ts_s = np.asarray(sol.zs["fsw"]), np.asarray(sol.ts)
    np.testing.assert_array_equal(zs, (np.ceil(ts_s - 1e-9) - 1).clip(0, None))  # ticks before t
    ts = np.asarray(sol.ts)
    ticks = np.arange(0.0, T1 + 0.5, 1.0)
    x = X0 + C * ts + sum(staircase(k) * np.clip(ts - k, 0.0, 1.0) for k in ticks)
    np.testing.assert_allclose(sol.ys["x"], x, rtol=0, atol=EXACT_TOL)
    if name in ("Euler", "RK4"):
        # A clock that changes nothing leaves a fixed-step run bit for bit as the plain run.
        noop = js.DiscreteModel("noop", js.Clock(0.5), lambda t, y, z, a: (z, {}))
        plain = run(name, sample_dt=0.5)
        clocked = run(name, sample_dt=0.5, clocks=[noop])
        for a, b in zip(jax.tree.leaves(plain.ys), jax.tree.leaves(clocked.ys)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(plain.counts["wraps"], clocked.counts["wraps"])
        assert int(clocked.stats["num_rhs"]) == int(plain.stats["num_rhs"])


def saw_reset(t, y, z, args):
    return {**y, "x": y["x"] - 1.0}, z


def stop_reset(t, y, z, args):
    return {**y, "x": jnp.asarray(-5.0)}, z


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_events(name):
    saw = js.Event(lambda t, y, a: y["x"] - 1.0, direction="rising", reset=saw_reset, name="saw")
    stop = js.Event(
        lambda t, y, a: t - 8.0, direction="rising", terminal=True, reset=stop_reset, name="stop"
    )
    sol = run(name, sample_dt=1.0, events=[saw, stop], max_events=4)
    check_common(sol, t_end=8.0)
    t_saw = (1.0 - X0) / C + np.arange(2) / C  # the third (9.5) is after the stop
    log = sol.events
    assert int(log.count) == 3 and list(np.asarray(log.index)[:3]) == [0, 0, 1]
    np.testing.assert_allclose(np.asarray(log.t)[:3], [*t_saw, 8.0], rtol=0, atol=EVENT_TOL)
    np.testing.assert_allclose(np.asarray(log.y_after["x"])[:2], 0.0, atol=EVENT_TOL)
    assert float(log.y_after["x"][2]) == -5.0
    assert float(sol.t_final) == pytest.approx(8.0, abs=EVENT_TOL)
    ts = np.asarray(sol.ts)
    x = X0 + C * ts - np.searchsorted(t_saw, ts, side="left")
    np.testing.assert_allclose(np.asarray(sol.ys["x"])[ts <= 8.0], x[ts <= 8.0], atol=EVENT_TOL)
    assert np.all(np.isnan(np.asarray(sol.ys["x"])[ts > 8.0]))


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_discontinuities(name):
    step = js.Step(4.55, 0.0, 0.2)  # off the fixed-step grid: the step there is split
    model = Drifter(signal=step)
    sol = run(name, model=model, sample_dt=1.0, discontinuities=[step])
    check_common(sol)
    ts = np.asarray(sol.ts)
    np.testing.assert_allclose(
        sol.ys["x"], X0 + C * ts + 0.2 * np.clip(ts - 4.55, 0, None), rtol=0, atol=EXACT_TOL
    )


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_output_frames(name):
    frames = np.arange(0.0, T1 + 0.05, 0.5)
    few = run(name)
    many = run(name, ts=frames)
    check_common(many)
    np.testing.assert_allclose(many.ys["x"], X0 + C * frames, rtol=0, atol=EXACT_TOL)
    # Output frames are SaveAt points: they never change the number of drift evaluations.
    assert int(many.stats["num_rhs"]) == int(few.stats["num_rhs"])
    if name in ("Euler", "RK4"):
        with pytest.raises(ValueError, match="step grid|t0 \\+ k\\*dt"):
            run(name, ts=np.array([0.0, 0.25, T1]))


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_step_map_on_every_path(name):
    """The step map runs after every step whichever driver runs the segments (with a clock)."""
    noop = js.DiscreteModel("noop", js.Clock(0.7), lambda t, y, z, a: (z, {}))
    sol = run(name, sample_dt=0.5, clocks=[noop])
    check_common(sol)
    assert np.all(np.abs(np.asarray(sol.ys["theta"])) <= np.pi)


# ------------------------------------------------------------------------------------------------
# SDE solvers


def increments(n):
    k1, k2 = jr.split(jr.key(7))
    return jr.normal(k1, (n, 1)) * np.sqrt(DT), jr.normal(k2, (n, 1)) * np.sqrt(DT)


def run_sde(name, **kw):
    n = round(T1 / DT)
    if name == "ShARK":
        path = dfx.VirtualBrownianTree(
            0.0, T1, 1e-3, (1,), jr.key(3), levy_area=dfx.SpaceTimeLevyArea
        )
        sol = js.simulate(
            MODEL, Y0, T1, solver=js.ShARK(), key=jr.key(3), brownian=path, **ADAPTIVE, **kw
        )
        w = np.array([float(path.evaluate(0.0, t)[0]) for t in np.asarray(sol.ts)])
        return sol, w
    dW, dZ = increments(n)
    solver = js.EulerMaruyama() if name == "EulerMaruyama" else js.SRA1()
    sol = js.simulate(
        MODEL, Y0, T1, solver=solver, dt=DT, dW=dW, dZ=dZ if name == "SRA1" else None, **kw
    )
    # The hand-written scheme: for additive noise and a constant drift both schemes add c h + s dW.
    w_steps = np.concatenate([[0.0], np.cumsum(np.asarray(dW)[:, 0])])
    w = w_steps[np.round(np.asarray(sol.ts) / DT).astype(int)]
    return sol, w


@pytest.mark.parametrize("name", SDE_SOLVERS)
@pytest.mark.parametrize("feature", ["plain", "output frames", "step map"])
def test_sde_working_cells(name, feature):
    kw = {"sample_dt": 0.5} if feature == "output frames" else {"sample_dt": 1.0}
    sol, w = run_sde(name, **kw)
    check_common(sol)
    ts = np.asarray(sol.ts)
    np.testing.assert_allclose(sol.ys["x"], X0 + C * ts + SIGMA * w, rtol=0, atol=EXACT_TOL)


@pytest.mark.parametrize("name", SDE_SOLVERS)
@pytest.mark.parametrize("feature", ["clocks", "events", "discontinuities"])
def test_sde_refused_cells(name, feature):
    extra = {
        "clocks": {"clocks": [js.DiscreteModel("noop", js.Clock(1.0), lambda t, y, z, a: (z, {}))]},
        "events": {"events": [js.Event(lambda t, y, a: t - 0.5, terminal=True)]},
        "discontinuities": {"discontinuities": [1.0]},
    }[feature]
    with pytest.raises(ValueError, match=f"SDE.*{feature}"):
        run_sde(name, **extra)


def test_event_options_without_events_refused():
    with pytest.raises(ValueError, match="max_events"):
        run("RK4", max_events=3)
    with pytest.raises(ValueError, match="dtmax.*fixed-step"):
        run("RK4", dtmax=1.0, clocks=[js.DiscreteModel("n", js.Clock(1.0), lambda *a: (a[2], {}))])


@pytest.mark.parametrize("name", ODE_SOLVERS)
def test_held_inputs_mean_the_same_on_every_path(name):
    """A `PiecewiseConstant` command (switch times on the step grid) on the plain, clocked and
    segmented paths: the exact piecewise-linear solution, and bit for bit between the fixed-step
    paths (the clocked and segmented ones step on the grid with the plain driver's step)."""
    u = js.PiecewiseConstant([1.1, 2.0], [0.0, 1.0, 3.0])
    model = Drifter(signal=u)
    noop = js.DiscreteModel("noop", js.Clock(0.5), lambda t, y, z, a: (z, {}))
    runs = [
        run(name, model=model, sample_dt=0.5),
        run(name, model=model, sample_dt=0.5, clocks=[noop]),
        run(name, model=model, sample_dt=0.5, discontinuities=[model]),
    ]
    ts = np.asarray(runs[0].ts)
    x = X0 + C * ts + np.clip(ts - 1.1, 0.0, 0.9) + 3.0 * np.clip(ts - 2.0, 0.0, None)
    for sol in runs:
        check_common(sol)
        np.testing.assert_allclose(sol.ys["x"], x, rtol=0, atol=EXACT_TOL)
    if name in ("Euler", "RK4"):
        for sol in runs[1:]:
            assert sol.counts is not None  # stepped by the fixed-grid stepper, not diffeqsolve
            np.testing.assert_array_equal(sol.ys["x"], runs[0].ys["x"])


class Oscillator(js.AbstractDynamicObject):
    """x'' = -k x + u, with u held by a damping controller on a clock."""

    k: jax.Array
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": y["v"], "v": -self.k * y["x"] + args["u"]}


# Central differences of a smooth RK4 solution: truncation O(eps^2) ~1e-10 plus round-off
# 1e-16 / eps ~ 1e-11, relative.
FD_EPS, FD_RTOL = 1e-5, 1e-8


def test_clocked_grid_run_is_differentiable_and_batches():
    damper = js.DiscreteModel("damper", js.Clock(0.2), lambda t, y, z, a: (z, {"u": -0.5 * y["v"]}))

    def final_x(k):
        model = Oscillator(jnp.asarray(k))
        sol = js.simulate(model, model.init_state(), 5.0, dt=0.05, clocks=[damper], outputs=False)
        return sol.ys["x"][-1]

    k = 2.0
    grad = jax.grad(final_x)(k)
    fd = (final_x(k + FD_EPS) - final_x(k - FD_EPS)) / (2 * FD_EPS)
    np.testing.assert_allclose(grad, fd, rtol=FD_RTOL)
    np.testing.assert_allclose(jax.jvp(final_x, (k,), (1.0,))[1], grad, rtol=1e-12)
    ks = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(jax.vmap(final_x)(ks), [final_x(float(v)) for v in ks])


# ------------------------------------------------------------------------------------------------
# One request: the same bad argument is refused with the same message on every path


NOOP = js.DiscreteModel("noop", js.Clock(1.0), lambda t, y, z, a: (z, {}))
PATHS = {
    "fixed": {"solver": js.RK4(), "dt": DT},
    "adaptive": {"solver": js.Tsit5(), **ADAPTIVE},
    "clocked": {"solver": js.RK4(), "dt": DT, "clocks": [NOOP]},
    "segmented": {"solver": js.RK4(), "dt": DT, "discontinuities": [1.05]},
    "sde": {"solver": js.EulerMaruyama(), "dt": DT, "key": 0},
}
BAD = {
    "max_steps 0": ({"max_steps": 0}, "`max_steps` must be an int >= 1"),
    "max_steps float": ({"max_steps": 10.5}, "`max_steps` must be an int >= 1"),
    "t1 nan": ({"t1": np.nan}, "`t1` [s] must be finite"),
    "t1 vector": ({"t1": np.array([1.0, 2.0])}, "`t1` [s] must be a scalar"),
    "t1 before t0": ({"t1": -1.0}, "`t1` [s] must be > t0"),
    "ts nan": ({"ts": np.array([0.0, np.nan, T1])}, "`ts` [s] must hold finite times"),
    "ts decreasing": ({"ts": np.array([0.0, 2.0, 1.0])}, "`ts` [s] must be non-decreasing"),
    "sample_dt 0": ({"sample_dt": 0.0}, "`sample_dt` [s] must be > 0"),
    "ts and sample_dt": ({"ts": np.array([0.0, T1]), "sample_dt": 1.0}, "either `ts` or"),
    "rtol negative": ({"rtol": -1.0}, "`rtol` [-] must be finite and >= 0"),
    "key bool": ({"key": True}, "`key` must be a jax.random key"),
    "y0 shape": ({"y0": {"x": jnp.zeros(2), "theta": jnp.asarray(0.0)}}, "`y0['x']` must have"),
    "event_tol negative": ({"event_tol": -1.0}, "`event_tol` [s] must be >= 0"),
    "dtmax negative": ({"dtmax": -1.0}, "`dtmax` [s] must be finite and > 0"),
    "max_events without events": ({"max_events": 3}, "`max_events` applies to runs with"),
    "progress string": ({"progress": "yes"}, "`progress` must be a bool or a callable"),
    "single event": ({"events": js.Event(lambda t, y, a: t - 1.0)}, "got a single Event"),
    "implicit diffrax solver": ({"solver": dfx.Kvaerno5()}, "diffrax.Kvaerno5() is an implicit"),
}


def refusal(path, bad):
    kw = {**PATHS[path], **BAD[bad][0]}
    y0, t1 = kw.pop("y0", Y0), kw.pop("t1", T1)
    with pytest.raises((ValueError, TypeError)) as info:
        js.simulate(MODEL, y0, t1, **kw)
    return info


@pytest.mark.parametrize("bad", BAD)
def test_bad_argument_refused_alike_on_every_path(bad):
    """The request's checks (`jaxsim._request._build`) run before any driver: one message per mistake."""
    errors = {path: refusal(path, bad) for path in PATHS}
    messages = {path: str(info.value) for path, info in errors.items()}
    for path, message in messages.items():
        assert BAD[bad][1] in message, (path, message)
    assert len(set(messages.values())) == 1, messages
    assert len({type(info.value) for info in errors.values()}) == 1


@pytest.mark.parametrize("path", ["fixed", "clocked", "segmented", "sde"])
def test_tolerances_with_a_fixed_step_solver_refused_on_every_fixed_step_path(path):
    """`rtol`/`atol` with a fixed-step solver were refused on the plain path only (a clocked run
    accepted them silently)."""
    with pytest.raises(ValueError, match="`rtol`/`atol` apply to adaptive solvers only"):
        js.simulate(MODEL, Y0, T1, **PATHS[path], rtol=1e-6, atol=1e-9)


def test_checkpoint_switch_is_honoured_on_clocked_runs(monkeypatch):
    """`checkpoint=False` was ignored on clocked fixed-step runs (the grid stepper was always
    checkpointed): the reverse pass of a clocked run now rematerializes exactly as the plain
    run's does, for either setting."""
    # Checkpointed blocks even for a run this short (with hoisted loops, stage inputs within
    # `STORE_BYTES` are stored instead); the driver reads it at trace time.
    monkeypatch.setattr(_fixed_grid, "STORE_BYTES", 0)
    jax.clear_caches()

    def final_x(u, checkpoint, clocks):
        sol = js.simulate(
            MODEL, Y0, 2.0, solver=js.RK4(), dt=DT, args={"u": u}, clocks=clocks,
            checkpoint=checkpoint, outputs=False,
        )  # fmt: skip
        assert sol.counts is not None  # the fixed-grid stepper ran it
        return sol.ys["x"][-1]

    def remats(checkpoint, clocks):
        grad = jax.grad(lambda u: final_x(u, checkpoint, clocks))
        return str(jax.make_jaxpr(grad)(0.1)).count("remat")

    for checkpoint in (True, False):
        assert remats(checkpoint, [NOOP]) == remats(checkpoint, ())
        # The switch changes memory, never values: x(2) = x0 + (c + u) 2, d/du = 2.
        g = jax.grad(lambda u, c=checkpoint: final_x(u, c, [NOOP]))(0.1)
        np.testing.assert_allclose(g, 2.0, rtol=0, atol=EXACT_TOL)
    assert remats(True, [NOOP]) > remats(False, [NOOP])
