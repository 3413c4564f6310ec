r"""The spacecraft: a rigid hub with state and dynamic effectors, solved by back-substitution.

Equations (Basilisk `spacecraft` module documentation, after Allard, Schaub & Piggott, "General hinged rigid-body dynamics
approximating first-order spacecraft solar panel flexing", JSR 55(5), 2018, doi:10.2514/1.A34125):

$$\begin{bmatrix}A & B\\ C & D\end{bmatrix}\begin{bmatrix}{}^B\ddot{\mathbf r}_{B/N}\\ \dot{\boldsymbol\omega}\end{bmatrix}
=\begin{bmatrix}\mathbf v_{trans}\\ \mathbf v_{rot}\end{bmatrix},\quad
A = m_{sc}I + \sum A_i,\ B = -m_{sc}[\tilde c] + \sum B_i,\ C = m_{sc}[\tilde c] + \sum C_i,\ D = [I_{sc,B}] + \sum D_i,$$

solved through the 3x3 Schur complement in closed form. Gravity acts at $C$; dynamic-effector forces act
through $B$; torques are about $B$.

State: `{"hub": {"r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"}, <effector name>: <effector state>}`.
Positions/velocities are of point $B$, relative to the central gravity body when one is flagged
(else to the origin of $\mathcal N$). After each step the MRP is switched to its shadow set when
$|\sigma| > 1$ (counted as `mrp_switches`), as Basilisk's `postIntegration`.
"""

from collections.abc import Sequence
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from jaxsim.dynamic_object import AbstractDynamicObject, merge_derived
from jaxsim.kinematics import cross3, dot3, inv3, mm3, mrp_dot, mrp_switch, mrp_to_dcm, mv3, tilde
from jaxsim.signals import stage_clock
from jaxsim.validation import (
    as_array,
    check_name,
    check_positive,
    check_unique_names,
    is_concrete,
)

from .._forces._gravity import AbstractGravityBody, gravity_at, gravity_bodies
from . import _joints as joints
from ._contract import AbstractDynamicEffector, AbstractStateEffector, has_mass_flow
from ._hub import Hub
from ._joints import JointContribution
from ._physical import positive
from ._types import BackSub, ForceTorque, HubContext, MassContext, MassProps


# A fixed step h resolves a gravity body's field at distance r while mu h^2 / r^3 <= this: the
# radial (tidal) rate lambda = sqrt(2 mu / r^3) then stays inside RK4's stability interval on the
# imaginary axis, |lambda h| <= 2 sqrt(2). Beyond it a step is not an approximation of the motion
# (e.g. a fall through a point mass's centre jumps past the singularity): the run fails.
UNRESOLVED_FIELD = 4.0


_HUB_KEY = "hub"
# Units of the hub state, of the spacecraft's own outputs and of Basilisk's logged totals.
_HUB_STATE_UNITS = {"r_BN_N": "m", "v_BN_N": "m/s", "sigma_BN": "-", "omega_BN_B": "rad/s"}
_OUTPUT_UNITS = {
    "r_BN_N": "m",
    "v_BN_N": "m/s",
    "r_CN_N": "m",
    "v_CN_N": "m/s",
    "sigma_BN": "-",
    "omega_BN_B": "rad/s",
    "massSC": "kg",
    "c_B": "m",
    "ISC_PntB_B": "kg m^2",
    "g_N": "m/s^2",
    "totOrbEnergy": "J",
    "totRotEnergy": "J",
    "totOrbAngMomPntN_N": "kg m^2/s",
    "totRotAngMomPntC_N": "kg m^2/s",
}


def _tuple_of(cls_name, arg, items, base):
    if items is None:
        return ()
    if isinstance(items, base):
        items = (items,)
    items = tuple(items)
    for i, it in enumerate(items):
        if not isinstance(it, base):
            raise ValueError(
                f"{cls_name}: `{arg}[{i}]` must be a {base.__name__}; got {type(it).__name__}."
            )
    return items


def _all_effectors(sc) -> list:
    """The spacecraft's effectors and, recursively, the effectors attached to them."""
    out, todo = [], list(sc.state_effectors + sc.dynamic_effectors)
    while todo:
        e = todo.pop(0)
        out.append(e)
        todo.extend(e.attached)
    return out


