r"""The discrete adjoint of jaxsim's adaptive core (`jaxsim.DiscreteAdjoint`, the default reverse
mode on `Tsit5`, `Dopri5`, `Dopri8`; `jaxsim._cores._adaptive.integrate_adjoint`).

Oracles: the checkpointed loop (`adjoint=diffrax.RecursiveCheckpointAdjoint()`), which
differentiates the same accepted step sequence with the step sizes held fixed, so the two agree
to round-off; the analytic harmonic oscillator $x = x_0 \cos(\omega \tau) + (v_0/\omega)
\sin(\omega \tau)$, $\tau = t - t_0$, differentiated by JAX (at a tight tolerance the
derivative of the discretisation is that of the solution to about the tolerance); central finite
differences of the forward run.
"""

import functools
import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._compilation import _xla_options
from jaxsim._cores import _adaptive as core


# The two adjoints differentiate the same discretisation; they differ by the order of the
# floating-point sums only (measured up to 5e-16 relative on the oscillator; 7e-13 on a day of
# the J2 orbit with 780 steps).
ROUND_OFF_REL_TOL = 1e-12
# Dopri8 at rtol = atol = 1e-12 over 2.4 s of the oscillator: the derivatives of the
# discretisation against the analytic ones, measured within 4e-13 relative.
ANALYTIC_REL_TOL = 1e-11
# Central differences of the forward run (relative step FD_STEP): truncation ~FD_STEP^2 plus the
# run's rtol-level noise over FD_STEP; the step sequence may switch within the difference.
FD_STEP = 1e-5
FD_REL_TOL = 1e-6
# A sample time's derivative is the interpolant's time derivative: Dopri8's 7th-order dense
# output differentiated, one order less accurate than the solution (measured 4.8e-9 relative to
# the drift at rtol 1e-12).
DENSE_REL_TOL = 5e-8
RTOL = 1e-8  # the cross-checks against the checkpointed loop (few steps: small programs)
TIGHT = 1e-12  # the analytic checks

# Each pair with its default stages (looped for Tsit5 and Dopri5, unrolled for Dopri8: the step's
# VJP taken stage by stage or written out), and each with the other choice.
PAIRS = {
    "Tsit5": js.Tsit5, "Dopri5": js.Dopri5, "Dopri8": js.Dopri8,
    "Tsit5-unrolled": functools.partial(js.Tsit5, unrolled=True),
    "Dopri8-looped": functools.partial(js.Dopri8, unrolled=False),
}  # fmt: skip
CHECKPOINTED = dfx.RecursiveCheckpointAdjoint()


class Kepler(js.AbstractDynamicObject):
    """Two-body orbit (mu = 1); `jump`: a breakpoint time after which a small along-track push
    acts (a drift discontinuous in time)."""

    mu: jax.Array
    jump: float = eqx.field(static=True, default=0.0)
    name: str = eqx.field(static=True, default="kepler")

    def init_state(self, x=(1.0, 0.0, 0.0, 0.0, 1.0, 0.0)):
        x = jnp.asarray(x, float)
        return {"r": x[:3], "v": x[3:]}

    def drift(self, t, y, args):
        r = y["r"]
        r2 = r @ r
        a = -self.mu * r / (r2 * jnp.sqrt(r2))
        if self.jump:
            a = a + jnp.where(t >= self.jump, 1e-2, 0.0) * y["v"]
        return {"r": y["v"], "v": a}

    def breakpoints(self):
        return (self.jump,) if self.jump else ()


