"""PI step-size control: `stepsize_controller=diffrax.PIDController(rtol, atol, pcoeff, icoeff)`
on every adaptive path (jaxsim's adaptive core, the diffrax path, the clocked driver, free times).

Oracles: `diffrax.diffeqsolve` with the same pair and the same `PIDController` (the same accepted
and rejected steps, final states within a tolerance-scaled bound); the default gains (0, 1) give
the run without a controller bit for bit; central finite differences for gradients.
"""

import math

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from tests.engine.cores.test_adaptive_core import MU, Kepler


# Step counts vs diffrax: the same controller on error estimates that differ by round-off only
# (stage sums in another order), which can flip a decision sitting at the threshold; the bound of
# tests/engine/cores/test_adaptive_core.py (measured here: equal counts for every pair).
STEP_COUNT_REL_TOL = 0.02
# Final states vs diffrax: each within ~rtol-scaled truncation error of the truth (a flipped
# decision moves both by about that much): 100 x rtol relative, as in tests/engine/cores/test_adaptive_core.py.
STATE_REL_TOL_FACTOR = 100.0
# Gradients vs central differences (relative step FD_STEP): the step sequence is piecewise constant
# in the parameter; the bound of tests/engine/cores/test_adaptive_core.py.
GRAD_REL_TOL = 1e-6
FD_STEP = 1e-6

RTOL = 1e-9
# An explicit first step [-] for jaxsim's core and `diffeqsolve`: their first steps without one
# differ (measured on this orbit: 0.031 and 0.01), so the comparison fixes it.
DT0 = 0.05
PI = (0.2, 0.4)  # (pcoeff, icoeff): a PI controller (Söderlind's family, diffrax's parameters)
# (pcoeff, icoeff, dcoeff): a PID controller (a D term on the PI's gains; diffrax's semantics).
PID = (0.2, 0.4, 0.05)


def pid(gains, **kw):
    names = ("pcoeff", "icoeff", "dcoeff")
    return dfx.PIDController(rtol=RTOL, atol=RTOL, **dict(zip(names, gains)), **kw)


def run(solver, gains, **kw):
    model = Kepler(jnp.asarray(MU))
    kw = dict(t1=2 * math.pi, dt=DT0, outputs=False) | kw
    return js.simulate(
        model, model.init_state(), solver=solver, stepsize_controller=pid(gains), **kw
    )


def run_diffrax(solver, gains, dt0=DT0, **kw):
    """Plain `diffrax.diffeqsolve` of the same orbit: `(accepted, rejected, final state)`."""
    model = Kepler(jnp.asarray(MU))
    sol = dfx.diffeqsolve(
        dfx.ODETerm(lambda t, y, args: model.drift(t, y, None)), solver.to_diffrax(), 0.0,
        2 * math.pi, dt0, model.init_state(), stepsize_controller=pid(gains, **kw),
        max_steps=4096,
    )  # fmt: skip
    final = {k: np.asarray(v[-1]) for k, v in sol.ys.items()}
    return int(sol.stats["num_accepted_steps"]), int(sol.stats["num_rejected_steps"]), final


def counts(sol):
    return int(sol.stats["num_steps"]), int(sol.stats["num_rejected_steps"])


def assert_same_steps(mine, ref):
    for a, b in zip(mine, ref):
        assert abs(a - b) <= STEP_COUNT_REL_TOL * b + 1, (mine, ref)


def assert_same_final(sol, ref_final):
    for key in ("r", "v"):
        a, b = np.asarray(sol.ys[key][-1]), ref_final[key]
        assert np.max(np.abs(a - b)) <= STATE_REL_TOL_FACTOR * RTOL * np.max(np.abs(b)), key


@pytest.mark.parametrize("solver", [js.Tsit5(), js.Dopri5(), js.Dopri8()], ids=str)
def test_pi_steps_and_state_equal_diffrax(solver):
    sol = run(solver, PI)
    accepted, rejected, final = run_diffrax(solver, PI)
    assert sol.ok
    assert_same_steps(counts(sol), (accepted, rejected))
    assert_same_final(sol, final)
    # The gains reach the loop: the I controller takes another step sequence.
    assert counts(run(solver, (0.0, 1.0))) != counts(sol)


@pytest.mark.parametrize("solver", [js.Tsit5(), js.Dopri5(), js.Dopri8()], ids=str)
def test_pid_steps_and_state_equal_diffrax(solver):
    """The D term (`dcoeff`): the same accepted/rejected counts and final state as diffrax's
    PIDController, and another step sequence than the PI controller without it."""
    sol = run(solver, PID)
    accepted, rejected, final = run_diffrax(solver, PID)
    assert sol.ok
    assert_same_steps(counts(sol), (accepted, rejected))
    assert_same_final(sol, final)
    # The D term reaches the loop: the PI controller alone takes other steps (another final
    # state; on Dopri8 the counts happen to agree).
    pi = run(solver, PI)
    assert not np.array_equal(np.asarray(pi.ys["r"][-1]), np.asarray(sol.ys["r"][-1]))