def _mass_flow_sources(sc) -> dict:
    """`{name: effector}` of the effectors whose `mass_flow` a state effector drains
    (`reads_mass_flows`, e.g. the thrusters a `FuelTank` feeds), in first-named order."""
    by_name = {e.name: e for e in _all_effectors(sc)}
    out = {}
    for e in sc.state_effectors:
        for n in e.reads_mass_flows:
            out.setdefault(n, by_name.get(n))
    return out


def _supply(sc, y):
    """`{name: 1.0 or 0.0}`: whether the effectors named by a supplying state effector (one with
    `supplies(x)`, e.g. a `FuelTank` that starves its thrusters when empty) have propellant; an
    effector fed by several supplying tanks starves when any of them is empty. None if no state
    effector supplies."""
    ok = {}
    for e in sc.state_effectors:
        if e.name not in y:
            continue
        has = e.supplies(y[e.name])
        if has is None:
            continue
        for n in e.reads_mass_flows:
            ok[n] = has if n not in ok else ok[n] & has
    if not ok:
        return None
    return {n: jnp.where(v, 1.0, 0.0) for n, v in ok.items()}


def _check_mass_flows(cls, sc) -> None:
    """Each name in a state effector's `reads_mass_flows` is an effector of `sc` (or one attached
    to them) with a `mass_flow(mctx)` method."""
    names = sorted(e.name for e in _all_effectors(sc))
    for e in sc.state_effectors:
        for n in e.reads_mass_flows:
            source = next((f for f in _all_effectors(sc) if f.name == n), None)
            if source is None:
                raise ValueError(
                    f"{cls}: effector {e.name!r} drains the mass flow of {n!r}, which is not an "
                    f"effector of this spacecraft; got effectors {names!r}."
                )
            if not has_mass_flow(source):
                raise ValueError(
                    f"{cls}: effector {e.name!r} drains the mass flow of {n!r}, but "
                    f"{type(source).__name__} {n!r} has no `mass_flow(mctx)` method (kg/s per unit)."
                )


def _units_like(tree, units) -> dict:
    """The entries of `units` (nested dicts) that `tree` (a dict of outputs) has."""
    if not isinstance(tree, dict) or not isinstance(units, dict):
        return {}
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            sub = _units_like(v, units.get(k, {}))
            if sub:
                out[k] = sub
        elif k in units:
            out[k] = units[k]
    return out


def _retained_c_prime(mp: MassProps, c):
    r"""$\mathbf c'$ of the retained mass: $(\sum m_i\mathbf r'_i + \sum\dot m_i\mathbf r_i)/m - \dot m\,\mathbf c/m$
    (`MassProps.first_moment_depletion`); the hub equations use `first_moment_prime` alone."""
    inv_m = 1.0 / mp.mass
    return (mp.first_moment_prime + mp.first_moment_depletion - mp.mass_dot * c) * inv_m


def _checked_override(cls, effector, state):
    """An `effector_states` entry checked against `effector.init_state()` (structure, leaf shapes;
    integer or float32 leaves cast to float64)."""
    from jaxsim.validation import match_tree

    expected = jax.eval_shape(effector.init_state)
    arg = f"effector_states[{effector.name!r}]"
    owner = f"`{type(effector).__name__}.init_state()`"
    if jax.tree_util.tree_structure(state) != jax.tree_util.tree_structure(expected):
        raise ValueError(
            f"{cls}: `{arg}` must have the structure of {owner}: expected "
            f"{eqx.tree_pformat(expected)}; got {eqx.tree_pformat(state)}."
        )
    return match_tree(cls, arg, state, expected, owner)