class Tumble(js.AbstractDynamicObject):
    """A damped body spinning about a fixed axis, attitude in MRPs with the shadow switch
    (|sigma| > 1 -> -sigma/|sigma|^2) as its step map: sigma' = B(sigma) omega / 4
    (Schaub & Junkins, "Analytical Mechanics of Space Systems", eq. 3.163), omega' = -c omega."""

    c: jax.Array
    name: str = eqx.field(static=True, default="tumble")

    def init_state(self, sigma=(0.0, 0.0, 0.0), omega=(0.0, 0.0, 0.0)):
        return {"sigma": jnp.asarray(sigma, float), "omega": jnp.asarray(omega, float)}

    def drift(self, t, y, args):
        s, w = y["sigma"], y["omega"]
        s2 = s @ s
        skew = jnp.array([[0.0, -s[2], s[1]], [s[2], 0.0, -s[0]], [-s[1], s[0], 0.0]])
        b = (1 - s2) * jnp.eye(3) + 2 * skew + 2 * jnp.outer(s, s)
        return {"sigma": 0.25 * b @ w, "omega": -self.c * w}

    def step_map(self, t, y):
        s = y["sigma"]
        s2 = s @ s
        switch = s2 > 1.0
        s = jnp.where(switch, -s / s2, s)
        return {"sigma": s, "omega": y["omega"]}, {"switches": switch.astype(jnp.int32)}


class Oscillator(js.AbstractDynamicObject):
    omega: jax.Array
    name: str = eqx.field(static=True, default="osc")

    def init_state(self, x=1.0, v=0.0):
        return {
            "x": jnp.reshape(jnp.asarray(x, float), (1,)),
            "v": jnp.reshape(jnp.asarray(v, float), (1,)),
        }

    def drift(self, t, y, args):
        return {"x": y["v"], "v": -(self.omega**2) * y["x"]}


def oscillator_analytic(omega, x0, v0, t0, t):
    tau = t - t0
    x = x0 * jnp.cos(omega * tau) + v0 / omega * jnp.sin(omega * tau)
    v = -x0 * omega * jnp.sin(omega * tau) + v0 * jnp.cos(omega * tau)
    return x, v


def periapsis(e=0.5):
    rp, vp = 1.0 - e, math.sqrt((1.0 + e) / (1.0 - e))
    return jnp.array([rp, 0.0, 0.0, 0.0, vp * math.cos(0.3), vp * math.sin(0.3)])


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def kepler_loss(mu, x, *, solver, adjoint=None, ts=None, jump=0.0):
    model = Kepler(mu, jump=jump)
    sol = js.simulate(
        model, model.init_state(x), 1.5, solver=solver, rtol=RTOL, atol=RTOL, ts=ts,
        outputs=False, adjoint=adjoint,
    )  # fmt: skip
    return jnp.sum(sol.ys["r"] ** 2) + jnp.sum(jnp.sin(sol.ys["v"][-1]))


# Each case compiles two gradient programs (the checkpointed one the larger): four run by
# default (every pair, samples and endpoints, a breakpoint, Dopri8 looped), four with -m slow.
_CASES = [
    ("Tsit5", True, False), ("Dopri5", False, False), ("Dopri8", True, True),
    pytest.param("Tsit5", False, False, marks=pytest.mark.slow),
    pytest.param("Dopri5", True, True, marks=pytest.mark.slow),
    pytest.param("Dopri8", False, True, marks=pytest.mark.slow),
    ("Dopri8-looped", True, True), pytest.param("Tsit5-unrolled", True, False, marks=pytest.mark.slow),
]  # fmt: skip


@pytest.mark.parametrize("pair,samples,jump", _CASES)
def test_same_gradient_as_the_checkpointed_loop(pair, samples, jump):
    # With samples the loss reads interpolated states inside steps; with a breakpoint the steps
    # end just before it and restart after it.
    kw = dict(
        solver=PAIRS[pair](), ts=jnp.linspace(0.0, 1.5, 6) if samples else None,
        jump=0.7 if jump else 0.0,
    )  # fmt: skip
    mu, x = jnp.asarray(1.0), periapsis()
    new = js.jit(jax.grad(lambda mu, x: kepler_loss(mu, x, **kw), (0, 1)))(mu, x)
    old = js.jit(jax.grad(lambda mu, x: kepler_loss(mu, x, adjoint=CHECKPOINTED, **kw), (0, 1)))(
        mu, x
    )
    assert rel(new[0], old[0]) <= ROUND_OFF_REL_TOL
    assert rel(new[1], old[1]) <= ROUND_OFF_REL_TOL


