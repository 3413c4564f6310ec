r"""Dynamic effectors attached to a moving body of a state effector ("effector branching", seed 002).

A child `AbstractDynamicEffector` attached to unit $i$ (a hinged panel, a spinning body) is evaluated with
a `HubContext` that describes **that body as if it were the hub**:

- frame $\mathcal S$ (the body frame) plays the role of $\mathcal B$: `dcm_BN` $=[SN]$, `sigma_BN`
  $=\boldsymbol\sigma_{S/N}$, `omega_BN_B` $={}^{S}\boldsymbol\omega_{S/N}$;
- the body's frame origin $O$ plays the role of point $B$: `r_BN_N` $=\mathbf r_{O/N}$, `v_BN_N` $=\dot{\mathbf r}_{O/N}$
  (true inertial velocity, relative to the integration origin as for the hub);
- `m_sc` is the body mass, `c_B` its CoM relative to $O$ and `ISC_B` its inertia about $O$ (both in
  $\mathcal S$ components, constant in $\mathcal S$, so `cPrime_B` $=0$, `ISCPrime_B` $=0$);
- `t`, `args`, `g_N` (gravity at the spacecraft CoM) and the integration origin are the spacecraft's.

The child's loads are then read with the hub's own convention, in the body frame: `force_N`
($\mathcal N$ components) and `force_B` (**$\mathcal S$ components**) act **through the origin $O$**, and
`torque_B` is a torque **about $O$ in $\mathcal S$ components**. A force applied at another point $P$ of the
body needs its moment $\mathbf r_{P/O}\times\mathbf F$ in `torque_B`, exactly as for the hub.

The parent effector carries the resulting $(\mathbf F, \boldsymbol\tau_O)$ to the equations of motion as
generalized forces (principle of virtual work, Kane's method): $\mathbf F$ into the hub translation,
$\boldsymbol\tau_O + \mathbf r_{O/B}\times\mathbf F$ into the hub rotation about $B$, and
$\hat{\mathbf s}\cdot(\boldsymbol\tau_O + \mathbf r_{O/J}\times\mathbf F)$ into the joint equation
($J$ a point on the joint axis $\hat{\mathbf s}$). Unlike Basilisk's hinged panel (`hingedRigidBodyStateEffector`,
whose attached force has its moment on the hub taken at the hinge while the force itself exerts no hinge
torque), the hub moment and the joint torque use the same application point.
"""

import equinox as eqx
import jax.numpy as jnp

from jaxsim.kinematics import cross3, dcm_to_mrp, mm3, mtv3, mv3

from ._contract import AbstractDynamicEffector
from ._types import HubContext


def parse_attached(cls: str, attached, n: int):
    """`attached` as `{unit index: child or sequence of children}` or a sequence of `(index, child)`.

    **Returns:** `(indices, children)`: a static tuple of ints and the tuple of children.
    """
    if attached is None:
        return (), ()
    if isinstance(attached, dict):
        pairs = []
        for idx, kids in attached.items():
            if isinstance(kids, AbstractDynamicEffector):
                kids = (kids,)
            if not isinstance(kids, list | tuple):
                raise ValueError(
                    f"{cls}: `attached[{idx!r}]` must be a dynamic effector or a sequence of them; "
                    f"got {type(kids).__name__}."
                )
            pairs.extend((idx, k) for k in kids)
    else:
        try:
            pairs = [tuple(p) for p in attached]
        except TypeError as err:
            raise ValueError(
                f"{cls}: `attached` must be a dict {{unit index: dynamic effector(s)}} or a sequence "
                f"of (index, effector) pairs; got {type(attached).__name__}."
            ) from err
        if any(len(p) != 2 for p in pairs):
            raise ValueError(
                f"{cls}: `attached` pairs must be (index, effector); got {attached!r}."
            )
    indices, children = [], []
    for idx, child in pairs:
        if isinstance(idx, bool) or not isinstance(idx, int | jnp.integer) or not 0 <= idx < n:
            raise ValueError(
                f"{cls}: `attached` unit index must be an int in [0, {n}); got {idx!r}."
            )
        if not isinstance(child, AbstractDynamicEffector):
            raise ValueError(
                f"{cls}: `attached` children must be dynamic effectors "
                f"(AbstractDynamicEffector); got {type(child).__name__}."
            )
        indices.append(int(idx))
        children.append(child)
    names = [c.name for c in children]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ValueError(
            f"{cls}: `attached` children must have unique names; got duplicate name(s) {dup!r}."
        )
    return tuple(indices), tuple(children)


