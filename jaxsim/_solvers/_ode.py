r"""ODE solvers: fixed-step explicit Runge-Kutta (lean `lax.scan` driver) and adaptive diffrax solvers.

Fixed step (`Euler`, `RK2`, `RK4`) run in jaxsim's own driver: a `lax.scan` over steps with
Basilisk's semantics (one step = one scheduler period; the step-level map after each step). Within
a step, the stages of these tableaus (each uses only the previous stage) run in an inner
`lax.scan` over the tableau's coefficients, so the right-hand side is traced and compiled once,
not once per stage; the step costs no more at run time than straight-line stages, and for RK4
on the combined spacecraft the compile time of a step loop fell 2.4x and of its gradient 2.7x
(`unrolled_step` keeps the straight-line form). Each also exposes
`to_diffrax()`, an equivalent `diffrax.AbstractERK`, so the same scheme runs in `diffrax.diffeqsolve`.

Adaptive (`Tsit5`, `Dopri5`, `Dopri8`) need `rtol` and `atol` and run on jaxsim's own adaptive
core (`jaxsim._cores._adaptive`: diffrax's step-control rules, one loop over the flat state; with
`unrolled=False` the stages run in a loop); runs with events or clocks, and any diffrax solver
instance, run in `diffrax.diffeqsolve`. `to_diffrax()` gives the pair with unrolled stages (`UnrolledTsit5`, ...: diffrax's tableaus and
dense output, straight-line step code) when `unrolled=True` (the default for `Dopri8`), or
diffrax's own solver (the default for `Tsit5` and `Dopri5`).

A diffrax solver instance may also be passed to `simulate` directly.
"""

import abc
import contextlib
import functools
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._model._layout import StateLayout
from .._model._step_context import stage as stage_context
from . import _verner


class AbstractSolver(eqx.Module):
    """Base class of jaxsim solver choices.

    The kind of a solver is a property of its class: `adaptive` (needs `rtol`/`atol`, steps chosen
    by an error controller) and `stochastic` (an SDE scheme); `simulate` reads them once to choose
    the driver (guide: "Events, clocks and discontinuities").
    """

    adaptive: ClassVar[bool]
    stochastic: ClassVar[bool] = False

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
        """One step of size `h` from `(t, y)`; `f(t, y, args)` returns a pytree like `y`.

        Tableaus whose stage i uses only stage i-1 (`Euler`, `RK2`, `RK4`) run their stages in a
        `lax.scan`, so `f` is traced and compiled once per step rather than once per stage: the
        compile time of a model's step loop, and of its gradient, falls 2.4-2.7x (RK4, combined
        spacecraft) at an unchanged run time and the same arithmetic. Other tableaus unroll their stages.
        """
        if self.num_stages > 1 and _is_chain(self.a):
            return _chain_step(self, f, t, y, h, args)
        return self.unrolled_step(f, t, y, h, args)

    def unrolled_step(self, f, t, y, h, args):
        """`step` with its stages unrolled (`f` traced once per stage)."""
        ks = []
        for i in range(self.num_stages):
            ai = self.a[i] if i > 0 else ()
            yi = y
            for j, aij in enumerate(ai):
                if aij != 0.0:
                    yi = jtu.tree_map(lambda u, k, aij=aij: u + (h * aij) * k, yi, ks[j])
            c_prev, prev_step = _prev_nodes(self.c)
            with stage_context(self.c[i], c_prev[i], prev_step[i]):
                ks.append(f(t + self.c[i] * h, yi, args))
        y1 = y
        for bi, k in zip(self.b, ks):
            if bi != 0.0:
                y1 = jtu.tree_map(lambda u, kk, bi=bi: u + (h * bi) * kk, y1, k)
        return y1

    def to_diffrax(self) -> dfx.AbstractSolver:
        return _make_diffrax_erk(type(self).__name__, self.a, self.b, self.c, self.order)