def test_step_map_shadow_switch():
    model = Tumble(jnp.asarray(0.05))
    y0 = {"sigma": jnp.array([0.3, 0.1, 0.0]), "omega": jnp.array([2.0, 0.5, 0.2])}

    def run(c, w, adjoint=None):
        m = eqx.tree_at(lambda m: m.c, model, c)
        return js.simulate(
            m, {"sigma": y0["sigma"], "omega": w}, 3.0, solver=js.Dopri5(), rtol=RTOL,
            atol=RTOL, ts=jnp.linspace(0.0, 3.0, 7), outputs=False, adjoint=adjoint,
        )  # fmt: skip

    sol = run(model.c, y0["omega"])
    assert int(sol.stats["counts"]["switches"]) >= 1  # the map acts inside the run

    def loss(c, w, adjoint=None):
        s = run(c, w, adjoint).ys["sigma"]
        return jnp.sum(s * jnp.arange(1.0, 4.0))

    new = js.jit(jax.grad(loss, (0, 1)))(model.c, y0["omega"])
    old = js.jit(jax.grad(lambda c, w: loss(c, w, CHECKPOINTED), (0, 1)))(model.c, y0["omega"])
    assert rel(new[0], old[0]) <= ROUND_OFF_REL_TOL
    assert rel(new[1], old[1]) <= ROUND_OFF_REL_TOL
    # Central differences of the forward run in omega0 (the switch times move smoothly).
    f = jax.jit(jax.vmap(lambda w: loss(model.c, w)))
    steps = FD_STEP * jnp.eye(3)
    fd = (f(y0["omega"] + steps) - f(y0["omega"] - steps)) / (2 * FD_STEP)
    assert rel(new[1], fd) <= FD_REL_TOL


def oscillator_run(omega, x0, v0, t0, t1, ts=None, adjoint=None):
    model = Oscillator(omega)
    y0 = {"x": jnp.reshape(x0, (1,)), "v": jnp.reshape(v0, (1,))}
    return js.simulate(
        model, y0, t1, t0=t0, ts=ts, solver=js.Dopri8(), rtol=TIGHT, atol=TIGHT,
        outputs=False, adjoint=adjoint,
    )  # fmt: skip


def test_matches_the_analytic_derivatives_including_t0_and_t1():
    args = (jnp.asarray(1.3), jnp.asarray(0.7), jnp.asarray(-0.4), jnp.asarray(0.2),
            jnp.asarray(2.6))  # fmt: skip

    def loss(fn, *a):
        x, v = fn(*a)
        return x + 0.5 * v

    def numeric(*a, adjoint=None):
        sol = oscillator_run(*a, adjoint=adjoint)
        return sol.ys["x"][-1, 0], sol.ys["v"][-1, 0]

    argnums = tuple(range(5))
    exact = jax.grad(lambda *a: loss(oscillator_analytic, *a), argnums)(*args)
    new = js.jit(jax.grad(lambda *a: loss(numeric, *a), argnums))(*args)
    for n, e in zip(new, exact, strict=True):
        assert rel(n, e) <= ANALYTIC_REL_TOL
    # d/dt1 is the drift at t1: x' + 0.5 v' = v - 0.5 omega^2 x.
    x1, v1 = oscillator_analytic(*args[:4], args[4])
    assert rel(new[4], v1 - 0.5 * args[0] ** 2 * x1) <= ANALYTIC_REL_TOL
    # The time derivatives are the checkpointed loop's (the same fixed offsets of the steps).
    old = js.jit(
        jax.grad(lambda *a: loss(lambda *b: numeric(*b, adjoint=CHECKPOINTED), *a), argnums)
    )(*args)
    for n, o in zip(new, old, strict=True):
        assert rel(n, o) <= ROUND_OFF_REL_TOL