class Spacecraft(AbstractDynamicObject):
    r"""A spacecraft hub with effectors (Basilisk `spacecraft`).

    **Arguments:**

    - `hub`: the `Hub`.
    - `state_effectors`: effectors with states (reaction wheels, panels, ...), in any order.
    - `dynamic_effectors`: external loads (gravity gradient, external force/torque, ...).
    - `gravity`: gravity bodies (`PointMassGravity`, `SphericalHarmonicGravity`), at most one `central`.
    - `min_radius`: [m] > 0 or None (default): the composite CoM must stay at least this far from
      the integration origin (the central body's centre); a `SphericalHarmonicGravity` body's
      reference radius applies to its own centre in any case (its series diverges inside).
    - `name`: key of this spacecraft in a `System`.

    All effector names must be unique and differ from `"hub"`.

    **Physical validity** (`validity(y)`): the hub's mass and inertia (positive definite, triangle
    inequality); the effectors' masses, inertias, stiffnesses, dampings, wheel inertias and
    friction, thrust and Isp; the gravity bodies' `mu` and radius, `min_radius`; the tanks' fuel
    mass within [0, max] in `y`. `simulate` checks them once per run: at the call when concrete
    (an error naming the quantity), in the program when traced (a model changed by
    `eqx.tree_at`, a dispersion or `vmap`): the run fails with `invalid_model` (an error naming
    the check with `throw=True`), and its gradient is NaN. A CoM inside `min_radius` or a
    spherical-harmonic body's radius makes the derivative NaN: the run fails
    (`nonfinite_state`, never `ok=True`) and its gradient is NaN; an initial state there is
    refused at the call (`check_initial_state`, naming the body, distance and radius). Inside a
    fixed step $h$, so does a CoM where a body's field is not resolved by the step,
    $\mu h^2 / r^3 > 4$ (beyond RK4's stability interval for the radial rate
    $\sqrt{2\mu/r^3}$; e.g. a fall through a point mass's centre, which a fixed step would
    jump past with finite, wrong values).
    """

    # Python ints anywhere in a spacecraft (hub, gravity bodies, ...) are parameters: float64.
    ints_are_parameters: ClassVar[bool] = True
    hub: Hub
    state_effectors: tuple
    dynamic_effectors: tuple
    gravity: tuple
    min_radius: object
    name: str = eqx.field(static=True)

    def __init__(
        self,
        hub: Hub,
        *,
        state_effectors: Sequence[AbstractStateEffector] = (),
        dynamic_effectors: Sequence[AbstractDynamicEffector] = (),
        gravity: AbstractGravityBody | Sequence[AbstractGravityBody] | None = (),
        min_radius: Float[ArrayLike, ""] | None = None,
        name: str = "spacecraft",
    ):
        cls = "Spacecraft"
        if not isinstance(hub, Hub):
            raise ValueError(f"{cls}: `hub` must be a Hub; got {type(hub).__name__}.")
        self.hub = hub
        self.state_effectors = _tuple_of(
            cls, "state_effectors", state_effectors, AbstractStateEffector
        )
        self.dynamic_effectors = _tuple_of(
            cls, "dynamic_effectors", dynamic_effectors, AbstractDynamicEffector
        )
        self.gravity = gravity_bodies(cls, gravity)
        names = [_HUB_KEY] + [e.name for e in self.state_effectors + self.dynamic_effectors]
        check_unique_names(cls, "effectors (names, 'hub' reserved)", names)
        state_names = {e.name for e in self.state_effectors}
        for e in self.state_effectors + self.dynamic_effectors:
            missing = [n for n in e.reads_states if n not in state_names]
            if missing:
                raise ValueError(
                    f"{cls}: effector {e.name!r} reads the state(s) {missing!r}, which are not "
                    f"state effectors of this spacecraft; got state effectors {sorted(state_names)!r}."
                )
        self.name = check_name(cls, "name", name)
        if min_radius is not None:
            min_radius = check_positive(
                cls, "min_radius", as_array(cls, "min_radius", min_radius, "m", ()), "m"
            )
        self.min_radius = min_radius
        _check_mass_flows(cls, self)

    # ----------------------------------------------------------------------------------------------
    # State and mass properties

    def init_state(
        self,
        r_CN_N=None,
        v_CN_N=None,
        sigma_BN=None,
        omega_BN_B=None,
        effector_states=None,
        *,
        t0=0.0,
    ) -> dict:
        r"""Initial state from the composite-CoM position/velocity (Basilisk convention).

        $\mathbf r_{B/N} = \mathbf r_{C/N} - [NB]\mathbf c$, $\mathbf v_{B/N} = \mathbf v_{C/N} - [NB](\mathbf c' +
        \boldsymbol\omega\times\mathbf c)$, with $\mathbf c$ evaluated from the initial effector states.

        **Arguments:** `r_CN_N` [m], `v_CN_N` [m/s] (relative to the central body if one is flagged),
        `sigma_BN` [-], `omega_BN_B` [rad/s] (all default 0), `effector_states`: dict `{name: state}`
        overriding the effectors' configured initial states; `t0` [s].
        """
        cls = "Spacecraft.init_state"
        vec = lambda arg, v, unit: jnp.zeros(3) if v is None else as_array(cls, arg, v, unit, (3,))
        r_CN_N = vec("r_CN_N", r_CN_N, "m")
        v_CN_N = vec("v_CN_N", v_CN_N, "m/s")
        sigma_BN = vec("sigma_BN", sigma_BN, "-")
        omega_BN_B = vec("omega_BN_B", omega_BN_B, "rad/s")
        overrides = dict(effector_states or {})
        known = {e.name for e in self.state_effectors}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(
                f"{cls}: `effector_states` has unknown effector name(s) {sorted(unknown)!r}; "
                f"state effectors are {sorted(known)!r}."
            )
        y = {
            e.name: _checked_override(cls, e, overrides[e.name])
            if e.name in overrides
            else e.init_state()
            for e in self.state_effectors
        }
        mctx = self._mass_context(jnp.asarray(t0, dtype=float), None, y)
        mp = self._mass_props(mctx, y)
        c = mp.first_moment / mp.mass
        c_prime = _retained_c_prime(mp, c)
        dcm_NB = mrp_to_dcm(sigma_BN).T
        y[_HUB_KEY] = {
            "r_BN_N": r_CN_N - mv3(dcm_NB, c),
            "v_BN_N": v_CN_N - mv3(dcm_NB, c_prime + cross3(omega_BN_B, c)),
            "sigma_BN": sigma_BN,
            "omega_BN_B": omega_BN_B,
        }
        return y

    def _mass_context(self, t, args, y) -> MassContext:
        """The `MassContext` of the state effectors: time, commands, states, and the mass flows
        [kg/s] of the effectors they drain (each evaluated once, from the same time and states)."""
        supply = _supply(self, y)
        mctx = MassContext(t, args, y, supply=supply)
        sources = _mass_flow_sources(self)
        if not sources:
            return mctx
        flows = {n: jnp.asarray(e.mass_flow(mctx), dtype=float) for n, e in sources.items()}
        return MassContext(t, args, y, flows, supply)

    def _mass_props(self, mctx: MassContext, y) -> MassProps:
        mp = self.hub.mass_props()
        for e in self.state_effectors:
            mp = mp + e.mass_props(y[e.name], mctx)
        return mp

    def _origin(self, t):
        central = [b for b in self.gravity if b.central]
        if not central:
            return jnp.zeros(3), jnp.zeros(3)
        t = jnp.asarray(t, dtype=float)
        return jax.jvp(central[0].position, (t,), (jnp.ones_like(t),))

    def context(self, t, y, args) -> HubContext:
        """Evaluate mass properties, CoM kinematics and gravity: what every effector reads."""
        hub = y[_HUB_KEY]
        sigma, omega = hub["sigma_BN"], hub["omega_BN_B"]
        dcm_BN = mrp_to_dcm(sigma)
        mctx = self._mass_context(t, args, y)
        mp = self._mass_props(mctx, y)
        m = mp.mass
        # One reciprocal (XLA merges the identical one in `_retained_c_prime`): a division is a
        # kernel of its own on the CPU, the products by 1/m fuse into their consumers.
        inv_m = 1.0 / m
        c = mp.first_moment * inv_m
        m_dot = mp.mass_dot - mp.mass_dot_omitted  # the hub equations' mass rate
        c_prime = (mp.first_moment_prime - m_dot * c) * inv_m
        c_dot = _retained_c_prime(mp, c) + cross3(omega, c)
        # Products sharing a matrix in one reduction each (a kernel per reduction on the CPU).
        c_N, c_dot_N = jnp.unstack(mv3(dcm_BN.T, jnp.stack([c, c_dot])))
        r_CN_N = hub["r_BN_N"] + c_N
        v_CN_N = hub["v_BN_N"] + c_dot_N
        g_N, r_origin, v_origin = jnp.zeros(3), jnp.zeros(3), jnp.zeros(3)
        if self.gravity:
            g_N, _, r_origin = gravity_at(self.gravity, t, r_CN_N)
            _, v_origin = self._origin(t)
        return HubContext(
            t=t,
            args=args,
            r_BN_N=hub["r_BN_N"],
            v_BN_N=hub["v_BN_N"],
            r_origin_N=r_origin,
            v_origin_N=v_origin,
            sigma_BN=sigma,
            omega_BN_B=omega,
            dcm_BN=dcm_BN,
            m_sc=m,
            mDot_sc=m_dot,
            c_B=c,
            cPrime_B=c_prime,
            cDot_B=c_dot,
            ISC_B=mp.inertia_B,
            ISCPrime_B=mp.inertia_prime_B,
            r_CN_N=r_CN_N,
            v_CN_N=v_CN_N,
            g_N=g_N,
            g_B=mv3(dcm_BN, g_N),
            states=y,
            mass_flows=mctx.mass_flows,
            supply=mctx.supply,
        )

    # ----------------------------------------------------------------------------------------------
    # Equations of motion

    def loads(self, ctx: HubContext) -> ForceTorque:
        """Sum of the dynamic effectors' loads."""
        ft = ForceTorque.zeros()
        for e in self.dynamic_effectors:
            ft = ft + e.force_torque(ctx)
        return ft

    def hub_accelerations(self, ctx: HubContext, y):
        r"""Assemble and solve the back-substitution system: $({}^B\ddot{\mathbf r}_{B/N}, \dot{\boldsymbol\omega})$."""
        rDDot_B, omega_dot, _ = self._solve(ctx, y)
        return rDDot_B, omega_dot

    def _solve(self, ctx: HubContext, y):
        """The hub accelerations and each state effector's derivative closure (one pass each).

        The joint rows of all 1-DOF effectors (`JointContribution`) are stacked: their $6\times6$
        block, their right-hand side and, after the solve, their joint accelerations are one
        batched product each, whatever the number and kinds of those effectors."""
        omega, c, cp, m = ctx.omega_BN_B, ctx.c_B, ctx.cPrime_B, ctx.m_sc
        ct = tilde(c)
        I_omega, Iprime_omega = jnp.unstack(mv3(jnp.stack([ctx.ISC_B, ctx.ISCPrime_B]), omega))
        bs = BackSub(
            A=m * jnp.eye(3),
            B=-m * ct,
            C=m * ct,
            D=ctx.ISC_B,
            v_trans=-2.0 * m * cross3(omega, cp)
            - m * cross3(omega, cross3(omega, c))
            - 2.0 * ctx.mDot_sc * (cp + cross3(omega, c)),
            v_rot=-cross3(omega, I_omega) - Iprime_omega,
        )
        parts = [e.contribute(y[e.name], ctx) for e in self.state_effectors]
        joint = [p for p in parts if isinstance(p, JointContribution)]
        for part in parts:
            if not isinstance(part, JointContribution):
                bs = bs + part.back_sub
        if joint:
            cols, rows, c_q, v0, offsets = joints.stack([p.rows for p in joint])
            M, v = joints.assemble(cols, rows, c_q)
            bs = bs + joints.blocks(M, v + v0)
        ft = self.loads(ctx)
        F_g_B, F_N_B = jnp.unstack(mv3(ctx.dcm_BN, jnp.stack([m * ctx.g_N, ft.force_N])))
        v_trans = bs.v_trans + F_g_B + F_N_B + ft.force_B
        v_rot = bs.v_rot + cross3(c, F_g_B) + ft.torque_B
        A_inv = inv3(bs.A)
        CAinv = mm3(bs.C, A_inv)
        omega_dot = mv3(inv3(bs.D - mm3(CAinv, bs.B)), v_rot - mv3(CAinv, v_trans))
        rDDot_B = mv3(A_inv, v_trans - mv3(bs.B, omega_dot))
        if joint:
            qDDot = joints.accelerations(rows, c_q, jnp.concatenate([rDDot_B, omega_dot]))
            qDDot = iter(jnp.split(qDDot, offsets[1:-1]))
        derivatives = []
        for part in parts:
            if isinstance(part, JointContribution):
                derivatives.append(part.derivative(next(qDDot)))
            else:
                derivatives.append(part.derivative(rDDot_B, omega_dot))
        return rDDot_B, omega_dot, derivatives

    def validity(self, y=None) -> dict:
        """`{"<effector>.<quantity>": traced bool}` (True where physical): the parameter checks of
        the hub, the effectors and the gravity bodies (`physical_checks`), `min_radius` > 0, and
        with a state `y` those of the effectors' states (e.g. a tank's fuel within [0, max]).
        `simulate` reads it once per run (class docstring)."""
        out = {f"hub.{k}": v for k, v in self.hub.physical_checks().items()}
        for e in _all_effectors(self):
            x = None if y is None or e.name not in y else y[e.name]
            for k, v in e.physical_checks(x).items():
                out[f"{e.name}.{k}"] = v
        for b in self.gravity:
            checks = getattr(b, "physical_checks", None)
            if callable(checks):
                for k, v in checks().items():
                    out[f"{b.name}.{k}"] = v
        if self.min_radius is not None:
            out["min_radius"] = positive(self.min_radius)
        return out

    def _singular(self) -> bool:
        """Whether the drift checks the CoM against `min_radius`, a body's radius, or (inside a
        fixed step) the field's resolution by the step (static)."""
        return (
            self.min_radius is not None
            or any(getattr(b, "radius", None) is not None for b in self.gravity)
            or (bool(self.gravity) and stage_clock() is not None)
        )

    def _admissible(self, ctx: HubContext):
        r"""Traced bool: the CoM outside `min_radius` and the reference radius of every
        spherical-harmonic body, and, inside a fixed step $h$, where every body's field is
        resolved by the step ($\mu h^2 / r^3 \le$ `UNRESOLVED_FIELD`; a fall through a point
        mass's centre, where a fixed step jumps past the singularity); the drift is NaN otherwise:
        the run fails."""
        ok = jnp.asarray(True)
        r_abs = ctx.r_CN_N + ctx.r_origin_N
        if self.min_radius is not None:
            ok = ok & (dot3(ctx.r_CN_N, ctx.r_CN_N) >= self.min_radius**2)
        clock = stage_clock()
        for b in self.gravity:
            R = getattr(b, "radius", None)
            x = r_abs - b.position(ctx.t)
            r2 = dot3(x, x)
            if R is not None:
                ok = ok & (r2 >= R**2)
            if clock is not None:
                h = clock[1] - clock[0]
                ok = ok & (b.mu * h * h <= UNRESOLVED_FIELD * r2 * jnp.sqrt(r2))
        return ok

    def check_initial_state(self, t0, y0, args) -> None:
        """Refuse (ValueError) an initial CoM inside `min_radius` or a spherical-harmonic body's
        reference radius, naming the body, the distance and the radius [m] (`simulate` calls it
        once, with concrete `t0`, `y0`; the run would fail at its first step)."""
        if not self._singular() or not all(is_concrete(x) for x in jax.tree.leaves((t0, y0))):
            return
        ctx = self.context(jnp.asarray(t0, float), y0, args)
        r_abs = ctx.r_CN_N + ctx.r_origin_N
        if self.min_radius is not None and is_concrete(self.min_radius):
            r = float(jnp.sqrt(dot3(ctx.r_CN_N, ctx.r_CN_N)))
            if r < float(self.min_radius):
                raise ValueError(
                    f"Spacecraft: the initial centre of mass (from `y0['hub']['r_BN_N']` [m]) is "
                    f"{r:.6g} m from the integration origin, inside `min_radius` "
                    f"{float(self.min_radius):.6g} m."
                )
        for b in self.gravity:
            R = getattr(b, "radius", None)
            if R is None or not is_concrete(R):
                continue
            x = r_abs - b.position(jnp.asarray(t0, float))
            r = float(jnp.sqrt(dot3(x, x)))
            if r < float(R):
                raise ValueError(
                    f"Spacecraft: the initial centre of mass (from `y0['hub']['r_BN_N']` [m]) is "
                    f"{r:.6g} m from the centre of gravity body {b.name!r} "
                    f"({type(b).__name__}), inside its reference radius {float(R):.6g} m (the "
                    "series diverges there)."
                )

    def drift(self, t, y, args):
        ctx = self.context(t, y, args)
        rDDot_B, omega_dot, derivatives = self._solve(ctx, y)
        hub = y[_HUB_KEY]
        dy = {
            _HUB_KEY: {
                "r_BN_N": hub["v_BN_N"],
                "v_BN_N": mv3(ctx.dcm_NB, rDDot_B),
                "sigma_BN": mrp_dot(hub["sigma_BN"], hub["omega_BN_B"]),
                "omega_BN_B": omega_dot,
            }
        }
        for e, dx in zip(self.state_effectors, derivatives):
            dy[e.name] = dx
        if not self._singular():
            return dy
        # A singular state (inside a body) fails the run instead of integrating on; parameters
        # are checked once per run by `simulate` (`validity`).
        bad = jnp.where(self._admissible(ctx), 0.0, jnp.nan)
        return jax.tree_util.tree_map(lambda d: d + bad.astype(d.dtype), dy)

    @property
    def noise_dim(self) -> int:
        """Total number of Wiener processes: the sum over state effectors (hub: none)."""
        return sum(e.noise_dim for e in self.state_effectors)

    def diffusion(self, t, y, args):
        """$G(t, y)$: leaves `leaf.shape + (noise_dim,)`; effector k's sources occupy its own slice
        of the noise vector (in `state_effectors` order); zeros for the hub and noiseless effectors."""
        total = self.noise_dim
        zeros = lambda x: jax.tree_util.tree_map(
            lambda leaf: jnp.zeros(jnp.shape(leaf) + (total,), jnp.result_type(leaf)), x
        )
        out = {_HUB_KEY: zeros(y[_HUB_KEY])}
        ctx = self.context(t, y, args) if total else None
        offset = 0
        for e in self.state_effectors:
            nk = e.noise_dim
            if nk == 0:
                out[e.name] = zeros(y[e.name])
            else:
                lo, hi = offset, total - offset - nk
                out[e.name] = jax.tree_util.tree_map(
                    lambda leaf: jnp.pad(leaf, [(0, 0)] * (leaf.ndim - 1) + [(lo, hi)]),
                    e.diffusion(y[e.name], ctx),
                )
            offset += nk
        return out

    def step_map(self, t, y):
        hub = dict(y[_HUB_KEY])
        hub["sigma_BN"], switched = mrp_switch(hub["sigma_BN"])
        new = dict(y)
        new[_HUB_KEY] = hub
        counts = {"mrp_switches": switched.astype(jnp.int32)}
        for e in self.state_effectors:
            new[e.name], c = e.step_map(t, y[e.name])
            if c:
                counts[e.name] = c
        return new, counts

    def check_solver(self, solver, dt) -> None:
        """Each effector's (and attached effector's) `check_solver`."""
        for e in _all_effectors(self):
            e.check_solver(solver, dt)

    def breakpoints(self):
        return tuple(
            b for e in self.state_effectors + self.dynamic_effectors for b in e.breakpoints()
        )

    def init_commands(self) -> dict:
        """`{effector name: {key: zeros}}`: the commands that the effectors (and the effectors
        attached to them) declare (`init_commands()`), what `simulate` checks `args` and
        flight-software outputs against; an effector that reads none is left out."""
        spec = {}
        for e in _all_effectors(self):
            commands = e.init_commands()
            if commands:
                spec[e.name] = commands
        return spec

    @property
    def reads_only_commands(self) -> bool:
        """True when every effector declares its commands: `args` holds nothing else for it."""
        return all(e.init_commands() is not None for e in _all_effectors(self))

    # ----------------------------------------------------------------------------------------------
    # Diagnostics

    def energy_momentum(self, t, y, args) -> dict:
        r"""Basilisk's logged totals: `totOrbEnergy`, `totRotEnergy` [J], `totOrbAngMomPntN_N`,
        `totRotAngMomPntC_N` [kg m^2/s] (orbital quantities relative to the integration origin)."""
        return self._energy_momentum(self.context(t, y, args), y)

    def _energy_momentum(self, ctx: HubContext, y, parts=None) -> dict:
        t = ctx.t
        em = self.hub.energy_momentum(ctx.omega_BN_B)
        if parts is None:
            parts = [e.energy_momentum(y[e.name], ctx) for e in self.state_effectors]
        for part in parts:
            em = em + part
        m, c, cdot = ctx.m_sc, ctx.c_B, ctx.cDot_B
        if self.gravity:
            _, U, _ = gravity_at(self.gravity, t, ctx.r_CN_N)
        else:
            U = jnp.zeros(())
        return {
            "totOrbEnergy": 0.5 * m * dot3(ctx.v_CN_N, ctx.v_CN_N) + m * U,
            "totRotEnergy": em.E - 0.5 * m * dot3(cdot, cdot),
            "totOrbAngMomPntN_N": m * cross3(ctx.r_CN_N, ctx.v_CN_N),
            "totRotAngMomPntC_N": mv3(ctx.dcm_NB, em.H_B - m * cross3(c, cdot)),
        }

    def outputs(self, t, y, args) -> dict:
        """Basilisk's state and mass messages (absolute positions), plus each effector's outputs."""
        return self._outputs(self.context(t, y, args), y)

    def derived(self, t, y, args) -> dict:
        """`outputs` and `energy_momentum` together, in one pass: one evaluation of the hub
        context, and each state effector's `derived` (its outputs and energy/momentum sharing
        their intermediates). The drivers call it batched over the samples."""
        ctx = self.context(t, y, args)
        both = [e.derived(y[e.name], ctx) for e in self.state_effectors]
        return merge_derived(
            self._outputs(ctx, y, [o for o, _ in both]),
            self._energy_momentum(ctx, y, [em for _, em in both]),
        )

    def units(self) -> dict:
        """Units keyed as a run's results: `{"ys": {"hub": ..., <state effector>: ...},
        "outputs": {<hub outputs and totals>, <effector>: ...}, "args": {<effector>: ...}}`
        (commands: every effector of `init_commands()`, attached ones included, by name),
        from each effector's `units()`, its outputs' units kept where its outputs have an entry
        (the output tree from `jax.eval_shape`, so no unit names an entry a run lacks)."""
        y = jax.eval_shape(self.init_state)
        shapes = jax.eval_shape(lambda y: self.derived(0.0, y, None), y)
        out = {"ys": {_HUB_KEY: dict(_HUB_STATE_UNITS)}, "outputs": dict(_OUTPUT_UNITS), "args": {}}
        for e in self.state_effectors + self.dynamic_effectors:
            u = e.units()
            u["outputs"] = _units_like(shapes.get(e.name, {}), u["outputs"])
            for part, v in u.items():
                if v:
                    out[part][e.name] = v
        for e in _all_effectors(self):  # commands of attached effectors too, as `init_commands()`
            commands = e.units()["args"]
            if commands:
                out["args"][e.name] = commands
        return out

    def element_dims(self) -> dict:
        """`{effector name: its element_dim()}`: the shared dimension of each effector's units
        (`"wheel"`, `"panel"`, ...) in result datasets."""
        return {e.name: e.element_dim() for e in self.state_effectors + self.dynamic_effectors}

    def _outputs(self, ctx: HubContext, y, state_outputs=None) -> dict:
        out = {
            "r_BN_N": ctx.r_BN_N + ctx.r_origin_N,
            "v_BN_N": ctx.v_BN_N + ctx.v_origin_N,
            "r_CN_N": ctx.r_CN_N + ctx.r_origin_N,
            "v_CN_N": ctx.v_CN_N + ctx.v_origin_N,
            "sigma_BN": ctx.sigma_BN,
            "omega_BN_B": ctx.omega_BN_B,
            "massSC": ctx.m_sc,
            "c_B": ctx.c_B,
            "ISC_PntB_B": ctx.ISC_B,
            "g_N": ctx.g_N,
        }
        if state_outputs is None:
            state_outputs = [e.outputs(y[e.name], ctx) for e in self.state_effectors]
        for e, o in zip(self.state_effectors, state_outputs):
            if o:
                out[e.name] = o
        for e in self.dynamic_effectors:
            o = e.outputs(ctx)
            if o:
                out[e.name] = o
        return out
