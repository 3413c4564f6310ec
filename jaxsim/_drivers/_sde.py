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
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np

from .._compilation._jit import jit as jaxsim_jit
from .._cores._diffrax import DiffraxSegments, pid_controller
from .._cores._fixed_grid import scan_grid
from .._result._solution import check_finite, finish, make_stats, solve_outcome
from .._solvers._sde import AbstractSDESolver, ShARK


# Longest sample interval [steps] whose key-mode increments are drawn in one block.
_MAX_BLOCK = 512


def simulate_sde(req, *, throw, progress=None):
    """Run an SDE request (checked by `jaxsim._request._build.build_request`) on the fixed-step or
    diffrax driver (see module docstring). `throw`: in-program checks (False when `simulate`
    checks the result on the host)."""
    model, solver, t0, t1, ts = req.model, req.solver, req.t0, req.t1, req.ts
    m = req.noise_dim
    brownian = req.brownian
    if isinstance(solver, dfx.AbstractSolver) or req.kind.adaptive:
        is_jaxsim_sde = isinstance(solver, AbstractSDESolver | ShARK)
        dsolver = solver.to_diffrax() if is_jaxsim_sde else solver
        levy = isinstance(dsolver, dfx.AbstractSRK | dfx.SRA1 | dfx.ShARK)
        dt0 = req.dt
        if isinstance(brownian, dfx.AbstractBrownianPath):
            path = brownian
        else:
            tol = (t1 - t0) / 2**20 if dt0 is None else min(0.5 * dt0, (t1 - t0) / 2**16)
            area = dfx.SpaceTimeLevyArea if levy else dfx.BrownianIncrement
            path = dfx.VirtualBrownianTree(t0, t1, tol, (m,), req.key, levy_area=area)
        controller = (
            pid_controller(
                # Arrays: arguments of the program, so a sweep over them compiles once.
                req.controller.rtol,
                req.controller.atol,
                req.controller.gains,
                jump_ts=None if not model.breakpoints() else jnp.asarray(model.breakpoints()),
                # Steps end on the sample times: interpolating a rough path between steps is wrong.
                step_ts=jnp.asarray(ts),
            )
            if req.kind.adaptive
            else dfx.ConstantStepSize()
        )
        return _run_sde_diffrax(
            model,
            req.y0,
            req.args,
            dsolver,
            path,
            controller,
            t0,
            t1,
            jnp.asarray(ts),
            dt0,
            req.max_steps,
            req.outputs,
            bool(throw),
            req.adjoint,
            progress,
        )

    dt = req.dt
    if req.dW is not None:
        noise = _PrescribedNoise(req.dW, req.dZ)
    elif isinstance(brownian, dfx.AbstractBrownianPath) or brownian == "tree":
        if isinstance(brownian, dfx.AbstractBrownianPath):
            path = brownian
        else:
            area = dfx.SpaceTimeLevyArea if solver.uses_dZ else dfx.BrownianIncrement
            tol = min(0.5 * dt, (t1 - t0) / 2**16)
            path = dfx.VirtualBrownianTree(t0, t1, tol, (m,), req.key, levy_area=area)
        noise = _TreeNoise(path, solver.uses_dZ)
    else:
        noise = _KeyNoise(req.key, m, solver.uses_dZ)
    config = _SDEConfig(
        t0=t0,
        dt=dt,
        seg=req.seg,
        outputs=req.outputs,
        checkpoint=req.checkpoint,
        throw=bool(throw),
    )
    return _run_sde_fixed(model, req.y0, req.args, solver, noise, jnp.asarray(ts), config, progress)


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
    return finish(
        model, args, ts, ys, stats, result, t_final, outputs=config.outputs, counts=counts
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
    return finish(model, args, ts, ys, stats, result, t_final, outputs=outputs)


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
