r"""The SDE driver behind `simulate(..., key=...)`: $d\mathbf y = \mathbf f\,dt + G\,d\mathbf W$.

`simulate` dispatches here when an SDE solver, a `key` or prescribed increments `dW` are given. The
model supplies `drift(t, y, args)` and `diffusion(t, y, args)` (leaves `leaf.shape + (m,)`,
`m = model.noise_dim`): the semantics of `MultiTerm(ODETerm(drift), ControlTerm(diffusion, W))`.

Brownian motion, by mode:

- **`key`, `brownian="increments"`** (default, fixed step): per-step Gaussians drawn inside the
  `lax.scan` from `jax.random.fold_in(key, n)` with `n` the global integer step index, one
  `(2, m)` draw per step: row 0 is $\Delta W$, row 1 $\Delta Z$. The same key gives bit-identical paths; the
  path does not depend on the sample times (`ts`/`sample_dt`), nor on the solver (EM and SRA1 with
  one key see the same $\Delta W$). It does depend on `dt` (a different grid is a different draw).
  The draws of one sample interval (up to 512 steps) are made in one vectorised block before its
  steps run: the same numbers, about 3x cheaper under `vmap` on CPU.
- **`key`, `brownian="tree"`** (or a `diffrax.VirtualBrownianTree` instance): increments evaluated
  from a virtual Brownian tree (default tolerance `min(dt/2, (t1-t0)/2**16)`); the only mode for
  adaptive solvers (`ShARK`). A user-supplied tree with a fixed `tol` gives the *same* Brownian path
  for every `dt` (convergence studies). About 15-40x the cost of per-step increments.
- **`dW=` (and `dZ=`)**: prescribed increments, arrays `(n_steps, m)` with `n_steps = (t1-t0)/dt`,
  replayed step by step (Basilisk's `PrescribedGaussianNoiseGenerator`) for deterministic
  reproduction; `dZ` is the second Gaussian of `SRA1` ($I_{(1,0)}/h = (\Delta W + \Delta Z/\sqrt3)/2$).

Ensembles: `jax.vmap(lambda k: simulate(model, y0, t1, dt=..., solver=..., key=k).ys)(keys)`.
Gradients: pathwise (common random numbers), e.g. `jax.grad` with respect to a parameter of the model
at a fixed key.
"""

import dataclasses
import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.extend as jex
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np

from ._compile import jit as jaxsim_jit
from ._route import _DIFFRAX_SDE_ONLY
from ._sde_solvers import AbstractSDESolver, ShARK, milstein_jvps


# Same grid tolerance as the ODE driver (see `_simulate._GRID_RTOL`).
_GRID_RTOL = 1e-9
# Relative tolerance of the commutativity check L^j g_k == L^k g_j at y0 (Milstein): round-off only.
_COMMUTE_RTOL = 1e-9
# Longest sample interval [steps] whose key-mode increments are drawn in one block.
_MAX_BLOCK = 512
# diffrax solvers that are valid for SDEs (given MultiTerm(drift, diffusion)): the SDE-only
# schemes the router knows, and those that also solve ODEs.
_DIFFRAX_SDE = (dfx.Euler, dfx.Heun, dfx.ReversibleHeun, *_DIFFRAX_SDE_ONLY)


