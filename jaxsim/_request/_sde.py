"""SDE requests: the diffusion's shape and state dependence, the commutativity check of Milstein schemes, prescribed increments."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.extend as jex
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._route import _DIFFRAX_SDE_ONLY, SolverKind
from .._solvers._sde import AbstractSDESolver, ShARK, milstein_jvps
from ._commands import _dtype_of, _kind
from ._grid import check_budget, check_step, grid_segments


# --------------------------------------------------------------------------------------------------
# SDE requests


# diffrax solvers that are valid for SDEs (given MultiTerm(drift, diffusion)): the SDE-only
# schemes the router knows, and those that also solve ODEs.
_DIFFRAX_SDE = (dfx.Euler, dfx.Heun, dfx.ReversibleHeun, *_DIFFRAX_SDE_ONLY)
# Relative tolerance of the commutativity check L^j g_k == L^k g_j at y0 (Milstein): round-off only.
_COMMUTE_RTOL = 1e-9


def diffusion_depends_on_state(model, t, y, args) -> bool:
    """True when the jaxpr of `model.diffusion(t, ., args)` has an output that depends on `y`.

    A static data-flow analysis (no evaluation): exact through nested `jit` calls, conservative
    elsewhere (any primitive with a state-dependent input counts as state-dependent).
    """
    closed = jax.make_jaxpr(lambda yy: model.diffusion(t, yy, args))(y)
    return any(_jaxpr_deps(closed.jaxpr, [True] * len(closed.jaxpr.invars)))


def _jaxpr_deps(jaxpr, in_deps):
    dep = dict(zip(jaxpr.invars, in_deps))

    def isdep(a):
        return not isinstance(a, jex.core.Literal) and dep.get(a, False)

    for eqn in jaxpr.eqns:
        ins = [isdep(a) for a in eqn.invars]
        outs = None
        if any(ins):
            for p in eqn.params.values():
                sub = p.jaxpr if isinstance(p, jex.core.ClosedJaxpr) else p
                if (
                    isinstance(sub, jex.core.Jaxpr)
                    and len(sub.invars) == len(ins)
                    and len(sub.outvars) == len(eqn.outvars)
                ):
                    outs = _jaxpr_deps(sub, ins)
                    break
            if outs is None:
                outs = [True] * len(eqn.outvars)
        else:
            outs = [False] * len(eqn.outvars)
        for v, d in zip(eqn.outvars, outs):
            dep[v] = d
    return [isdep(v) for v in jaxpr.outvars]


def _concrete_tree(tree) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jtu.tree_leaves(tree))


def _check_commutative(model, t, y, args, sname):
    """Milstein's product formula needs L^j g_k = L^k g_j; check it at y0 when everything is concrete."""

    if not (_concrete_tree(eqx.filter(model, eqx.is_array)) and _concrete_tree(y)):
        return
    _, Lg = milstein_jvps(model.diffusion, t, y, args)
    for L in jtu.tree_leaves(Lg):
        L = np.asarray(L)
        LT = np.swapaxes(L, 0, -1)
        scale = max(float(np.max(np.abs(L))), 1e-300)
        if np.max(np.abs(L - LT)) > _COMMUTE_RTOL * scale:
            raise ValueError(
                f"simulate: `solver` {sname} needs commutative noise (L^j g_k = L^k g_j), but the "
                f"diffusion of {type(model).__name__} is not commutative at y0 (max mismatch "
                f"{np.max(np.abs(L - LT)):.3g}); use EulerMaruyama or Heun."
            )


def _check_diffusion_shape(model, t0, y0, args, m: int) -> None:
    """`diffusion(t, y, args)` has the structure of the state, each leaf `leaf.shape + (m,)`."""
    got = jax.eval_shape(lambda: model.diffusion(jnp.asarray(t0, dtype=float), y0, args))
    want = jtu.tree_map(lambda x: jax.ShapeDtypeStruct(tuple(jnp.shape(x)) + (m,), float), y0)
    same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
        tuple(a.shape) == tuple(b.shape)
        for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
    )
    if not same:
        raise ValueError(
            f"simulate: `{type(model).__name__}.diffusion(t, y, args)` must return the structure "
            f"of the state with each leaf of shape leaf.shape + (noise_dim,) = "
            f"{jtu.tree_map(lambda s: tuple(s.shape), want)}; got "
            f"{jtu.tree_map(lambda s: tuple(s.shape), got)}."
        )


def _increments(name, arr, n_steps, m):
    """Prescribed Wiener increments: shape `(n_steps, m)`, real numbers (cast to float64)."""
    if arr is None:
        return None
    dtype = _dtype_of(arr)
    if _kind(dtype) not in "iuf":
        raise TypeError(
            f"simulate: `{name}` [sqrt(s)] must hold real numbers (Wiener increments, cast to "
            f"float64); got dtype {dtype}."
        )
    shape = tuple(jnp.shape(arr))
    if shape != (n_steps, m):
        raise ValueError(
            f"simulate: `{name}` must have shape (n_steps, noise_dim) = ({n_steps}, {m}) "
            f"[sqrt(s)]; got shape {shape}."
        )
    return jnp.asarray(arr, dtype=float)