def test_traced_sample_times():
    omega, x0, v0 = jnp.asarray(1.3), jnp.asarray(0.7), jnp.asarray(-0.4)
    ts = jnp.array([0.0, 0.45, 1.1, 1.7, 2.0])

    def loss(ts, adjoint=None):
        sol = oscillator_run(omega, x0, v0, 0.0, None, ts=ts, adjoint=adjoint)
        return jnp.sum(sol.ys["x"][:, 0] * jnp.arange(1.0, 6.0))

    new = js.jit(jax.grad(loss))(ts)
    old = js.jit(jax.grad(lambda ts: loss(ts, CHECKPOINTED)))(ts)
    assert rel(new, old) <= ROUND_OFF_REL_TOL
    # d x(t_i) / d t_i = v(t_i): the interpolant's time derivative.
    _, v = oscillator_analytic(omega, x0, v0, 0.0, ts)
    assert rel(new, v * jnp.arange(1.0, 6.0)) <= DENSE_REL_TOL


def test_vmap_and_jit_of_the_gradient():
    solver = js.Tsit5()
    mus = jnp.array([0.9, 1.0, 1.1])

    def loss(mu, progress=False):
        model = Kepler(mu)
        sol = js.simulate(
            model, model.init_state(periapsis()), 1.5, solver=solver, rtol=RTOL, atol=RTOL,
            outputs=False, progress=progress,
        )  # fmt: skip
        return jnp.sum(sol.ys["r"][-1] ** 2)

    batched = js.jit(jax.vmap(jax.grad(loss)))(mus)
    # Eager, one member at a time, with progress reports (the reporter's token is an input of
    # the custom_vjp).
    reports = []
    single = [jax.grad(loss)(mu, lambda t, t1: reports.append(t)) for mu in mus]
    np.testing.assert_allclose(np.asarray(batched), np.asarray(single), rtol=ROUND_OFF_REL_TOL)
    assert reports


def _flat_oscillators(theta, t, y):
    """Four uncoupled oscillators, y = (x, v) stacked (a state of 64 bytes: chunks of 8 steps)."""
    x, v = y[:4], y[4:]
    return jnp.concatenate([v, -(theta["omega"] ** 2) * x])


@pytest.mark.parametrize("samples", [False, True], ids=["endpoints", "samples"])
def test_memory_budget_recomputes_the_same_gradient(samples):
    pair = core.pair_of(js.Dopri5._unrolled_cls)
    max_steps = 400
    y0 = jnp.array([0.7, -0.4, 0.1, 0.3, 0.0, 0.2, -0.5, 0.1])
    omega = jnp.array([1.3, 0.8, 2.1, 1.7])
    ts = jnp.linspace(0.0, 3.0, 7)
    # A budget of a twentieth of the record: every K-th state, K three chunks (blocks of states
    # over 512 bytes), past the first block's states (all recorded).
    small = max_steps * y0.size * 8 // 20
    every = core._record_every(max_steps, y0, True, small)
    assert every == 3 * core._chunk_size(y0, True)
    first = every * y0.size * 8
    assert core._dense_steps(max_steps, y0, True, every, small, first) == every

    def run(omega, y0, t1, ts, budget):
        return core.integrate_adjoint(
            _flat_oscillators, None, {"omega": omega}, y0, 0.0, t1,
            ts if samples else jnp.stack([jnp.asarray(0.0), t1]), jnp.asarray(1e-9),
            jnp.asarray(1e-9), record_bytes=budget, dense_bytes=budget and first, pair=pair,
            max_steps=max_steps, endpoints_only=not samples,
        )  # fmt: skip

    args = (omega, y0, jnp.asarray(3.0), ts)
    # Two blocks of K steps past the first, the last one partial.
    accepted = int(run(*args, None)["num_accepted_steps"])
    assert accepted > 2 * every and accepted % every

    def loss(*a):
        return jnp.sum(run(*a)["ys"] ** 2)

    full = js.jit(jax.grad(lambda *a: loss(*a, None), (0, 1, 2, 3)))(*args)
    part = js.jit(jax.grad(lambda *a: loss(*a, small), (0, 1, 2, 3)))(*args)
    # Relative to the largest derivative (d/dt1 with samples is ~0: the samples do not move).
    scale = max(float(np.max(np.abs(np.asarray(b)))) for b in full)
    for a, b in zip(part, full, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=ROUND_OFF_REL_TOL * scale)


