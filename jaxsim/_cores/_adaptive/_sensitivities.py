"""Forward sensitivities: the tangents integrated with the state, their error in the step control (`ForwardSensitivity`, `integrate_sensitive`), and the checks of a run's adjoint."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._model._layout import StateLayout
from ._loop import integrate
from ._record import DiscreteAdjoint


class ForwardSensitivity(eqx.Module):
    r"""`simulate(..., adjoint=ForwardSensitivity())`: derivatives by forward sensitivities
    integrated with the state under the same step-size control (jaxsim's adaptive pairs
    `Tsit5`, `Dopri5`, `Dopri8` on a state of one floating dtype, without clocks or events).

    Under `jax.jvp`, `jax.jacfwd`, `jax.grad` or `jax.jacrev` of a run, the state $y$ is
    integrated together with its sensitivities $S_j = \partial y / \partial q_j$ to every
    differentiated input $q_j$ (each element of `y0`, of the model's and `args`' arrays that
    carry a tangent, and `t0`), $\dot S_j = \partial_y f\, S_j + \partial_{q_j} f$ (the
    variational equations, as in Hindmarsh et al., "SUNDIALS", ACM TOMS 31(3) 2005, CVODES'
    simultaneous corrector, and heyoka's `var_ode_sys`). The local error estimate of each
    sensitivity enters the step control: the error norm is the largest of the state's and each
    sensitivity's weighted RMS norms, all with the run's `rtol` and `atol` (CVODES's
    `errconS = True`). The derivative is then that of the solution to the tolerance, not that of
    one discretisation: it does not inherit the truncation error of a step sequence tuned to the
    state alone. The derivative w.r.t. a sample time is the drift there.

    Cost: one run with `1 + m` blocks of the state (m the number of differentiated input
    elements), whatever the transformation: `jacfwd` and `grad` cost the same, and a `jvp` with
    one tangent costs all m sensitivities. The differentiated run's steps differ from the plain
    run's (the sensitivities' errors are controlled too); a run that is not differentiated is the
    plain run. The step sizes are not differentiated (they depend on the tolerance only).
    """


def loop_kind(adjoint) -> str | None:
    """The step loop for diffrax's `adjoint` choice: `"adjoint"` (None or `DiscreteAdjoint`:
    reverse mode by the discrete adjoint of the accepted steps), `"checkpointed"` (diffrax's
    `RecursiveCheckpointAdjoint` given explicitly: reverse mode by recursive checkpointing of
    every attempted step), `"lax"` (`ForwardMode`), `"sensitivity"` (`ForwardSensitivity`), or
    None (another adjoint, e.g. `BacksolveAdjoint`: that run stays on diffrax)."""
    if adjoint is None or isinstance(adjoint, DiscreteAdjoint):
        return "adjoint"
    if type(adjoint) is dfx.RecursiveCheckpointAdjoint:
        return "checkpointed"
    if isinstance(adjoint, dfx.ForwardMode):
        return "lax"
    if isinstance(adjoint, ForwardSensitivity):
        return "sensitivity"
    return None


def check_adjoint(adjoint, kind, y0) -> None:
    """Refuse `ForwardSensitivity` and `DiscreteAdjoint` on a request this core does not run
    (`kind`: the request's `jaxsim._route.SolverKind`)."""

    if isinstance(adjoint, DiscreteAdjoint):
        does = "is the discrete adjoint of"
        instead = "Leave `adjoint` at None (the driver's own reverse mode)"
    elif isinstance(adjoint, ForwardSensitivity):
        does = "integrates sensitivities on"
        instead = (
            "Use `adjoint=diffrax.ForwardMode()` (forward mode) or the default adjoint (reverse "
            "mode)"
        )
    else:
        return
    if kind.driver != "adaptive" or not kind.native:
        what = f"{kind.name} on the {kind.driver} driver"
    elif StateLayout.of(y0) is None:
        what = "a state whose leaves mix dtypes"
    else:
        return
    raise ValueError(
        f"simulate: `adjoint={type(adjoint).__name__}()` {does} jaxsim's adaptive pairs (Tsit5, "
        "Dopri5, Dopri8) without clocks, events, discontinuities or noise, on a state of one "
        f"floating dtype; got {what}. {instead} for this run."
    )


def _is_zero(tangent) -> bool:
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero) or (
        jnp.result_type(tangent) == jax.dtypes.float0
    )