def _is_chain(a) -> bool:
    """Whether every stage's input uses the previous stage only: `a[i][j] == 0` for `j < i - 1`."""
    return all(all(x == 0.0 for x in row[:-1]) for row in a[1:])


def _chain_step(solver, f, t, y, h, args):
    # Stage i evaluates k_i = f(t + c_i h, y + a_{i,i-1} h k_{i-1}) and adds b_i h k_i to the result,
    # in the same order of floating-point operations as the unrolled stages.
    a_next = np.array([row[-1] for row in solver.a[1:]] + [0.0])
    c_prev, prev_step = _prev_nodes(solver.c)
    coef = tuple(
        jnp.asarray(x)
        for x in (h * a_next, h * np.asarray(solver.b), np.asarray(solver.c), c_prev, prev_step)
    )

    # Reverse mode stores each stage's input and recomputes the right-hand side's intermediates in
    # the backward pass, instead of stacking all of them over the stages: on the combined
    # spacecraft this halved the gradient's run time (fewer, larger kernels) and left the forward
    # pass unchanged (the checkpoint is inert without differentiation). Inside the scan, CSE cannot
    # merge the recomputation with the forward pass, so `prevent_cse` is not needed.
    f_remat = eqx.filter_checkpoint(f, prevent_cse=False)

    layout = StateLayout.of(y)
    if layout is None:
        return _chain_step_tree(f_remat, coef, t, y, h, args)

    # The stage loop carries the state as one flat vector, in the drivers' layout
    # (`jaxsim._model._layout`; a state the driver already carries flat is one leaf here): a loop carry
    # costs one copy kernel per leaf and per stage on the CPU runtime, and the slices and the
    # concatenation fuse into the right-hand side's kernels. Combined spacecraft, RK4: 82 -> 67
    # fusions and 57 -> 31 copies in the step loop, 11.7 -> 9.9 us per step, bitwise the same
    # states.
    y_flat, unravel = layout.flatten(y), layout.unflatten

    def flat_f(ti, yi_flat):
        k = f_remat(ti, unravel(yi_flat), args)
        if jtu.tree_structure(k) != layout.treedef:
            raise ValueError(
                "drift: the derivative must have the structure of the state; expected "
                f"{layout.treedef}, got {jtu.tree_structure(k)}."
            )
        return layout.flatten(k)

    def stage(carry, xs):
        yi, y1 = carry
        ha, hb, c, cp, ps = xs
        with stage_context(c, cp, ps):
            k = flat_f(t + c * h, yi)
        return (y_flat + ha.astype(k.dtype) * k, y1 + hb.astype(k.dtype) * k), None

    (_, y1), _ = jax.lax.scan(stage, (y_flat, y_flat), coef)
    return unravel(y1)


def _prev_nodes(c):
    """The node of the evaluation before each stage and whether it is in the previous step
    (`jaxsim._model._step_context.stage_clock`): the previous stage's; for the first stage, the last
    stage of the previous step."""
    c_prev = np.array([c[-1]] + list(c[:-1]), dtype=float)
    return c_prev, np.arange(len(c)) == 0


def _chain_step_tree(f_remat, coef, t, y, h, args):
    # Stage loop on the state's pytree (states whose leaves mix dtypes).
    def stage(carry, xs):
        yi, y1 = carry
        ha, hb, c, *prev = xs  # `prev`: the previous node and step flag (`stage_clock`), if given
        with stage_context(c, *prev) if prev else contextlib.nullcontext():
            k = f_remat(t + c * h, yi, args)
        y1 = jtu.tree_map(lambda u, kk: u + hb.astype(kk.dtype) * kk, y1, k)
        yi = jtu.tree_map(lambda u, kk: u + ha.astype(kk.dtype) * kk, y, k)
        return (yi, y1), None

    (_, y1), _ = jax.lax.scan(stage, (y, y), coef)
    return y1