def _kicked_oscillators(theta, t, y):
    """`_flat_oscillators` pushed along v after `KICK_AT` (a drift discontinuous in time: a
    breakpoint there)."""
    return _flat_oscillators(theta, t, y) + jnp.where(t >= KICK_AT, 0.1, 0.0) * jnp.concatenate(
        [jnp.zeros(4), y[4:]]
    )


def _flat_tumble(theta, t, y):
    """`Tumble` on a flat state (sigma, omega)."""
    s, w = y[:3], y[3:]
    s2 = s @ s
    skew = jnp.array([[0.0, -s[2], s[1]], [s[2], 0.0, -s[0]], [-s[1], s[0], 0.0]])
    b = (1 - s2) * jnp.eye(3) + 2 * skew + 2 * jnp.outer(s, s)
    return jnp.concatenate([0.25 * b @ w, -theta["omega"] * w])


def _flat_shadow(theta, t, y):
    """`Tumble.step_map` on a flat state."""
    s = y[:3]
    s2 = s @ s
    switch = s2 > 1.0
    s = jnp.where(switch, -s / s2, s)
    return jnp.concatenate([s, y[3:]]), {"switches": switch.astype(jnp.int32)}


KICK_AT = 1.3
MAX_STEPS = 400
# (pair, samples, breakpoint, step map, rtol): FSAL pairs with a breakpoint, samples and the MRP
# shadow switch (both re-evaluate the first stage after the step); Dopri8's unrolled stages with
# the end points only, at a tight tolerance (at 1e-9 its 29 steps' derivative, the step sizes held
# fixed, is 4e-5 off the central differences of the run).
_DENSE_CASES = [
    ("Dopri5", True, True, False, 1e-9), ("Dopri8", False, False, False, TIGHT),
    ("Tsit5", True, False, True, 1e-9),
]  # fmt: skip


def _flat_problem(pair_name, samples, jump, mapped, rtol=1e-9):
    """`run(omega, y0, t1, ts, dense_bytes)`: `integrate_adjoint` of a flat problem (the pair's
    default stages), and its arguments."""
    solver = PAIRS[pair_name]()
    pair = core.pair_of(type(solver)._unrolled_cls)
    if mapped:
        f, step_map, t1 = _flat_tumble, _flat_shadow, 7.0
        y0 = jnp.array([0.2, 0.1, -0.3, 1.1, -0.6, 0.9])
        omega, extra = jnp.asarray(0.1), {"counts0": {"switches": jnp.asarray(0, jnp.int32)}}
    else:
        f, step_map, t1 = _kicked_oscillators, None, 3.0
        y0 = jnp.array([0.7, -0.4, 0.1, 0.3, 0.0, 0.2, -0.5, 0.1])
        omega, extra = jnp.array([1.3, 0.8, 2.1, 1.7]), {}
    ts = jnp.linspace(0.0, t1, 7)

    def run(omega, y0, t1, ts, dense_bytes):
        return core.integrate_adjoint(
            f, step_map, {"omega": omega}, y0, 0.0, t1,
            ts if samples else jnp.stack([jnp.asarray(0.0), t1]), jnp.asarray(rtol),
            jnp.asarray(rtol), dense_bytes=dense_bytes, pair=pair, max_steps=MAX_STEPS,
            endpoints_only=not samples, jump_ts=(KICK_AT,) if jump else (),
            unrolled=solver.unrolled, **extra,
        )  # fmt: skip

    return run, (omega, y0, jnp.asarray(t1), ts)