def integrate_sensitive(f, step_map, theta, y0, t0, t1, ts, rtol, atol, **kw):
    """`integrate` of `y' = f(theta, t, y)`, differentiable by forward sensitivities
    (`ForwardSensitivity`) w.r.t. `theta` (a pytree of arrays), `y0`, `t0` and `ts`.

    `step_map(theta, t, y) -> (y, counts)`; `kw`: `integrate`'s other keywords (static). Not
    differentiated, it is `integrate` with the plain step loop."""

    def plain(theta, y0, t0, t1, ts, rtol, atol):
        out = integrate(
            lambda t, y: f(theta, t, y), y0, t0, t1, ts, rtol=rtol, atol=atol,
            step_map=lambda t, y: step_map(theta, t, y), loop="lax", **kw,
        )  # fmt: skip
        return out

    solve = jax.custom_jvp(plain)

    def jvp(primals, tangents):
        theta, y0, t0, t1, ts, rtol, atol = primals
        d_theta, d_y0, d_t0, _, d_ts, _, _ = tangents
        n = y0.shape[0]
        leaves, treedef = jtu.tree_flatten(theta)
        d_leaves = treedef.flatten_up_to(d_theta)
        active = [
            i for i, (x, d) in enumerate(zip(leaves, d_leaves, strict=True))
            if not _is_zero(d) and jnp.issubdtype(jnp.result_type(x), jnp.inexact)
        ]  # fmt: skip
        dtype = y0.dtype
        p = (jnp.concatenate([jnp.ravel(leaves[i]).astype(dtype) for i in active])
             if active else jnp.zeros((0,), dtype))  # fmt: skip
        sizes = [leaves[i].size for i in active]

        def with_p(q):
            new, off = list(leaves), 0
            for i, k in zip(active, sizes, strict=True):
                new[i] = jnp.reshape(q[off : off + k], leaves[i].shape).astype(leaves[i].dtype)
                off += k
            return jtu.tree_unflatten(treedef, new)

        # Columns of the sensitivity: y0's elements, the parameters', then t0.
        n_p = p.shape[0]
        cols_y0 = 0 if _is_zero(d_y0) else n
        has_t0 = not _is_zero(d_t0)
        m = cols_y0 + n_p + int(has_t0)
        if m == 0:
            out = plain(*primals)
        else:
            dp = jnp.zeros((m, n_p), dtype).at[cols_y0 : cols_y0 + n_p].set(jnp.eye(n_p))
            s0 = jnp.zeros((m, n), dtype)
            if cols_y0:
                s0 = s0.at[:n].set(jnp.eye(n, dtype=dtype))
            if has_t0:
                s0 = s0.at[-1].set(-f(theta, t0, y0))

            def f_aug(t, v):
                y, s = v[:n], jnp.reshape(v[n:], (m, n))
                fy, lin = jax.linearize(lambda q, x: f(with_p(q), t, x), p, y)
                return jnp.concatenate([fy, jnp.ravel(jax.vmap(lin)(dp, s))])

            def map_aug(t, v):
                y, s = v[:n], jnp.reshape(v[n:], (m, n))
                ym, lin, counts = jax.linearize(
                    lambda q, x: step_map(with_p(q), t, x), p, y, has_aux=True
                )
                return jnp.concatenate([ym, jnp.ravel(jax.vmap(lin)(dp, s))]), counts

            out = integrate(
                f_aug, jnp.concatenate([y0, jnp.ravel(s0)]), t0, t1, ts, rtol=rtol, atol=atol,
                step_map=map_aug, loop="lax", blocks=1 + m, **kw,
            )  # fmt: skip
            ys_all = out["ys"]
            out = dict(out, ys=ys_all[:, :n])
        ys = out["ys"]
        # The tangent: the sensitivities times the inputs' tangents, plus the drift at moved
        # sample times.
        d_ys = jnp.zeros_like(ys)
        if m:
            w = []
            if cols_y0:
                w.append(d_y0.astype(dtype))
            w += [jnp.ravel(d_leaves[i]).astype(dtype) for i in active]
            if has_t0:
                w.append(jnp.reshape(d_t0, (1,)).astype(dtype))
            sens = jnp.reshape(ys_all[:, n:], (ys.shape[0], m, n))
            d_ys = jnp.einsum("kmn,m->kn", sens, jnp.concatenate(w))
        if not _is_zero(d_ts):
            f_ts = jax.vmap(lambda t, y: f(theta, t, y))(ts, ys)
            d_ys = d_ys + f_ts * d_ts.astype(dtype)[:, None]
        d_out = jtu.tree_map(
            lambda x: np.zeros(jnp.shape(x), jax.dtypes.float0)
            if not jnp.issubdtype(jnp.result_type(x), jnp.inexact) else jnp.zeros_like(x),
            out,
        )  # fmt: skip
        d_out["ys"] = d_ys
        return out, d_out

    solve.defjvp(jvp, symbolic_zeros=True)
    return solve(theta, y0, t0, t1, ts, rtol, atol)