def body_context(ctx: HubContext, r_OB_B, rDot_OB_B, dcm_SB, omega_SN_B, mass, c_S, I_O_S):
    r"""The `HubContext` of a body with frame $\mathcal S$ and origin $O$ (see the module docstring).

    **Arguments:** `r_OB_B` origin relative to $B$ and `rDot_OB_B` its inertial rate $\mathbf r' +
    \boldsymbol\omega\times\mathbf r$ ($\mathcal B$ comps); `dcm_SB` $=[SB]$; `omega_SN_B` $\boldsymbol\omega_{S/N}$
    ($\mathcal B$ comps); `mass` [kg]; `c_S` CoM relative to $O$ and `I_O_S` inertia about $O$ ($\mathcal S$ comps).
    """
    dcm_SN = mm3(dcm_SB, ctx.dcm_BN)
    dcm_NS = dcm_SN.T
    r_ON_N = ctx.r_BN_N + mv3(ctx.dcm_NB, r_OB_B)
    v_ON_N = ctx.v_BN_N + mv3(ctx.dcm_NB, rDot_OB_B)
    omega_S = mv3(dcm_SB, omega_SN_B)
    cDot = cross3(omega_S, c_S)
    z3, z33 = jnp.zeros(3), jnp.zeros((3, 3))
    return HubContext(
        t=ctx.t,
        args=ctx.args,
        r_BN_N=r_ON_N,
        v_BN_N=v_ON_N,
        r_origin_N=ctx.r_origin_N,
        v_origin_N=ctx.v_origin_N,
        sigma_BN=dcm_to_mrp(dcm_SN),
        omega_BN_B=omega_S,
        dcm_BN=dcm_SN,
        m_sc=jnp.asarray(mass),
        mDot_sc=jnp.zeros(()),
        c_B=c_S,
        cPrime_B=z3,
        cDot_B=cDot,
        ISC_B=I_O_S,
        ISCPrime_B=z33,
        r_CN_N=r_ON_N + mv3(dcm_NS, c_S),
        v_CN_N=v_ON_N + mv3(dcm_NS, cDot),
        g_N=ctx.g_N,
        g_B=mv3(dcm_SN, ctx.g_N),
        supply=ctx.supply,
    )


def child_loads(child: AbstractDynamicEffector, bctx: HubContext):
    r"""`(F_S, tau_O_S)`: the child's force (through $O$) and torque about $O$, both in $\mathcal S$ comps."""
    ft = child.force_torque(bctx)
    return mv3(bctx.dcm_BN, ft.force_N) + ft.force_B, ft.torque_B


def attached_loads(indices, children, n: int, make_context):
    r"""Sum the children's loads per unit: `(F_S, tau_S)` of shape `(n, 3)` ($\mathcal S$ comps, about $O$),
    and the children's outputs `{child name: outputs}`. `make_context(i)` builds unit `i`'s context."""
    F = jnp.zeros((n, 3))
    tau = jnp.zeros((n, 3))
    contexts = {}
    for idx, child in zip(indices, children):
        if idx not in contexts:
            contexts[idx] = make_context(idx)
        f, t = child_loads(child, contexts[idx])
        F = F.at[idx].add(f)
        tau = tau.at[idx].add(t)
    return F, tau, contexts


def children_outputs(indices, children, contexts) -> dict:
    out = {}
    for idx, child in zip(indices, children):
        o = child.outputs(contexts[idx])
        if o:
            out[child.name] = o
    return out


class Attachments(eqx.Module):
    r"""The dynamic effectors mounted on the `n` units of a state effector, as one component.

    The owner (`HingedRigidBodies`, `SpinningBodies`) holds one in its field `attachments` and
    says, per unit, which body frame $\mathcal S$ and origin $O$ its children see (`make_context`,
    built with `body_context`); the component parses the `attached` argument, sums the children's
    loads per unit, records their outputs and collects their breakpoints.

    **Arguments:** `cls`: the owner's class name (for error messages); `attached`: `None`,
    `{unit index: dynamic effector or sequence of them}` or a sequence of `(index, effector)`
    pairs; `n`: the number of units.
    """

    children: tuple
    index: tuple = eqx.field(static=True)
    num_units: int = eqx.field(static=True)

    def __init__(self, cls: str, attached, n: int):
        self.index, self.children = parse_attached(cls, attached, n)
        self.num_units = n

    def loads(self, dcm_SB, make_context):
        r"""`(F_B, tau_B, F_S, tau_S, contexts)`: the children's summed force (through $O$) and
        torque (about $O$) per unit, shape `(n, 3)`, in $\mathcal B$ components (rotated by
        `dcm_SB` $=[SB]$, `(n, 3, 3)`) and in $\mathcal S$ components, and the units' contexts
        `{index: HubContext}` (`make_context(i)`, built once per loaded unit). Zeros and `{}`
        without children."""
        if not self.children:
            z = jnp.zeros((self.num_units, 3))
            return z, z, z, z, {}
        F_S, tau_S, contexts = attached_loads(
            self.index, self.children, self.num_units, make_context
        )
        return mtv3(dcm_SB, F_S), mtv3(dcm_SB, tau_S), F_S, tau_S, contexts

    def outputs(self, F_S, tau_S, contexts, **extra) -> dict:
        """`attached_force_S`, `attached_torque_S` (from `loads`), the owner's `extra` entries
        (e.g. the hinge torque of the loads) and the children's outputs under `attached` by name
        (when any child records some)."""
        out = {"attached_force_S": F_S, "attached_torque_S": tau_S, **extra}
        kids = children_outputs(self.index, self.children, contexts)
        if kids:
            out["attached"] = kids
        return out

    def breakpoints(self) -> tuple:
        """The children's breakpoints [s]."""
        return tuple(b for child in self.children for b in child.breakpoints())


class AttachmentHost(eqx.Module):
    """Base of state effectors whose units carry dynamic effectors: an `Attachments` component
    (field `attachments`), read through the declared members `attached` (the children) and
    `attached_index` (the unit of each)."""

    attachments: eqx.AbstractVar[Attachments]

    @property
    def attached(self) -> tuple:
        """The mounted dynamic effectors (the component's children)."""
        return self.attachments.children

    @property
    def attached_index(self) -> tuple:
        """The unit index of each mounted effector, in the order of `attached`."""
        return self.attachments.index