def test_default_gains_are_the_run_without_a_controller():
    model = Kepler(jnp.asarray(MU))
    kw = dict(t1=2 * math.pi, solver=js.Dopri8(), outputs=False)
    plain = js.simulate(model, model.init_state(), rtol=RTOL, atol=RTOL, **kw)
    for ctrl in (
        dfx.PIDController(rtol=RTOL, atol=RTOL),
        dfx.PIDController(rtol=RTOL, atol=RTOL, pcoeff=0.0, icoeff=1.0),
    ):
        sol = js.simulate(model, model.init_state(), stepsize_controller=ctrl, **kw)
        assert counts(sol) == counts(plain)
        for key in ("r", "v"):
            np.testing.assert_array_equal(np.asarray(sol.ys[key]), np.asarray(plain.ys[key]))


def _final_r2(mu, adjoint=None):
    model = Kepler(mu)
    sol = js.simulate(
        model, model.init_state(), 3.0, solver=js.Dopri8(), outputs=False, adjoint=adjoint,
        stepsize_controller=dfx.PIDController(rtol=1e-10, atol=1e-10, pcoeff=PI[0], icoeff=PI[1]),
    )  # fmt: skip
    r = sol.ys["r"][-1]
    return r @ r


@pytest.mark.parametrize(
    "adjoint", [None, js.ForwardSensitivity()], ids=["discrete_adjoint", "forward_sensitivity"]
)
def test_gradient_through_a_pi_run_matches_central_differences(adjoint):
    fn = lambda mu: _final_r2(mu, adjoint)  # noqa: E731
    g = float(jax.jit(jax.grad(fn))(jnp.asarray(MU)))
    value = jax.jit(fn)
    d = FD_STEP * MU
    fd = (float(value(jnp.asarray(MU + d))) - float(value(jnp.asarray(MU - d)))) / (2 * d)
    assert abs(g) > 0.1
    assert abs(g - fd) <= GRAD_REL_TOL * abs(fd), (g, fd)


@pytest.mark.parametrize("gains", [PI, PID], ids=["PI", "PID"])
def test_diffrax_path_honours_the_gains(gains):
    # A diffrax solver given `dt` steps at `dt`: both runs take diffrax's first step.
    solver = js.Dopri5()
    sol = run(solver.to_diffrax(), gains, dt=None)
    accepted, rejected, final = run_diffrax(solver, gains, dt0=None)
    assert_same_steps(counts(sol), (accepted, rejected))
    assert_same_final(sol, final)
    assert counts(run(solver.to_diffrax(), (0.0, 1.0), dt=None)) != counts(sol)


@pytest.mark.parametrize("gains", [PI, PID], ids=["PI", "PID"])
def test_clocked_driver_honours_the_gains(gains):
    # `dtmax` (never reached here: the steps stay below 2) runs the clocked driver.
    solver = js.Dopri5()
    model = Kepler(jnp.asarray(MU))
    ctrl = pid(gains, dtmax=2.0)
    sol = js.simulate(
        model, model.init_state(), 2 * math.pi, dt=DT0, solver=solver, stepsize_controller=ctrl,
        outputs=False,
    )  # fmt: skip
    accepted, rejected, final = run_diffrax(solver, gains, dtmax=2.0)
    assert_same_steps(counts(sol), (accepted, rejected))
    assert_same_final(sol, final)
    assert counts(sol) != run_diffrax(solver, (0.0, 1.0), dtmax=2.0)[:2]


def test_free_time_run_honours_the_gains():
    # A traced `t1` (free times) runs the same core with the same gains.
    solver = js.Dopri5()
    model = Kepler(jnp.asarray(MU))

    def steps(t1):
        sol = js.simulate(
            model, model.init_state(), t1, dt=DT0, solver=solver, stepsize_controller=pid(PI),
            outputs=False,
        )  # fmt: skip
        return sol.stats["num_steps"], sol.stats["num_rejected_steps"]

    traced = tuple(int(n) for n in jax.jit(steps)(2 * math.pi))
    assert traced == counts(run(solver, PI))


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(dcoeff=-0.1), r"PIDController\(dcoeff=\.\.\.\)` \[-\] must be finite and >= 0; got -0\.1"),
        (dict(dtmin=0.1), r"dtmin=0\.1 has no jaxsim equivalent"),
        (dict(pcoeff=-0.1), r"PIDController\(pcoeff=\.\.\.\)` \[-\] must be finite and >= 0; got -0\.1"),
        (dict(icoeff=float("nan")), r"PIDController\(icoeff=\.\.\.\)` \[-\] must be finite and > 0; got nan"),
        (dict(icoeff=0.0), r"PIDController\(icoeff=\.\.\.\)` \[-\] must be finite and > 0; got 0\.0"),
        (dict(pcoeff=np.array([0.1, 0.2])), r"PIDController\(pcoeff=\.\.\.\)` \[-\] must be a concrete scalar"),
    ],
    ids=["negative_dcoeff", "dtmin", "negative_pcoeff", "nan_icoeff", "zero_icoeff", "vector_pcoeff"],
)  # fmt: skip
def test_bad_gains_are_refused(kw, match):
    model = Kepler(jnp.asarray(MU))
    with pytest.raises(ValueError, match=match):
        js.simulate(
            model, model.init_state(), 1.0, solver=js.Dopri5(),
            stepsize_controller=dfx.PIDController(rtol=RTOL, atol=RTOL, **kw),
        )  # fmt: skip