def _check_sde(r: dict, kind: SolverKind) -> dict:
    """The checks of an SDE request; returns the fields it sets (`dt`, `seg`, `dW`, `dZ`)."""

    model, solver, t0, t1 = r["model"], r["solver"], r["t0"], r["t1"]
    y0, args, key, dW, dZ, brownian = r["y0"], r["args"], r["key"], r["dW"], r["dZ"], r["brownian"]
    rtol, atol, dt = r["rtol"], r["atol"], r["dt"]
    sname = type(solver).__name__
    m = int(model.noise_dim)
    if m == 0:
        raise ValueError(
            f"simulate: SDE request (solver {sname}, key or dW given) but `model` "
            f"{type(model).__name__} has no diffusion (noise_dim == 0); use an ODE solver and no key."
        )
    is_jaxsim_sde = isinstance(solver, AbstractSDESolver | ShARK)
    is_diffrax = isinstance(solver, dfx.AbstractSolver)
    if not is_jaxsim_sde and not (is_diffrax and isinstance(solver, _DIFFRAX_SDE)):
        raise ValueError(
            f"simulate: `solver` {sname} is an ODE solver but `model` {type(model).__name__} is an "
            f"SDE (noise_dim = {m}) and a key/dW was given; use EulerMaruyama, Heun, Milstein, SRA1 "
            f"(fixed step) or ShARK (adaptive, additive noise), or drop the key to integrate the drift only."
        )
    if key is not None and dW is not None:
        raise ValueError("simulate: give either `key` or prescribed increments `dW`, not both.")
    if key is None and dW is None:
        raise ValueError(
            f"simulate: SDE solver {sname} needs a random `key` (jax.random.key(seed)) or "
            "prescribed Wiener increments `dW`; got neither."
        )
    if dZ is not None and dW is None:
        raise ValueError("simulate: `dZ` is used only together with prescribed `dW`.")
    if not (brownian in ("increments", "tree") or isinstance(brownian, dfx.AbstractBrownianPath)):
        raise ValueError(
            "simulate: `brownian` must be 'increments', 'tree' or a diffrax.AbstractBrownianPath; "
            f"got {brownian!r}."
        )
    _check_diffusion_shape(model, t0, y0, args, m)
    noise_kind = getattr(solver, "noise", "general")
    if is_diffrax and isinstance(solver, dfx.SRA1 | dfx.ShARK | dfx.SEA | dfx.SPaRK):
        noise_kind = "additive"
    if noise_kind == "additive" and diffusion_depends_on_state(model, t0, y0, args):
        raise ValueError(
            f"simulate: `solver` {sname} requires additive noise (diffusion independent of the "
            f"state), but {type(model).__name__}.diffusion depends on `y`; use EulerMaruyama, "
            "Milstein (commutative noise) or Heun (Stratonovich)."
        )
    if noise_kind == "commutative" and m > 1:
        _check_commutative(model, t0, y0, args, sname)
    out = {"noise_dim": m}
    if is_diffrax or kind.adaptive:
        if dW is not None:
            raise ValueError(
                f"simulate: prescribed `dW` works with jaxsim's fixed-step SDE solvers only; got {sname}."
            )
        if kind.adaptive:
            if rtol is None or atol is None:
                raise ValueError(
                    f"simulate: adaptive SDE solver {sname} needs `rtol` and `atol`; "
                    f"got rtol={rtol}, atol={atol}."
                )
        else:
            out["dt"] = check_step(sname, dt, "fixed-step SDE solver")
            check_budget(t0, t1, out["dt"], "`dt`", r["max_steps"], 1)
        return out
    if rtol is not None or atol is not None:
        raise ValueError(
            f"simulate: `rtol`/`atol` apply to adaptive solvers only; {sname} is fixed-step "
            f"(got rtol={rtol}, atol={atol})."
        )
    dt = out["dt"] = check_step(sname, dt, "fixed-step SDE solver")
    out["seg"] = seg = grid_segments(r["ts"], t0, t1, dt)
    if dW is not None:
        n_steps = int(sum(seg))
        out["dW"] = _increments("dW", dW, n_steps, m)
        if solver.uses_dZ:
            if dZ is None:
                raise ValueError(
                    f"simulate: {sname} needs the second Gaussian `dZ` (shape ({n_steps}, {m})) "
                    "together with prescribed `dW`."
                )
            out["dZ"] = _increments("dZ", dZ, n_steps, m)
        else:
            out["dZ"] = None
    return out