def _dense_part(y0, accepted):
    """`dense_bytes` that records the states of about the first third of a run of `accepted`
    steps (t0 or t1 differentiated), and those steps (D, a multiple of K, the chunk size)."""
    every = core._record_every(MAX_STEPS, y0, True, core.RECORD_BYTES)
    assert every == core._chunk_size(y0, True)
    state = y0.size * 8
    dense = max(1, accepted // (3 * every)) * every * state
    steps = core._dense_steps(MAX_STEPS, y0, True, every, core.RECORD_BYTES, dense)
    assert steps * state == dense and accepted > steps + 2 * every and accepted % every
    return dense, steps


@pytest.mark.parametrize("pair,samples,jump,mapped,rtol", _DENSE_CASES)
def test_recomputed_blocks_past_the_dense_record(pair, samples, jump, mapped, rtol):
    """A run that goes on past the states recorded whole (the rest every K-th, the blocks in
    between recomputed in the backward pass, the last partial): the same gradient as with every
    state recorded, and as central differences."""
    run, args = _flat_problem(pair, samples, jump, mapped, rtol)
    # All of MAX_STEPS' states fit in `_DENSE_BYTES`: every state recorded without `dense_bytes`.
    every = core._record_every(MAX_STEPS, args[1], True, core.RECORD_BYTES)
    assert core._dense_steps(MAX_STEPS, args[1], True, every, core.RECORD_BYTES) >= MAX_STEPS
    dense, _ = _dense_part(args[1], int(run(*args, None)["num_accepted_steps"]))

    def loss(*a):
        out = run(*a)
        return jnp.sum(out["ys"] ** 2) + jnp.sum(jnp.sin(out["ys"][-1]))

    part = js.jit(jax.grad(lambda *a: loss(*a, dense), (0, 1, 2, 3)))(*args)
    whole = js.jit(jax.grad(lambda *a: loss(*a, None), (0, 1, 2, 3)))(*args)
    # Relative to the largest derivative (d/dt1 with samples is ~0: the samples do not move).
    scale = max(float(np.max(np.abs(np.asarray(b)))) for b in whole)
    for a, b in zip(part, whole, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=ROUND_OFF_REL_TOL * scale)
    # Central differences w.r.t. omega of the forward run.
    omega = args[0]
    h = FD_STEP * float(np.max(np.abs(np.asarray(omega))))
    basis = np.eye(omega.size).reshape((omega.size,) + omega.shape)
    largest = float(np.max(np.abs(np.asarray(part[0]))))
    for e, d in zip(basis, np.ravel(np.asarray(part[0])), strict=True):
        fd = float(loss(omega + h * e, *args[1:], dense) - loss(omega - h * e, *args[1:], dense))
        assert abs(fd / (2 * h) - d) <= FD_REL_TOL * largest, (fd / (2 * h), d)


def test_recomputed_blocks_under_vmap_with_different_step_counts():
    """A batch whose members end inside the dense record, just past it and well past it: the
    same gradients as one member at a time with every state recorded."""
    run, (omega, y0, _, _) = _flat_problem("Dopri5", True, True, False)
    t1s = jnp.array([0.4, 1.6, 3.0])

    def loss(omega, t1, dense):
        out = run(omega, y0, t1, jnp.linspace(0.0, 1.0, 7) * t1, dense)
        return jnp.sum(out["ys"] ** 2), out["num_accepted_steps"]

    counts = [int(loss(omega, t1, None)[1]) for t1 in t1s]
    dense, steps = _dense_part(y0, counts[-1])
    assert counts[0] <= steps < counts[1] < counts[2]
    grad = jax.grad(lambda o, t1, d: loss(o, t1, d)[0], (0, 1))
    batched = js.jit(jax.vmap(lambda t1: grad(omega, t1, dense)))(t1s)
    for k, t1 in enumerate(t1s):
        single = js.jit(lambda t1: grad(omega, t1, None))(t1)
        for a, b in zip(batched, single, strict=True):
            scale = float(np.max(np.abs(np.asarray(b))))
            np.testing.assert_allclose(
                np.asarray(a[k]), np.asarray(b), atol=ROUND_OFF_REL_TOL * scale
            )  # fmt: skip


@pytest.mark.parametrize("hoisted", [True, False])
def test_record_memory(hoisted):
    """The states recorded: every one of the first `_DENSE_BYTES` (all of them within the budget
    where loops are not hoisted), every K-th within the budget; the buffers filled per call grow
    with `max_steps` by the times and those K-th states only. Decided per program: as traced for a
    hoisted program (jaxsim's) and for an unhoisted one (the user's own `jax.jit`)."""
    if not hoisted and _xla_options.process_hoisted():
        pytest.skip("XLA_FLAGS hoist every program here")
    with _xla_options.building(hoisted):
        _check_record_memory(hoisted)


def _check_record_memory(hoisted):
    y0 = jnp.zeros(6)  # the J2 orbit's state
    state = y0.size * 8
    chunk = core._chunk_size(y0, False)
    assert _xla_options.program_hoisted() is hoisted
    for max_steps, budget in [(4096, core.RECORD_BYTES), (4096 * 64, core.RECORD_BYTES),
                              (10**7, core.RECORD_BYTES), (10**5, 2**16)]:  # fmt: skip
        every = core._record_every(max_steps, y0, False, budget)
        dense = core._dense_steps(max_steps, y0, False, every, budget)
        assert every % chunk == 0 and dense % every == 0
        assert -(-max_steps // every) * state <= max(budget, chunk * state)
        if hoisted or max_steps * state > budget:
            assert dense * state <= max(core._DENSE_BYTES, every * state)
        else:
            assert dense >= max_steps
    # jaxsim's default max_steps, loops hoisted: the states take 1.3 MB (every 10th) and 1.0 MB
    # (the first 21840), against 12.6 MB with every state recorded.
    every = core._record_every(4096 * 64, y0, False, core.RECORD_BYTES)
    assert every == chunk == 10
    dense = core._dense_steps(4096 * 64, y0, False, every, core.RECORD_BYTES)
    assert dense == (21840 if hoisted else 4096 * 64 + 6)
    # A state over 512 bytes (chunks of one step), every state within the budget: all recorded
    # in one buffer, none twice.
    big = jnp.zeros(80)
    assert core._record_every(4096, big, False, core.RECORD_BYTES) == 1
    assert core._dense_steps(4096, big, False, 1, core.RECORD_BYTES) == 4096


def test_failed_run_has_nan_derivatives():
    def loss(mu):
        model = Kepler(mu)
        sol = js.simulate(
            model, model.init_state(periapsis()), 1.5, solver=js.Tsit5(), rtol=RTOL, atol=RTOL,
            max_steps=5, throw=False, outputs=False,
        )  # fmt: skip
        return jnp.sum(sol.ys["r"][-1])

    assert np.isnan(float(js.jit(jax.grad(loss))(jnp.asarray(1.0))))


def test_forward_mode_is_refused_by_name():
    # The default reverse mode on jaxsim's pairs is the discrete adjoint.
    assert core.loop_kind(None) == core.loop_kind(js.DiscreteAdjoint()) == "adjoint"
    with pytest.raises(TypeError, match="ForwardMode.*ForwardSensitivity"):
        jax.jacfwd(lambda mu: kepler_loss(mu, periapsis(), solver=js.Tsit5()))(jnp.asarray(1.0))
    model = Oscillator(jnp.asarray(1.0))
    y0 = {"x": jnp.ones(1), "v": jnp.zeros(1)}
    with pytest.raises(ValueError, match="DiscreteAdjoint.*RK4 on the fixed driver"):
        js.simulate(model, y0, 1.0, dt=0.1, solver=js.RK4(), adjoint=js.DiscreteAdjoint())
