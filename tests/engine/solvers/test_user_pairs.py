"""A user's embedded pair (`AbstractAdaptiveSolver` with `tableau`, `interpolation_cls`, `order`)
runs on the lean adaptive core like jaxsim's own pairs: the Bogacki-Shampine 3(2) pair written
from its published coefficients (P. Bogacki and L. F. Shampine, "A 3(2) pair of Runge-Kutta
formulas", Appl. Math. Lett. 2(4), 321-325, 1989) against the same pair in
`diffrax.diffeqsolve` (its `to_diffrax()`, and diffrax's own `Bosh3`), on a harmonic oscillator
with the exact solution x = cos(omega t)."""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js


OMEGA = 2.0  # [rad/s]
T1 = 2.0  # [s]
RTOL, ATOL = 1e-8, 1e-10
# Lean core vs diffeqsolve on the same pair: the same controller rules, but round-off in the error
# estimates flips a few accept/reject decisions at the threshold (engine guide: accepted steps
# within 0.4 % for jaxsim's pairs); measured 748 vs 745 accepted here.
STEP_REL_TOL = 0.01
# Their final states differ by the step sequences' truncation errors: measured 7e-12, against a
# global error of 2.3e-8 at this tolerance.
STATE_TOL = 1e-10
# The global error at this tolerance: measured 2.3e-8 (rtol 1e-8 over a few periods).
GLOBAL_TOL = 1e-7


class _Oscillator(js.AbstractDynamicObject):
    omega: float
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": y["v"], "v": -(self.omega**2) * y["x"]}


_TABLEAU = dfx.ButcherTableau(
    c=np.array([1 / 2, 3 / 4, 1.0]),
    b_sol=np.array([2 / 9, 1 / 3, 4 / 9, 0.0]),
    b_error=np.array([2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, 0.0 - 1 / 8]),
    a_lower=(np.array([1 / 2]), np.array([0.0, 3 / 4]), np.array([2 / 9, 1 / 3, 4 / 9])),
)


class BogackiShampine(js.AbstractAdaptiveSolver):
    tableau = _TABLEAU
    interpolation_cls = dfx.ThirdOrderHermitePolynomialInterpolation.from_k
    order = 3


def _run(solver):
    model = _Oscillator(OMEGA)
    return js.simulate(model, model.init_state(), T1, solver=solver, rtol=RTOL, atol=ATOL)


def _accepted(sol):
    return int(sol.stats["num_steps"])


@pytest.mark.parametrize("unrolled", [True, False], ids=["unrolled", "looped"])
def test_user_pair_runs_on_the_adaptive_core_like_diffeqsolve(unrolled):
    solver = BogackiShampine(unrolled=unrolled)
    lean = _run(solver)
    x_lean = float(lean.ys["x"][-1])
    assert abs(x_lean - np.cos(OMEGA * T1)) < GLOBAL_TOL
    for reference in (solver.to_diffrax(), dfx.Bosh3()):
        ref = _run(reference)
        assert abs(_accepted(lean) - _accepted(ref)) <= STEP_REL_TOL * _accepted(ref)
        assert abs(x_lean - float(ref.ys["x"][-1])) < STATE_TOL


def test_to_diffrax_is_one_class_per_pair():
    """Equal solvers are equal static arguments (one compiled program for repeated calls)."""
    assert type(BogackiShampine().to_diffrax()) is type(BogackiShampine().to_diffrax())
    assert type(BogackiShampine(unrolled=False).to_diffrax()) is BogackiShampine._diffrax_cls


def test_incomplete_or_invalid_pairs_are_refused_by_name():
    with pytest.raises(TypeError, match="Pair1: a pair with a `tableau` must set `order`"):
        type("Pair1", (js.AbstractAdaptiveSolver,), {
            "tableau": _TABLEAU,
            "interpolation_cls": dfx.ThirdOrderHermitePolynomialInterpolation.from_k,
        })  # fmt: skip
    with pytest.raises(ValueError, match=r"Pair2: `order` must be an int >= 1; got 0"):
        type("Pair2", (js.AbstractAdaptiveSolver,), {
            "tableau": _TABLEAU,
            "interpolation_cls": dfx.ThirdOrderHermitePolynomialInterpolation.from_k,
            "order": 0,
        })  # fmt: skip
    with pytest.raises(TypeError, match="Pair3: `tableau` must be a diffrax.ButcherTableau"):
        type("Pair3", (js.AbstractAdaptiveSolver,), {
            "tableau": ((), (0.5,)),
            "interpolation_cls": dfx.ThirdOrderHermitePolynomialInterpolation.from_k,
            "order": 2,
        })  # fmt: skip
