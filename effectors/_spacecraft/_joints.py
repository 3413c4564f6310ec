r"""One-degree-of-freedom joints as rows of one block: how the spacecraft stacks its 1-DOF state effectors.

Every 1-DOF state effector of Basilisk's back-substitution method (reaction wheels, hinged panels,
spinning bodies, spring-mass-dampers; Allard, Schaub & Piggott, JSR 55(5), 2018) has, per unit
$j$, a joint acceleration that is affine in the hub accelerations,

$$\ddot q_j = \mathbf a_j^T\,{}^B\ddot{\mathbf r}_{B/N} + \mathbf b_j^T\dot{\boldsymbol\omega} + c_j,$$

and reacts on the hub through two columns: $\mathbf p_j$ in the translational equation and
$\mathbf q_j$ in the rotational one ($\sum_j \mathbf p_j \ddot q_j$ and $\sum_j \mathbf q_j\ddot q_j$
on their left-hand sides). Substituting $\ddot q_j$ gives the effector's back-substitution terms

$$[A] \mathrel{+}= \sum_j \mathbf p_j\mathbf a_j^T,\ [B] \mathrel{+}= \sum_j \mathbf p_j\mathbf b_j^T,\
[C] \mathrel{+}= \sum_j \mathbf q_j\mathbf a_j^T,\ [D] \mathrel{+}= \sum_j \mathbf q_j\mathbf b_j^T,\
\mathbf v_{trans} \mathrel{+}= \mathbf v^0_{trans} - \sum_j \mathbf p_j c_j,\
\mathbf v_{rot} \mathrel{+}= \mathbf v^0_{rot} - \sum_j \mathbf q_j c_j,$$

where $\mathbf v^0$ collects the effector's remaining (velocity, gravity, attached-load) terms.

An effector that returns `JointRows` from `contribute` (inside a `JointContribution`) gives the
spacecraft its rows instead of summed matrices: `Spacecraft` concatenates the rows of all its
1-DOF effectors, whatever their kinds and numbers, and assembles the $6\times6$ block and the
joint accelerations of all of them in one batched product each.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._types import BackSub


class JointRows(eqx.Module):
    r"""`n` joint rows of one effector (all $\mathcal B$ components).

    - `p`, `q`: shape `(n, 3)`, the columns of $\ddot q_j$ in the hub's translational [kg m or kg]
      and rotational [kg m^2 or kg m] equations;
    - `a`, `b`: shape `(n, 3)`, $\partial\ddot q_j/\partial\,{}^B\ddot{\mathbf r}_{B/N}$ and
      $\partial\ddot q_j/\partial\dot{\boldsymbol\omega}$;
    - `c`: shape `(n,)`, $\ddot q_j$ at zero hub accelerations;
    - `v_trans`, `v_rot`: shape `(3,)`, the effector's other right-hand-side terms, summed over
      its units ($\mathbf v^0_{trans}$ [N], $\mathbf v^0_{rot}$ [N m]).
    """

    p: Float[Array, "n 3"]
    q: Float[Array, "n 3"]
    a: Float[Array, "n 3"]
    b: Float[Array, "n 3"]
    c: Float[Array, " n"]
    v_trans: Float[Array, "3"]
    v_rot: Float[Array, "3"]

    @property
    def num_rows(self) -> int:
        return self.c.shape[0]

    def back_sub(self) -> BackSub:
        """These rows' back-substitution terms, summed (as one effector alone would give them)."""
        M, v = assemble(self.cols(), self.rows(), self.c)
        bs = blocks(M, v)
        return BackSub(bs.A, bs.B, bs.C, bs.D, self.v_trans + bs.v_trans, self.v_rot + bs.v_rot)

    def cols(self) -> Float[Array, "n 6"]:
        r"""$[\mathbf p_j^T\ \mathbf q_j^T]$ per row."""
        return jnp.concatenate([self.p, self.q], axis=-1)

    def rows(self) -> Float[Array, "n 6"]:
        r"""$[\mathbf a_j^T\ \mathbf b_j^T]$ per row."""
        return jnp.concatenate([self.a, self.b], axis=-1)

    def accelerations(self, rDDot_BN_B, omegaDot_BN_B) -> Float[Array, " n"]:
        r"""$\ddot q_j$ from the solved hub accelerations."""
        return accelerations(self.rows(), self.c, jnp.concatenate([rDDot_BN_B, omegaDot_BN_B]))


class JointContribution(NamedTuple):
    r"""A 1-DOF state effector's part of one derivative evaluation, as joint rows
    (`AbstractStateEffector.contribute` may return it instead of a `Contribution`).

    - `rows`: its `JointRows`;
    - `derivative`: `derivative(qDDot) -> state derivative`, called once with its joint
      accelerations $\ddot q_j$ (shape `(n,)`, in the order of its rows); a closure over what the
      rows computed.
    """

    rows: JointRows
    derivative: Callable[[Array], Any]


def assemble(cols, rows, c):
    r"""$\sum_j [\mathbf p_j;\mathbf q_j][\mathbf a_j^T\ \mathbf b_j^T]$ (6x6) and
    $-\sum_j [\mathbf p_j;\mathbf q_j] c_j$ (6,), each one multiply-and-reduce over the rows."""
    M = jnp.sum(cols[:, :, None] * rows[:, None, :], axis=0)
    v = -jnp.sum(cols * c[:, None], axis=0)
    return M, v


def blocks(M, v) -> BackSub:
    r"""The `BackSub` of a $6\times6$ block `M` and a 6-vector `v` (translational part first).

    The blocks come from `jnp.split`, whose transpose in reverse mode is one concatenation; an
    indexed block transposes into a zero-padded copy of `M`, a kernel of its own on the CPU."""
    (top, bottom), (v_trans, v_rot) = jnp.split(M, 2, axis=0), jnp.split(v, 2)
    (A, B), (C, D) = jnp.split(top, 2, axis=1), jnp.split(bottom, 2, axis=1)
    return BackSub(A=A, B=B, C=C, D=D, v_trans=v_trans, v_rot=v_rot)


def accelerations(rows, c, acc6):
    r"""$\ddot q_j = [\mathbf a_j^T\ \mathbf b_j^T]\,[{}^B\ddot{\mathbf r}_{B/N};\dot{\boldsymbol\omega}] + c_j$."""
    return jnp.sum(rows * acc6[None, :], axis=-1) + c


def stack(all_rows) -> tuple:
    """The rows of several effectors concatenated: `(cols (N, 6), rows (N, 6), c (N,), v0 (6,),
    offsets)`, with `offsets[k]:offsets[k+1]` the rows of effector `k`."""
    cols = jnp.concatenate([r.cols() for r in all_rows])
    rows = jnp.concatenate([r.rows() for r in all_rows])
    c = jnp.concatenate([r.c for r in all_rows])
    v0 = sum(jnp.concatenate([r.v_trans, r.v_rot]) for r in all_rows)
    offsets = [0]
    for r in all_rows:
        offsets.append(offsets[-1] + r.num_rows)
    return cols, rows, c, v0, offsets
