r"""ODE solvers: fixed-step explicit Runge-Kutta (lean `lax.scan` driver) and adaptive diffrax solvers.

Fixed step (`Euler`, `RK2`, `RK4`) run in jaxsim's own driver: a `lax.scan` whose body unrolls the
stages of the Butcher tableau (3x cheaper per step than a generic stage loop), with Basilisk's
semantics (one step = one scheduler period; the step-level map after each step). Each also exposes
`to_diffrax()`, an equivalent `diffrax.AbstractERK`, so the same scheme runs in `diffrax.diffeqsolve`.

Adaptive (`Tsit5`, `Dopri5`, `Dopri8`) wrap the diffrax solvers and need `rtol` and `atol`.

A diffrax solver instance may also be passed to `simulate` directly.
"""

import abc
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np


class AbstractSolver(eqx.Module):
    """Base class of jaxsim solver choices."""

    adaptive: ClassVar[bool]

    @abc.abstractmethod
    def to_diffrax(self) -> dfx.AbstractSolver:
        """The equivalent diffrax solver."""


class AbstractFixedStepSolver(AbstractSolver):
    r"""Explicit Runge-Kutta scheme with a Butcher tableau $(a, b, c)$, fixed step."""

    adaptive: ClassVar[bool] = False
    a: ClassVar[tuple[tuple[float, ...], ...]]
    b: ClassVar[tuple[float, ...]]
    c: ClassVar[tuple[float, ...]]
    order: ClassVar[int]

    @property
    def num_stages(self) -> int:
        return len(self.b)

    def step(self, f, t, y, h, args):
        """One step of size `h` from `(t, y)`; `f(t, y, args)` returns a pytree like `y`."""
        ks = []
        for i in range(self.num_stages):
            ai = self.a[i] if i > 0 else ()
            yi = y
            for j, aij in enumerate(ai):
                if aij != 0.0:
                    yi = jtu.tree_map(lambda u, k, aij=aij: u + (h * aij) * k, yi, ks[j])
            ks.append(f(t + self.c[i] * h, yi, args))
        y1 = y
        for bi, k in zip(self.b, ks):
            if bi != 0.0:
                y1 = jtu.tree_map(lambda u, kk, bi=bi: u + (h * bi) * kk, y1, k)
        return y1

    def to_diffrax(self) -> dfx.AbstractSolver:
        return _make_diffrax_erk(type(self).__name__, self.a, self.b, self.c, self.order)


def _make_diffrax_erk(name, a, b, c, order):
    if name == "Euler":
        return dfx.Euler()
    lower = tuple(np.asarray(row, dtype=float) for row in a[1:])
    tableau = dfx.ButcherTableau(
        c=np.asarray(c[1:], dtype=float),
        b_sol=np.asarray(b, dtype=float),
        b_error=np.zeros(len(b)),
        a_lower=lower,
    )
    cls = type(
        f"_Diffrax{name}",
        (dfx.AbstractERK,),
        {
            "tableau": tableau,
            "interpolation_cls": dfx.ThirdOrderHermitePolynomialInterpolation.from_k,
            "order": lambda self, terms: order,
            "__annotations__": {},
        },
    )
    return cls()


class Euler(AbstractFixedStepSolver):
    """Forward Euler, order 1 (Basilisk `svIntegratorEuler`)."""

    a = ((),)
    b = (1.0,)
    c = (0.0,)
    order = 1


class RK2(AbstractFixedStepSolver):
    """Heun's second-order method (Basilisk `svIntegratorRK2`): $b = (1/2, 1/2)$, $c = (0, 1)$."""

    a = ((), (1.0,))
    b = (0.5, 0.5)
    c = (0.0, 1.0)
    order = 2


class RK4(AbstractFixedStepSolver):
    """Classical fourth-order Runge-Kutta (Basilisk's default `svIntegratorRK4`)."""

    a = ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
    b = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
    c = (0.0, 0.5, 0.5, 1.0)
    order = 4


class AbstractAdaptiveSolver(AbstractSolver):
    """An embedded Runge-Kutta pair from diffrax, driven by a PID step-size controller."""

    adaptive: ClassVar[bool] = True


class Tsit5(AbstractAdaptiveSolver):
    """Tsitouras 5(4) (`diffrax.Tsit5`)."""

    def to_diffrax(self):
        return dfx.Tsit5()


class Dopri5(AbstractAdaptiveSolver):
    """Dormand-Prince 5(4) (`diffrax.Dopri5`)."""

    def to_diffrax(self):
        return dfx.Dopri5()


class Dopri8(AbstractAdaptiveSolver):
    """Dormand-Prince 8(5,3) (`diffrax.Dopri8`)."""

    def to_diffrax(self):
        return dfx.Dopri8()


class StepMappedSolver(dfx.AbstractWrappedSolver):
    """Wrap a diffrax solver so that a step-level map is applied to `y1` after every step.

    The map (e.g. the MRP shadow-set switch) returns `(y, counts)`; `counts` (a pytree of integers)
    are accumulated in the solver state, so only accepted steps count. The dense output of the step
    is left in the coordinates of the step's start, so interpolated outputs are continuous; the
    driver applies the map to saved values. When the map changes `y`, a fresh solver state is built
    at the mapped `y1` (FSAL solvers cache $f(t_1, y_1)$, which a jump invalidates).
    """

    solver: dfx.AbstractSolver
    step_map: object  # a bound method of the model: a pytree (its arrays are traced)
    counts_like: object

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):  # SDE solvers ask the Brownian path for Levy areas
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args), self.counts_like

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner_state, counts = solver_state
        y1, y_error, dense_info, inner_state, result = self.solver.step(
            terms, t0, t1, y0, args, inner_state, made_jump
        )
        y1_mapped, step_counts = self.step_map(t1, y1)
        jumped = jnp.asarray(False)
        for u, v in zip(jtu.tree_leaves(y1), jtu.tree_leaves(y1_mapped)):
            jumped = jumped | jnp.any(u != v)
        if jtu.tree_leaves(inner_state):
            fresh = self.solver.init(terms, t1, t1 + (t1 - t0), y1_mapped, args)
            inner_state = jtu.tree_map(lambda a, b: jnp.where(jumped, a, b), fresh, inner_state)
        counts = jtu.tree_map(lambda c, s: c + s.astype(c.dtype), counts, step_counts)
        return y1_mapped, y_error, dense_info, (inner_state, counts), result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)