def simulate_sde(
    model,
    y0,
    t0,
    t1,
    ts,
    *,
    dt,
    solver,
    args,
    rtol,
    atol,
    max_steps,
    outputs,
    checkpoint,
    throw,
    key,
    dW,
    dZ,
    brownian,
    adjoint=None,
    adaptive=False,
    progress=None,
):
    """Validate the SDE request and run the fixed-step or diffrax driver (see module docstring)."""
    from ._simulate import _concrete

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

    # `adaptive`: the solver's kind, decided by the router (`jaxsim._route`).
    if is_diffrax or adaptive:
        if dW is not None:
            raise ValueError(
                f"simulate: prescribed `dW` works with jaxsim's fixed-step SDE solvers only; got {sname}."
            )
        if adaptive and (rtol is None or atol is None):
            raise ValueError(
                f"simulate: adaptive SDE solver {sname} needs `rtol` and `atol`; "
                f"got rtol={rtol}, atol={atol}."
            )
        if not adaptive and dt is None:
            raise ValueError(f"simulate: fixed-step SDE solver {sname} needs `dt` [s]; got None.")
        dsolver = solver.to_diffrax() if is_jaxsim_sde else solver
        levy = isinstance(dsolver, dfx.AbstractSRK | dfx.SRA1 | dfx.ShARK)
        dt0 = None if dt is None else float(_concrete("dt", dt))
        if isinstance(brownian, dfx.AbstractBrownianPath):
            path = brownian
        else:
            tol = (t1 - t0) / 2**20 if dt0 is None else min(0.5 * dt0, (t1 - t0) / 2**16)
            area = dfx.SpaceTimeLevyArea if levy else dfx.BrownianIncrement
            path = dfx.VirtualBrownianTree(t0, t1, tol, (m,), key, levy_area=area)
        controller = (
            dfx.PIDController(
                # Arrays: arguments of the program, so a sweep over them compiles once.
                rtol=np.asarray(float(rtol)),
                atol=np.asarray(float(atol)),
                jump_ts=None if not model.breakpoints() else jnp.asarray(model.breakpoints()),
                # Steps end on the sample times: interpolating a rough path between steps is wrong.
                step_ts=jnp.asarray(ts),
            )
            if adaptive
            else dfx.ConstantStepSize()
        )
        sol = _run_sde_diffrax(
            model,
            y0,
            args,
            dsolver,
            path,
            controller,
            t0,
            t1,
            jnp.asarray(ts),
            dt0,
            int(max_steps),
            bool(outputs),
            bool(throw),
            adjoint,
            progress,
        )
        return sol

    if rtol is not None or atol is not None:
        raise ValueError(
            f"simulate: `rtol`/`atol` apply to adaptive solvers only; {sname} is fixed-step "
            f"(got rtol={rtol}, atol={atol})."
        )
    if dt is None:
        raise ValueError(f"simulate: fixed-step SDE solver {sname} needs `dt` [s]; got None.")
    dt = float(_concrete("dt", dt))
    if not dt > 0:
        raise ValueError(f"simulate: `dt` [s] must be > 0; got {dt}.")
    seg = _segments(ts, t0, t1, dt)
    n_steps = int(seg.sum())
    if dW is not None:
        noise = _PrescribedNoise(
            _check_increments("dW", dW, n_steps, m),
            _check_increments("dZ", dZ, n_steps, m) if solver.uses_dZ else None,
        )
        if solver.uses_dZ and dZ is None:
            raise ValueError(
                f"simulate: {sname} needs the second Gaussian `dZ` (shape ({n_steps}, {m})) "
                "together with prescribed `dW`."
            )
    elif isinstance(brownian, dfx.AbstractBrownianPath) or brownian == "tree":
        if isinstance(brownian, dfx.AbstractBrownianPath):
            path = brownian
        else:
            area = dfx.SpaceTimeLevyArea if solver.uses_dZ else dfx.BrownianIncrement
            tol = min(0.5 * dt, (t1 - t0) / 2**16)
            path = dfx.VirtualBrownianTree(t0, t1, tol, (m,), key, levy_area=area)
        noise = _TreeNoise(path, solver.uses_dZ)
    else:
        noise = _KeyNoise(key, m, solver.uses_dZ)
    config = _SDEConfig(
        t0=t0,
        dt=dt,
        seg=tuple(int(s) for s in seg),
        outputs=bool(outputs),
        checkpoint=bool(checkpoint),
        throw=bool(throw),
    )
    return _run_sde_fixed(model, y0, args, solver, noise, jnp.asarray(ts), config, progress)


# --------------------------------------------------------------------------------------------------
# Checks


def _segments(ts, t0, t1, dt):
    idx = (ts - t0) / dt
    off = np.abs(idx - np.round(idx)) > _GRID_RTOL * np.maximum(1.0, idx)
    if np.any(off):
        raise ValueError(
            f"simulate: with fixed step `dt`={dt} s every sample time must be t0 + k*dt; got "
            f"off-grid time(s) {ts[off][:5]} (the horizon t1 - t0 = {t1 - t0} s must also be a "
            "multiple of dt)."
        )
    idx = np.round(idx).astype(np.int64)
    return np.diff(np.concatenate([[0], idx]))


def _check_increments(name, arr, n_steps, m):
    if arr is None:
        return None
    shape = tuple(jnp.shape(arr))
    if shape != (n_steps, m):
        raise ValueError(
            f"simulate: `{name}` must have shape (n_steps, noise_dim) = ({n_steps}, {m}) "
            f"[sqrt(s)]; got shape {shape}."
        )
    return jnp.asarray(arr, dtype=float)


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


# --------------------------------------------------------------------------------------------------
# Noise sources of the fixed-step driver: `increments(n, t, h) -> (dW, dZ)` for global step n.


class _KeyNoise(eqx.Module):
    key: jax.Array
    m: int = eqx.field(static=True)
    need_dZ: bool = eqx.field(static=True)

    def increments(self, n, t, h):
        # One draw of (2, m) per step for every solver (one threefry call; a second key split and
        # draw cost 5x more under vmap on CPU): row 0 is dW, row 1 dZ, so EM and SRA1 runs with
        # one key share their dW.
        xi = math.sqrt(h) * jr.normal(jr.fold_in(self.key, n), (2, self.m))
        return xi[0], (xi[1] if self.need_dZ else None)

    def block(self, n0, length, h):
        """Increments of steps `n0 .. n0 + length - 1`, each `(length, m)`: the same numbers as
        `increments` step by step."""
        idx = n0 + jnp.arange(length, dtype=jnp.asarray(n0).dtype)
        xi = math.sqrt(h) * jax.vmap(lambda n: jr.normal(jr.fold_in(self.key, n), (2, self.m)))(idx)
        return xi[:, 0], (xi[:, 1] if self.need_dZ else None)


