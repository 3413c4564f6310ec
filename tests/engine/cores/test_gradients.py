"""Gradients of a closed-loop run through clocks and events, for every parameter class, against
central finite differences; and the fixed-step driver's checkpointing (same gradients, bounded
memory).

The run: a spacecraft (hub, three reaction wheels, one damped hinged panel, an external torque) in
LEO, MRP-feedback flight software on a 0.5 s clock commanding the wheels, and a terminal event that
stops the run when the attitude error |sigma_BR| falls below a parameter `sigma_stop`. The scalar
differentiated mixes the state at the stop and the stop time, so every parameter acts through the
clock (the wheel commands held between ticks) and through the event (the final time moves with it).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim._cores import _fixed_grid
from jaxsim._cores._fixed_grid import (
    _MAX_FLAT_SUBBLOCKS,
    _SMALL_BUFFER_BYTES,
    _checkpoint_blocks,
    _checkpoint_levels,
    _residual_cap,
)


# Fourth-order central differences with a relative step of 1e-4. The stop state comes from the
# solver's dense output (C1 at step nodes), so large steps leave the smooth piece (measured on d/dK:
# 1e-5 off at 1e-3, 3e-10 at 1e-4), while a small second-order step lets the stop time's
# root-finding noise (~1e-13 s) dominate small sensitivities (1.5e-6 off on d/d(hub mass) at 1e-5).
FD_REL_STEP = 1e-4
# Second-order central differences on the smooth pendulum (no event): step 1e-5 gives truncation
# ~1e-10 and round-off ~1e-11 relative.
FD_REL_STEP_SMOOTH = 1e-5
GRAD_RTOL = 1e-6
# Checkpointed vs plain reverse mode compute the same operations in another order: round-off.
CHECKPOINT_RTOL = 1e-12
# The 4096-step checkpointed gradient must need at most this fraction of the plain one's temporary
# memory (sqrt blocking: ~2 * 64 stored states vs 4096 steps of residuals; measured ~1/30).
CHECKPOINT_MEMORY_FRACTION = 0.1

DT, T1, FSW_DT = 0.1, 12.0, 0.5  # [s]
I_HUB = np.array([[12.0, 0.3, -0.2], [0.3, 10.0, 0.1], [-0.2, 0.1, 8.0]])  # [kg m^2]
SIGMA_RN = np.zeros(3)
SIGMA_BN0 = np.array([0.06, -0.04, 0.03])
OMEGA_BN0 = np.array([0.002, -0.001, 0.0015])  # [rad/s]
R_CN_N = np.array([6.878e6, 0.0, 0.0])  # [m]
V_CN_N = np.array([0.0, 7612.6, 0.0])  # [m/s]

# The differentiated parameters, by class (nominal values; each enters the model below).
NOMINAL = {
    "hub_mass": 150.0,  # [kg] hub
    "hub_Ixx": I_HUB[0, 0],  # [kg m^2] hub inertia (one diagonal element)
    "omega0_x": OMEGA_BN0[0],  # [rad/s] initial condition
    "rw_Js": 0.05,  # [kg m^2] wheel (all three)
    "panel_k": 20.0,  # [N m/rad] panel
    "panel_c": 2.0,  # [N m s/rad] panel
    "panel_mass": 10.0,  # [kg] panel
    "torque_y": 1e-3,  # [N m] dynamic effector
    "K": 8.0,  # [N m] controller gain (on the clock)
    "P": 12.0,  # [N m s] controller gain (on the clock)
    "sigma_stop": 0.02,  # [-] event threshold
}


def _build(p):
    I_B = jnp.asarray(I_HUB).at[0, 0].set(p["hub_Ixx"])
    g = np.eye(3)
    rw = fx.ReactionWheels(g, [0.05, 0.05, 0.05], Omega=[10.0, -5.0, 3.0], name="rw")
    rw = eqx.tree_at(lambda r: r.Js, rw, p["rw_Js"] * jnp.ones(3))
    panel = fx.HingedRigidBodies(
        [10.0], [np.diag([2.0, 1.0, 1.0])], [0.8], [20.0], [[0.3, 0.0, 0.4]], [np.eye(3)],
        c=[2.0], theta0=[0.02], name="panel",
    )  # fmt: skip
    panel = eqx.tree_at(
        lambda q: (q.k, q.c, q.mass),
        panel,
        (p["panel_k"][None], p["panel_c"][None], p["panel_mass"][None]),
    )
    torque = fx.ExtForceTorque(torque_B=[0.0, 1e-3, 0.0], name="torque")
    torque = eqx.tree_at(lambda e: e.torque_B, torque, jnp.stack([0.0, p["torque_y"], 0.0]))
    earth = fx.PointMassGravity(3.986004415e14, name="earth")
    hub = fx.Hub(150.0, I_HUB)
    hub = eqx.tree_at(lambda h: (h.mass, h.IHubPntBc_B), hub, (p["hub_mass"], I_B))
    sc = fx.Spacecraft(
        hub, state_effectors=(rw, panel), dynamic_effectors=(torque,), gravity=(earth,)
    )
    ctrl = fx.MRPFeedback(1.5, 6.0, I_HUB, gsHat_B=g, Js=[0.05] * 3)
    ctrl = eqx.tree_at(lambda c: (c.K, c.P), ctrl, (p["K"], p["P"]))
    fsw = fx.RWAttitudeFSW(js.Clock(FSW_DT), ctrl, fx.RWMotorTorque(g), SIGMA_RN)
    omega0 = jnp.asarray(OMEGA_BN0).at[0].set(p["omega0_x"])
    y0 = sc.init_state(R_CN_N, V_CN_N, SIGMA_BN0, omega0)
    return sc, fsw, y0


def scalar(p):
    """A smooth scalar of the state at the stop event and of the stop time."""
    sc, fsw, y0 = _build(p)
    stop = js.Event(
        lambda t, y, args: jnp.sum(y["hub"]["sigma_BN"] ** 2) - p["sigma_stop"] ** 2,
        direction="falling",
        terminal=True,
        name="converged",
    )
    sol = js.simulate(
        sc, y0, T1, dt=DT, solver=js.RK4(), clocks=(fsw,), events=(stop,), max_events=1
    )
    y_stop = jax.tree_util.tree_map(lambda a: a[0], sol.events.y_after)  # state at the stop
    return (
        jnp.sum(y_stop["rw"]["Omega"])
        + 10.0 * jnp.sum(y_stop["hub"]["omega_BN_B"])
        + 3.0 * y_stop["panel"]["theta"][0]
        + 0.1 * sol.t_final
    ), sol


_scalar_jit = jax.jit(scalar)


@pytest.fixture(scope="module")
def nominal():
    p = {k: jnp.asarray(v, dtype=float) for k, v in NOMINAL.items()}
    value, sol = _scalar_jit(p)
    return p, value, sol


def test_event_fires_between_ticks(nominal):
    """The scenario is what the test claims: the stop event ends the run, off the clock grid."""
    _, _, sol = nominal
    assert int(sol.events.count) == 1
    t_stop = float(sol.t_final)
    assert 1.0 < t_stop < T1 - 1.0
    assert abs(t_stop / FSW_DT - round(t_stop / FSW_DT)) > 0.01
    assert int(sol.clock_logs["fsw"]["t"].size) >= 3


def test_gradients_match_central_differences(nominal):
    p, _, _ = nominal
    grad = jax.jit(jax.grad(lambda q: scalar(q)[0]))(p)
    # Fourth-order central differences; the perturbed runs reuse the nominal run's compilation.
    for name, v in p.items():
        h = FD_REL_STEP * abs(float(v))
        fm2, fm1, fp1, fp2 = (
            float(_scalar_jit({**p, name: v + s * h})[0]) for s in (-2.0, -1.0, 1.0, 2.0)
        )
        fd = (8.0 * (fp1 - fm1) - (fp2 - fm2)) / (12.0 * h)
        g = float(grad[name])
        assert np.isfinite(g), name
        assert abs(g - fd) <= GRAD_RTOL * abs(fd), (name, g, fd)


# --------------------------------------------------------------------------------------------------
# Checkpointing of the fixed-step driver


def test_checkpoint_blocks():
    assert _checkpoint_blocks(10) is None  # short intervals: checkpointed whole
    assert _checkpoint_blocks(100) == (10, 10)
    num, size = _checkpoint_blocks(58300)  # one orbit at 0.1 s: a divisor near sqrt
    assert num * size == 58300 and 120 <= size <= 483
    num, size = _checkpoint_blocks(4099)  # a prime: padded blocks
    assert num * size >= 4099 and (num - 1) * size < 4099 and size == 65


def test_checkpoint_levels():
    # Sub-blocks of at most `cap` steps (their stacked step inputs stay small CPU buffers).
    assert _residual_cap({"r": jnp.zeros(3), "m": jnp.zeros(())}) == _SMALL_BUFFER_BYTES // 24
    assert _checkpoint_levels(10, 21) is None  # short interval: checkpointed whole
    assert _checkpoint_levels(30, 21) == (2, 1, 15)  # blocks of 15 steps, no padding
    for length in (100, 4099, 6000, 58300, 10**6):
        num, per, size = _checkpoint_levels(length, 21)
        assert 10 <= size <= 21 and num * per * size >= length
        assert num * per * size - length < per * size + size  # padding: under a block + a sub-block
        assert (per == 1) == (-(-length // size) <= _MAX_FLAT_SUBBLOCKS)
    num, per, size = _checkpoint_levels(58300, 21)  # one orbit: sqrt grouping of 2915 sub-blocks
    assert (num, per, size) == (55, 53, 20)


class _Pendulum(js.AbstractDynamicObject):
    """theta'' = -(g/l) sin(theta) - c theta': a small model for the checkpoint checks."""

    g_over_l: jax.Array
    c: jax.Array
    name: str = eqx.field(static=True, default="pendulum")

    def init_state(self):
        return {"theta": jnp.asarray(0.3), "thetaDot": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        th, w = y["theta"], y["thetaDot"]
        return {"theta": w, "thetaDot": -self.g_over_l * jnp.sin(th) - self.c * w}


def _final(params, n_steps, checkpoint, ts=None):
    model = _Pendulum(params[0], params[1])
    sol = js.simulate(
        model, model.init_state(), n_steps * 0.01, dt=0.01, ts=ts, outputs=False,
        checkpoint=checkpoint,
    )  # fmt: skip
    return sol.ys["theta"][-1] + 0.5 * sol.ys["thetaDot"][-1] + jnp.sum(sol.ys["theta"])


@pytest.mark.parametrize("n_steps,ts", [(4099, None), (700, [0.0, 0.37, 1.0, 4.0, 7.0])])
def test_checkpointed_gradient_equals_plain(n_steps, ts, monkeypatch):
    """Padded blocks (prime step count) and non-uniform sample intervals."""
    # Blocks even where every stage input would fit the stored budget (hoisted loops).
    monkeypatch.setattr(_fixed_grid, "STORE_BYTES", 0)
    p = jnp.array([9.81, 0.1])
    a = jax.jit(jax.grad(lambda q: _final(q, n_steps, True, ts)))(p)
    b = jax.jit(jax.grad(lambda q: _final(q, n_steps, False, ts)))(p)
    np.testing.assert_allclose(a, b, rtol=CHECKPOINT_RTOL)
    h = FD_REL_STEP_SMOOTH * p
    f = jax.jit(lambda q: _final(q, n_steps, True, ts))
    fd = [(f(p.at[i].add(h[i])) - f(p.at[i].add(-h[i]))) / (2 * h[i]) for i in range(2)]
    np.testing.assert_allclose(a, fd, rtol=GRAD_RTOL)


def test_checkpointing_bounds_reverse_memory(monkeypatch):
    monkeypatch.setattr(_fixed_grid, "STORE_BYTES", 0)  # blocks, as a run past the budget
    p = jnp.array([9.81, 0.1])

    def temp_bytes(checkpoint):
        fn = jax.jit(jax.grad(lambda q: _final(q, 4096, checkpoint)))
        return fn.lower(p).compile().memory_analysis().temp_size_in_bytes

    assert temp_bytes(True) <= CHECKPOINT_MEMORY_FRACTION * temp_bytes(False)


# --------------------------------------------------------------------------------------------------
# Forward mode through diffrax (adaptive and clocked runs): `adjoint=diffrax.ForwardMode()`

# jacfwd and jacrev differentiate the same discrete solve: round-off.
MODES_RTOL = 1e-10
# Impact time of a ball dropped from h under gravity g (Tsit5 at rtol 1e-10 plus the event root
# finder): d t_impact / d h = 1 / sqrt(2 g h) holds to the solve's tolerance.
IMPACT_RTOL = 1e-7
G = 9.81  # [m/s^2]


class _Ball(js.AbstractDynamicObject):
    name: str = eqx.field(static=True, default="ball")

    def init_state(self):
        return {"z": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"z": y["v"], "v": -G * jnp.ones_like(y["v"])}


def _impact_time(h, adjoint):
    ball = _Ball()
    ground = js.Event(lambda t, y, args: y["z"], direction="falling", terminal=True)
    sol = js.simulate(
        ball, {"z": h, "v": jnp.zeros_like(h)}, 5.0, solver=js.Tsit5(), rtol=1e-10, atol=1e-12,
        events=(ground,), max_events=1, adjoint=adjoint,
    )  # fmt: skip
    return sol.t_final


def test_forward_mode_through_events():
    import diffrax as dfx

    # Reverse mode through the same event is covered by tests/engine/events/test_events.py.
    h = jnp.asarray(7.0)
    fwd = jax.jacfwd(lambda x: _impact_time(x, dfx.ForwardMode()))(h)
    np.testing.assert_allclose(fwd, 1.0 / np.sqrt(2 * G * 7.0), rtol=IMPACT_RTOL)


@pytest.mark.parametrize("solver", [js.Tsit5(), js.Dopri8()], ids=["diffrax-loop", "unrolled"])
def test_forward_mode_adaptive(solver):
    import diffrax as dfx

    def final(p, adjoint):
        model = _Pendulum(p[0], p[1])
        sol = js.simulate(
            model, model.init_state(), 3.0, solver=solver, rtol=1e-10, atol=1e-12,
            outputs=False, adjoint=adjoint,
        )  # fmt: skip
        return jnp.stack([sol.ys["theta"][-1], sol.ys["thetaDot"][-1]])

    p = jnp.array([9.81, 0.1])
    fwd = jax.jacfwd(lambda q: final(q, dfx.ForwardMode()))(p)
    rev = jax.jacrev(lambda q: final(q, None))(p)
    np.testing.assert_allclose(fwd, rev, rtol=MODES_RTOL)