@functools.cache
def _make_diffrax_erk(name, a, b, c, order):
    # Cached: the class is built once per tableau, so equal solvers are equal (static) arguments of
    # a jitted driver and repeated calls reuse the compiled program (a fresh class per call made
    # every clocked fixed-step `simulate` compile again).
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


# Stages written out or looped (`unrolled=None`, the default of `Dopri8` and `Verner9`): a drift of
# at most this many jaxpr equations (counted at trace time, loop bodies once: `drift_equations`)
# has its stages written out, a larger one looped (the drift traced and compiled once, not once
# per stage). Measured (`benchmarks/results/stage_rule.md`, LEO 6 h at 1e-10, Dopri8): point
# models of 21 and 124 equations step 2.3-3.2x faster written out (their compiles take seconds
# either way); every `Spacecraft` drift has 377 (a point-mass Earth) to 2793 (the environment
# guide's "all of it") and compiles 2.6-5.3x faster looped, and runs from 2.4x slower (377) to
# 2.2x faster (third bodies from DE421) looped: about even from 600 up.
UNROLL_MAX_EQUATIONS = 300


def _sub_jaxprs(value):
    if isinstance(value, jax.extend.core.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jax.extend.core.Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _sub_jaxprs(v)


def count_equations(jaxpr) -> int:
    """Equations of a jaxpr, those of its sub-jaxprs (loop bodies, branches, calls) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                n += count_equations(sub)
    return n


def drift_equations(f, *args) -> int:
    """The size of `f(*args)`'s program: its jaxpr's equations (`count_equations`), traced once
    (`args` may be tracers; nothing is computed)."""
    return count_equations(jax.make_jaxpr(f)(*args).jaxpr)


def stages_unrolled(unrolled, f, *args) -> bool:
    """`unrolled` as given, or for None the rule of `UNROLL_MAX_EQUATIONS` on `f(*args)`."""
    if unrolled is not None:
        return bool(unrolled)
    return drift_equations(f, *args) <= UNROLL_MAX_EQUATIONS


class AbstractAdaptiveSolver(AbstractSolver):
    """An embedded Runge-Kutta pair driven by an error-controlled step size.

    `simulate` runs jaxsim's pairs on jaxsim's own adaptive core: the rules of
    `diffrax.PIDController`'s defaults (the same accepted and rejected steps as
    `diffrax.diffeqsolve`), one loop over the flat state; `unrolled` chooses between the stages
    written out (the drift traced once per stage: fastest steps for small drifts) and the stages in
    a loop (the drift traced once: smaller programs, faster compiles). Pass `solver.to_diffrax()`
    to run the same pair in `diffrax.diffeqsolve` instead (a cross-check); runs with events or
    clocks use diffrax.

    `unrolled=True`: `to_diffrax()` gives the pair as jaxsim's own diffrax solver with the stages
    unrolled at trace time (diffrax's tableau and dense output; on the XLA CPU runtime, for a small vector field such as a J2 point
    mass, Dopri8 steps are 3-5x and Tsit5 steps 1.3-1.6x cheaper than with diffrax's stage loop; the
    gain shrinks as the vector field's own cost grows, and compilation takes longer since the
    vector field is traced and compiled once per stage). `unrolled=False`: diffrax's own solver
    (same tableau, same dense output). Defaults, from those measurements: diffrax's loop for
    `Tsit5` and `Dopri5` (on the full spacecraft no faster per step, 2x longer to compile);
    `unrolled=None` for `Dopri8` and `Verner9`: on jaxsim's core, written out for a drift of at
    most `UNROLL_MAX_EQUATIONS` jaxpr equations (point models), looped for a larger one (every
    `Spacecraft`: 2.6-5.3x faster compiles; issue 41), on diffrax's loop written out.


    **A pair of your own** is a subclass with three class attributes: `tableau`, an explicit
    `diffrax.ButcherTableau` ($c_1 = 0$; `b_error` the difference of the two weight rows),
    `interpolation_cls`, its dense output (e.g.
    `diffrax.ThirdOrderHermitePolynomialInterpolation.from_k`), and `order`, the order that the
    step-size controller uses. It then runs on the adaptive core like jaxsim's own pairs, and
    `to_diffrax()` gives the same pair for `diffrax.diffeqsolve` (guide: "Extending jaxsim").
    """

    adaptive: ClassVar[bool] = True
    unrolled: bool = eqx.field(static=True, default=True)
    tableau: ClassVar[dfx.ButcherTableau]
    interpolation_cls: ClassVar  # pyright: ignore
    order: ClassVar[int]
    _unrolled_cls: ClassVar[type]
    _diffrax_cls: ClassVar[type]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        tab = cls.__dict__.get("tableau")
        if tab is None:
            return
        for attr in ("interpolation_cls", "order"):
            if attr not in cls.__dict__:
                raise TypeError(f"{cls.__name__}: a pair with a `tableau` must set `{attr}` too.")
        order = cls.__dict__["order"]
        if not isinstance(order, int) or isinstance(order, bool) or order < 1:
            raise ValueError(f"{cls.__name__}: `order` must be an int >= 1; got {order!r}.")
        if not isinstance(tab, dfx.ButcherTableau):
            raise TypeError(
                f"{cls.__name__}: `tableau` must be a diffrax.ButcherTableau; got "
                f"{type(tab).__name__}."
            )
        body = {"tableau": tab, "interpolation_cls": cls.__dict__["interpolation_cls"]}
        # Built once per class, so equal solvers are equal (static) arguments of a jitted driver.
        cls._unrolled_cls = type(
            f"Unrolled{cls.__name__}",
            (AbstractUnrolledERK,),
            {**body, "_order": order, "__annotations__": {}},
        )
        cls._diffrax_cls = type(
            f"_Diffrax{cls.__name__}",
            (dfx.AbstractERK,),
            {**body, "order": lambda self, terms: order, "__annotations__": {}},
        )

    def to_diffrax(self) -> dfx.AbstractSolver:
        # `unrolled=None` (chosen from the drift on jaxsim's core): written out on diffrax's loop.
        return self._diffrax_cls() if self.unrolled is False else self._unrolled_cls()


def _tableau_coeffs(tab: dfx.ButcherTableau):
    """Python-float rows `(a, b, e, c)` of an explicit tableau (a: strictly lower rows, row 0 empty)."""
    a = ((),) + tuple(tuple(float(x) for x in row) for row in tab.a_lower)
    b = tuple(float(x) for x in tab.b_sol)
    e = tuple(float(x) for x in tab.b_error)
    c = (0.0,) + tuple(float(x) for x in tab.c)
    return a, b, e, c


def _combine(base, coeffs, ks):
    """`base + sum_j coeffs[j] * ks[j]` over the nonzero coefficients (`base=None`: no base term).

    Returns `None` when `base` is None and every coefficient is zero.
    """
    out = base
    for cj, kj in zip(coeffs, ks):
        if cj == 0.0:
            continue
        if out is None:
            out = jtu.tree_map(lambda k, cj=cj: cj * k, kj)
        else:
            out = jtu.tree_map(lambda u, k, cj=cj: u + cj * k, out, kj)
    return out


class AbstractUnrolledERK(dfx.AbstractAdaptiveSolver):
    r"""Embedded explicit Runge-Kutta pair for `diffrax.diffeqsolve` with the stages unrolled.

    Same mathematics as `diffrax.AbstractERK` for an explicit tableau $(a, b, \hat b, c)$ with $s$
    stages: $k_i = \Delta t\, f(t_0 + c_i \Delta t,\ y_0 + \sum_{j<i} a_{ij} k_j)$ ("$\Delta t$"
    generally the term's control), $y_1 = y_0 + \sum_i b_i k_i$, error estimate
    $\sum_i \hat b_i k_i$ (`tableau.b_error`, the difference of the two weights), dense output from
    `interpolation_cls` with `dense_info = dict(y0, y1, k)`, `k` the stages stacked on a leading
    axis of length $s$ (the structure diffrax's interpolation classes expect). The difference is
    computational: the stages are a Python loop at trace time (zero coefficients skipped), so the
    step compiles to straight-line code that XLA fuses, instead of a loop over stages writing a
    stacked stage buffer with dynamic slices (several kernels per stage on the CPU runtime).

    FSAL (first same as last, $a_{s,j} = b_j$, $c_s = 1$): the last stage $f(t_1, y_1)$ is kept in
    the solver state `(first_step, f1)` and reused as the first stage of the next step; it is
    recomputed on the first step and after a jump (`made_jump`, e.g. at `jump_ts`), inside a
    `lax.cond` whose predicate is un-batched (`equinox.internal.unvmap_any`), so that under `vmap`
    a batch recomputes only if one of its members must.

    Subclasses set the class attributes `tableau` (a `diffrax.ButcherTableau`, explicit),
    `interpolation_cls` and `_order`.

    **Assumptions and limitations:** explicit tableaus with $c_1 = 0$ only; one term (`ODETerm`, or
    any single term with `vf`/`contr`/`prod`); the vector field is always evaluated with `vf`
    (diffrax switches to `vf_prod` for "expensive" terms such as `BacksolveAdjoint`'s, here only
    slower, not wrong). Reverse-mode differentiation with diffrax's default
    `RecursiveCheckpointAdjoint` works through the unrolled stages; it stores every stage of a step.
    """

    tableau: ClassVar[dfx.ButcherTableau]
    interpolation_cls: ClassVar  # pyright: ignore
    term_structure: ClassVar = dfx.AbstractTerm
    _order: ClassVar[int]
    _coeffs: ClassVar[tuple]
    # Extra stages of the dense output, `(c_i, a_i)` each (a_i over every earlier stage), computed
    # after the step's own (`Verner9`'s interpolant); () for pairs whose interpolant takes the
    # step's stages only.
    _dense_rows: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        tab = cls.__dict__.get("tableau")
        if tab is not None:
            if tab.implicit or tab.c1 != 0.0:
                raise ValueError(f"{cls.__name__}: `tableau` must be explicit with c1 = 0.")
            cls._coeffs = _tableau_coeffs(tab)

    def order(self, terms):
        del terms
        return self._order

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def init(self, terms, t0, t1, y0, args):
        if not self.tableau.fsal:
            return None
        f_struct = eqx.filter_eval_shape(self.func, terms, t0, y0, args)
        f0 = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), f_struct)
        return jnp.asarray(True), f0

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        a, b, e, c = self._coeffs
        fsal = self.tableau.fsal
        control = terms.contr(t0, t1)
        dt = t1 - t0

        def t_stage(ci):  # "c == 1 -> t1" keeps the last stage exactly at t1 (as diffrax does)
            return t1 if ci == 1.0 else t0 + ci * dt

        if fsal:
            first_step, f_prev = solver_state
            redo = eqxi.unvmap_any(jnp.asarray(first_step) | jnp.asarray(made_jump))
            f0 = jax.lax.cond(redo, lambda: terms.vf(t0, y0, args), lambda: f_prev)
        else:
            f0 = terms.vf(t0, y0, args)
        # Stage combinations on one flat vector when the state's leaves share a floating dtype
        # (one kernel per combination instead of one per leaf; the slices and concatenations
        # fuse into the right-hand side), else on the pytree.
        # (`_combine` treats a flat vector as a pytree of one leaf.)
        k0 = terms.prod(f0, control)
        layout = StateLayout.of(y0)
        flat = layout is not None and jtu.tree_structure(k0) == layout.treedef
        if flat:
            y0_flat, unravel, pack = layout.flatten(y0), layout.unflatten, layout.flatten
        else:
            pack = unravel = lambda tree: tree
            y0_flat = y0
        ks = [pack(k0)]
        fi = f0
        yi_flat = y0_flat
        for i in range(1, len(b)):
            yi_flat = _combine(y0_flat, a[i], ks)
            fi = terms.vf(t_stage(c[i]), unravel(yi_flat), args)
            ks.append(pack(terms.prod(fi, control)))
        # SSAL (a_s = b, explicit last stage): y1 is the last stage's argument.
        y1 = unravel(yi_flat if self.tableau.ssal else _combine(y0_flat, b, ks))
        y_error = _combine(None, e, ks)
        y_error = jtu.tree_map(jnp.zeros_like, y0) if y_error is None else unravel(y_error)
        f_last = fi
        for ci, row in self._dense_rows:
            yi_flat = _combine(y0_flat, row, ks)
            ks.append(pack(terms.prod(terms.vf(t_stage(ci), unravel(yi_flat), args), control)))
        if flat:
            k = jax.vmap(unravel)(jnp.stack(ks))
        else:
            k = jtu.tree_map(lambda *kk: jnp.stack(kk), *ks)
        dense_info = dict(y0=y0, y1=y1, k=k)
        new_state = (jnp.asarray(False), f_last) if fsal else None
        return y1, y_error, dense_info, new_state, dfx.RESULTS.successful


class UnrolledTsit5(AbstractUnrolledERK):
    """Tsitouras 5(4), 7 stages, FSAL, 5th-order dense output: `diffrax.Tsit5`'s tableau and
    interpolation, stages unrolled (see [`AbstractUnrolledERK`][]).

    Reference: Ch. Tsitouras, "Runge-Kutta pairs of order 5(4) satisfying only the first column
    simplifying assumption", Computers & Mathematics with Applications 62(2), 770-775, 2011.
    """

    tableau = dfx.Tsit5.tableau
    interpolation_cls = dfx.Tsit5.interpolation_cls
    _order = 5


class UnrolledDopri5(AbstractUnrolledERK):
    """Dormand-Prince 5(4), 7 stages, FSAL, dense output of Shampine (1986): `diffrax.Dopri5`'s
    tableau and interpolation, stages unrolled (see [`AbstractUnrolledERK`][]).

    References: J. R. Dormand and P. J. Prince, "A family of embedded Runge-Kutta formulae",
    J. Comp. Appl. Math. 6, 19-26, 1980; L. F. Shampine, "Some practical Runge-Kutta formulas",
    Math. Comp. 46(173), 135-150, 1986.
    """

    tableau = dfx.Dopri5.tableau
    interpolation_cls = dfx.Dopri5.interpolation_cls
    _order = 5


class UnrolledDopri8(AbstractUnrolledERK):
    """Dormand-Prince 8(7), 14 stages, FSAL, 8th-order dense output: `diffrax.Dopri8`'s tableau and
    interpolation, stages unrolled (see [`AbstractUnrolledERK`][]).

    References: P. J. Prince and J. R. Dormand, "High order embedded Runge-Kutta formulae",
    J. Comp. Appl. Math. 7(1), 67-75, 1981; dense output: P. Bogacki and L. F. Shampine,
    "Interpolating high-order Runge-Kutta formulas", Comput. Math. Appl. 20(3), 15-24, 1990.
    """

    tableau = dfx.Dopri8.tableau
    interpolation_cls = dfx.Dopri8.interpolation_cls
    _order = 8


class UnrolledVerner9(AbstractUnrolledERK):
    """Verner's "most efficient" 9(8) pair, 16 stages and a first-same-as-last 17th, with his
    8th-order interpolant (4 more stages per step, computed here in every step: on jaxsim's
    adaptive core only in steps that hold a sample), stages unrolled (see
    [`AbstractUnrolledERK`][]).

    Reference: J. H. Verner, "Numerically optimal Runge-Kutta pairs with interpolants",
    Numerical Algorithms 53, 383-396, 2010 (`jaxsim._solvers._verner`).
    """

    tableau = _verner.tableau()
    interpolation_cls = _verner.Verner9Interpolation
    _order = 9
    _dense_rows = _verner.dense_rows()


class Tsit5(AbstractAdaptiveSolver):
    """Tsitouras 5(4) (`diffrax.Tsit5`'s scheme; stages unrolled with `unrolled=True`)."""

    unrolled: bool = eqx.field(static=True, default=False)
    _unrolled_cls = UnrolledTsit5
    _diffrax_cls = dfx.Tsit5


class Dopri5(AbstractAdaptiveSolver):
    """Dormand-Prince 5(4) (`diffrax.Dopri5`'s scheme; stages unrolled with `unrolled=True`)."""

    unrolled: bool = eqx.field(static=True, default=False)
    _unrolled_cls = UnrolledDopri5
    _diffrax_cls = dfx.Dopri5


class Dopri8(AbstractAdaptiveSolver):
    """Prince-Dormand 8(7) (`diffrax.Dopri8`'s scheme). `unrolled=None` (default): on jaxsim's
    adaptive core the stages are written out for a small drift and looped for a large one
    (`UNROLL_MAX_EQUATIONS`, counted at trace time); on diffrax's loop (clocks, events) written
    out. `True`/`False` force one form."""

    unrolled: bool | None = eqx.field(static=True, default=None)
    _unrolled_cls = UnrolledDopri8
    _diffrax_cls = dfx.Dopri8


class Verner9(AbstractAdaptiveSolver):
    """Verner's "most efficient" 9(8) pair with his 8th-order interpolant (stages unrolled unless
    `unrolled=False`): 16 drift evaluations per step (first same as last), 4 more in a step that
    holds a sample. At tight tolerances it takes fewer steps than `Dopri8` for a smaller error:
    J2 LEO for a day at rtol 1e-12, 606 steps (53 rejected) and a 6x smaller final error than
    `Dopri8`'s 760 (101 rejected), in less time (`docs/engine.md`).

    `to_diffrax()` always gives the unrolled pair (`UnrolledVerner9`): diffrax's own stage loop
    would not compute the interpolant's stages. `unrolled=None` (default): as `Dopri8`'s.
    """

    unrolled: bool | None = eqx.field(static=True, default=None)
    _unrolled_cls = UnrolledVerner9
    _diffrax_cls = UnrolledVerner9


def for_adjoint(dsolver, adjoint):
    """The diffrax solver prepared for `adjoint`: under `diffrax.ForwardMode` a Runge-Kutta stage
    loop must be a `lax` scan (forward-mode differentiable); diffrax switches it itself for a bare
    solver, this does it before the solver is wrapped in a `StepMappedSolver`."""
    if isinstance(adjoint, dfx.ForwardMode) and getattr(dsolver, "scan_kind", "") is None:
        return eqx.tree_at(lambda s: s.scan_kind, dsolver, "lax", is_leaf=lambda x: x is None)
    return dsolver


class AbstractDelegatingSolver(dfx.AbstractWrappedSolver):
    """A diffrax solver wrapper that answers every question about the method (order, terms,
    interpolation, scan kind) with its inner `solver`'s answer; subclasses change `init`/`step`
    (`StepMappedSolver` here, the event guard of `jaxsim._events._guard`)."""

    @property
    def scan_kind(self):
        # Read by diffrax's `ForwardMode` on Runge-Kutta solvers (the wrapper passes their
        # isinstance checks); see `for_adjoint`, which sets it on the inner solver.
        return getattr(self.solver, "scan_kind", "lax")

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

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


class StepMappedSolver(AbstractDelegatingSolver):
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

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args), self.counts_like, self.counts_like

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        # State: (inner state, counts of the accepted steps, counts of the last step); a driver
        # that interpolates back into the last step (an event) replaces that step's counts.
        inner_state, counts, _ = solver_state
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
        step_counts = jtu.tree_map(lambda c, s: s.astype(c.dtype), counts, step_counts)
        counts = jtu.tree_map(lambda c, s: c + s, counts, step_counts)
        return y1_mapped, y_error, dense_info, (inner_state, counts, step_counts), result