class _TreeNoise(eqx.Module):
    path: dfx.AbstractBrownianPath
    need_dZ: bool = eqx.field(static=True)

    def increments(self, n, t, h):
        if self.need_dZ:
            inc = self.path.evaluate(t, t + h, use_levy=True)
            # I_(1,0)/h = dW/2 + H = (dW + dZ/sqrt(3))/2  =>  dZ = 2 sqrt(3) H.
            return inc.W, 2.0 * math.sqrt(3.0) * inc.H
        return self.path.evaluate(t, t + h), None


class _PrescribedNoise(eqx.Module):
    dW: jax.Array
    dZ: jax.Array | None

    def increments(self, n, t, h):
        dW = jax.lax.dynamic_index_in_dim(self.dW, n, keepdims=False)
        dZ = None if self.dZ is None else jax.lax.dynamic_index_in_dim(self.dZ, n, keepdims=False)
        return dW, dZ


# --------------------------------------------------------------------------------------------------
# Drivers


@dataclasses.dataclass(frozen=True)
class _SDEConfig:
    t0: float
    dt: float
    seg: tuple
    outputs: bool
    checkpoint: bool
    throw: bool


@jaxsim_jit
def _run_sde_fixed(model, y0, args, solver, noise, ts, config: _SDEConfig, progress=None):
    from ._simulate import Solution, _derived, check_finite, make_stats, scan_grid

    dt = config.dt
    length = int(np.max(config.seg)) if len(config.seg) else 0

    def advance(n, t, y, pre, inputs):
        dW, dZ = noise.increments(n, t, dt) if pre is None else pre
        return solver.step(model.drift, model.diffusion, t, y, dt, dW, dZ, args)

    # Key mode: draw a segment's increments at once (the same per-step keys, vectorised over the
    # steps instead of one small draw per sequential step: ~3x faster under vmap on CPU); bounded so
    # that a long segment under a large vmap does not hold too many increments in memory.
    blocked = isinstance(noise, _KeyNoise) and length <= _MAX_BLOCK
    per_segment = (lambda n0, length: noise.block(n0, length, dt)) if blocked else None
    ys, counts = scan_grid(
        model,
        y0,
        config.seg,
        dt,
        config.t0,
        config.checkpoint,
        advance,
        per_segment,
        progress=progress,
    )
    ys, result, t_final = check_finite(ts, ys, config.throw, "SDE")
    seg = np.asarray(config.seg)
    n_steps = int(seg.sum())
    stats = make_stats(
        n_steps,
        n_steps * solver.num_drift,
        jtu.tree_map(lambda c: c[-1], counts),
        num_diffusion=n_steps * solver.num_diffusion,
    )
    derived = _derived(model, ts, ys, args) if config.outputs else None
    return Solution(
        ts=ts, ys=ys, outputs=derived, counts=counts, stats=stats, result=result, t_final=t_final
    )


@jaxsim_jit
def _run_sde_diffrax(
    model,
    y0,
    args,
    dsolver,
    path,
    controller,
    t0,
    t1,
    ts,
    dt0,
    max_steps,
    outputs,
    throw,
    adjoint=None,
    progress=None,
):
    from ._simulate import (
        DiffraxSegments,
        Solution,
        _derived,
        make_stats,
        mark_after,
        solve_outcome,
    )

    core = DiffraxSegments(model, y0, dsolver, adjoint, diffusion=model.diffusion, path=path)
    sol = core.solve(
        t0,
        t1,
        dt0,
        y0,
        args,
        saveat=dfx.SaveAt(ts=ts, solver_state=True),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=throw,
        progress=progress,
    )
    ys = core.states(ts, sol.ys)
    n_drift, n_diffusion = _evaluations_per_step(dsolver)
    stats = make_stats(
        sol.stats["num_accepted_steps"],
        sol.stats["num_steps"] * n_drift,
        sol.solver_state[1],
        num_rejected_steps=sol.stats["num_rejected_steps"],
        num_diffusion=sol.stats["num_steps"] * n_diffusion,
    )
    result, t_final = solve_outcome(sol, ts)
    ys = mark_after(ts, ys, t_final)
    derived = _derived(model, ts, ys, args) if outputs else None
    return Solution(
        ts=ts, ys=ys, outputs=derived, counts=None, stats=stats, result=result, t_final=t_final
    )


def _evaluations_per_step(dsolver) -> tuple[int, int]:
    """`(drift, diffusion)` evaluations per step of a diffrax SDE solver (its tableau's stages)."""
    tab = getattr(dsolver, "tableau", None)
    if tab is None:  # Euler(-Maruyama): one of each; Heun-type solvers: two
        n = 2 if isinstance(dsolver, dfx.Heun | dfx.EulerHeun | dfx.ReversibleHeun) else 1
        return n, n
    # Stochastic Runge-Kutta tableaus (SRA1, ShARK, ...): stages whose f or g is not used are skipped.
    stages = len(tab.b_sol)
    skip_f = sum(bool(x) for x in (getattr(tab, "ignore_stage_f", None) or ()))
    skip_g = sum(bool(x) for x in (getattr(tab, "ignore_stage_g", None) or ()))
    return stages - skip_f, stages - skip_g
