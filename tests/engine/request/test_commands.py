"""Typed commands: what `simulate` checks in `args` and in flight-software outputs against the
commands a model declares (`init_commands()` for names and shapes, `units()["args"]` for units),
`jaxsim.Quantity` for a value tagged with its unit, and the clocked driver keeping the user's
`args`, the held outputs and its own data apart.

The oracles: a run commanded through a tagged value is the plain run bit for bit; a misspelt
name, a wrong shape or a wrong unit is refused with a message naming it (from `args` and from a
discrete model's held outputs); gradients through commanded runs equal central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim._model._quantity import parse_unit, same_unit


# A command held by flight software equals the same constant command given in `args`: the same
# arithmetic on the same grid (measured 0.0); a bar at a few ulps of the O(1) state.
TOL_HELD_VS_ARGS = 1e-14
# vmap against a loop: batched kernels may sum in another order; round-off of O(1e-2) rad/s rates
# (measured 1.7e-18).
TOL_BATCH = 1e-16
# Central differences of an RK4 run that is smooth in its command, step 1e-4 of an O(1e-2)
# command: truncation O(h^2) ~ 1e-8 relative at most, round-off ~ 1e-16 / 1e-4 = 1e-12 (measured
# 2.3e-13 for the wheel torques, 8.9e-12 for the flight-software gain).
TOL_FD = 1e-6
FD_STEP = 1e-4

DT = 0.1  # [s] RK4 step
T1 = 1.0  # [s] horizon: 10 steps
U = np.array([2e-2, -1e-2, 3e-2])  # [N m] wheel motor torques


def _spacecraft(**kwargs):
    return fx.Spacecraft(
        fx.Hub(mass=100.0, IHubPntBc_B=np.diag([10.0, 12.0, 8.0])),
        state_effectors=[
            fx.ReactionWheels(gsHat_B=np.eye(3), Js=[0.05] * 3, Omega=[10.0, -5.0, 2.0], name="rw")
        ],
        **kwargs,
    )


SC = _spacecraft()
Y0 = SC.init_state([7e6, 0.0, 0.0], [0.0, 7.5e3, 0.0], [0.1, 0.2, -0.1], [0.01, -0.02, 0.005])


def _run(args=None, **kwargs):
    kwargs.setdefault("solver", js.RK4())
    return js.simulate(SC, Y0, T1, dt=DT, args=args, **kwargs)


def _same(a, b, tol=0.0):
    diff = jax.tree.map(lambda x, y: float(jnp.max(jnp.abs(x - y))), a, b)
    return max(jax.tree.leaves(diff)) <= tol


def _held(update_output, units=None, held0=None, name="ctl"):
    """A discrete model on a 0.5 s clock that writes `update_output` (held from t0 by `held0`)."""
    return js.DiscreteModel(
        name,
        js.Clock(0.5),
        lambda t, y, z, args: (z, update_output),
        held0=update_output if held0 is None else held0,
        units=units,
    )


# --------------------------------------------------------------------------------------------------
# Units: their grammar, `Quantity`


def test_unit_grammar():
    assert same_unit("N m", "N*m") and same_unit("N m", "m N") and same_unit("N m", "N·m")
    assert same_unit("rad/s", "rad s^-1") and same_unit("kg m^2", "kg*m**2")
    assert same_unit("m^3/s^2", "m^3 s^-2") and same_unit("-", "1") and same_unit("1/s", "s^-1")
    assert not same_unit("N m", "mN m") and not same_unit("J", "kg m^2/s^2")
    assert not same_unit("rad/s", "rad s")
    assert parse_unit("kg m^2/s") == (("kg", 1), ("m", 2), ("s", -1))
    with pytest.raises(ValueError, match=r"Quantity: `unit`.*'N m\^'"):
        js.Quantity(1.0, "N m^")
    with pytest.raises(TypeError, match=r"Quantity: `unit` must be a unit string"):
        js.Quantity(1.0, 3)


# --------------------------------------------------------------------------------------------------
# Commands in `args`


def test_plain_and_tagged_commands_agree():
    plain = _run({"rw": {"motor_torque": U}})
    for unit in ("N m", "m*N", "N·m"):
        tagged = _run({"rw": {"motor_torque": js.Quantity(U, unit)}})
        assert _same(plain.ys, tagged.ys), unit
    # The command acts (the test could fail): the wheels' speeds move from the zero-command run.
    free = _run()
    assert not _same(plain.ys["rw"], free.ys["rw"], tol=1e-6)


def test_wrong_unit_in_args_refused_by_name():
    args = {"rw": {"motor_torque": js.Quantity(1e3 * U, "mN m")}}
    with pytest.raises(
        ValueError,
        match=r"`args\['rw'\]\['motor_torque'\]` is given in 'mN m', but `model` Spacecraft "
        r"'spacecraft' reads it in 'N m'",
    ):
        _run(args)


def test_misspelt_command_in_args_refused_by_name():
    with pytest.raises(ValueError, match=r"`args\['rw'\]` has unknown command key.*'motor_torq'"):
        _run({"rw": {"motor_torq": U}})
    with pytest.raises(ValueError, match=r"`args` has unknown address.*'wheels'.*\['rw'\]"):
        _run({"wheels": {"motor_torque": U}})


def test_wrong_shape_in_args_refused_by_name():
    with pytest.raises(
        ValueError, match=r"`args\['rw'\]\['motor_torque'\]` must have shape \(3,\).*got shape"
    ):
        _run({"rw": {"motor_torque": js.Quantity(U[:2], "N m")}})


def test_tagged_value_read_by_a_discrete_model_only_passes():
    # `gain` is read by the discrete model alone: no unit is declared for it, its value passes.
    fsw = js.DiscreteModel(
        "ctl",
        js.Clock(0.5),
        lambda t, y, z, args: (z, {"rw": {"motor_torque": args["gain"] * U}}),
        held0={"rw": {"motor_torque": U}},
    )
    a = _run({"gain": js.Quantity(1.0, "-")}, clocks=[fsw])
    b = _run({"gain": 1.0}, clocks=[fsw])
    assert _same(a.ys, b.ys)


# --------------------------------------------------------------------------------------------------
# Flight-software outputs


def test_held_outputs_checked_like_args():
    out = {"rw": {"motor_torque": U}}
    with pytest.raises(
        ValueError,
        match=r"discrete model 'ctl' writes `args\['rw'\]\['motor_torque'\]` in 'mN m' "
        r"\(DiscreteModel.units\(\)\['held'\]\), but `model` Spacecraft 'spacecraft' reads it "
        r"in 'N m'",
    ):
        _run(clocks=[_held(out, units={"rw": {"motor_torque": "mN m"}})])
    with pytest.raises(
        ValueError,
        match=r"held output of discrete model 'ctl': `args\['rw'\]` has unknown command key.*"
        r"'motor_torq'",
    ):
        _run(clocks=[_held({"rw": {"motor_torq": U}})])
    with pytest.raises(
        ValueError,
        match=r"held output of discrete model 'ctl': `args\['rw'\]\['motor_torque'\]` must have "
        r"shape \(3,\)",
    ):
        _run(clocks=[_held({"rw": {"motor_torque": U[:2]}})])
    # Declared in an equal spelling of the unit: the held command is the constant one of `args`.
    held = _run(clocks=[_held(out, units={"rw": {"motor_torque": "m N"}})])
    plain = _run({"rw": {"motor_torque": U}})
    assert _same(held.ys, plain.ys, TOL_HELD_VS_ARGS)


def test_library_flight_software_declares_the_units_it_feeds():
    wheels = SC.state_effectors[0]
    fsw = fx.RWAttitudeFSW(
        js.Clock(0.1),
        fx.MRPFeedback(K=1.0, P=3.0, I_B=np.diag([10.0, 12.0, 8.0])),
        fx.RWMotorTorque(np.eye(3)),
        [0.0, 0.0, 0.0],
    )
    assert fsw.command_addresses == ("rw",)
    written = fsw.units()["held"]["rw"]
    assert written.keys() == wheels.init_commands().keys()
    assert all(same_unit(written[k], wheels.units()["args"][k]) for k in written)
    on_time = fx.OnTimeFSW(js.Clock(1.0), lambda t, y, a: jnp.zeros(2), 2)
    assert on_time.units()["held"]["thrusters"] == {"on_time": "s", "on_time_start": "s"}
    assert js.DiscreteModel("m", js.Clock(1.0), lambda t, y, z, a: (z, {})).command_addresses == ()


def test_discrete_model_units_checked_at_construction():
    update = lambda t, y, z, a: (z, {})  # noqa: E731
    with pytest.raises(TypeError, match=r"DiscreteModel 'm': `units\['rw'\]` must be a unit"):
        js.DiscreteModel("m", js.Clock(1.0), update, units={"rw": 3})
    with pytest.raises(ValueError, match=r"DiscreteModel 'm': `units\['rw'\]\['u'\]`.*'N m\^'"):
        js.DiscreteModel("m", js.Clock(1.0), update, units={"rw": {"u": "N m^"}})


# --------------------------------------------------------------------------------------------------
# The user's args, the held outputs and the driver's data stay apart


# The keys of `args` that `_Seen.drift` received, recorded at trace time.
_SEEN: list = []


class _Seen(js.AbstractDynamicObject):
    """x' = -gain x + u, recording the keys of the `args` that its drift receives."""

    name: str = "plant"

    def init_state(self):
        return {"x": jnp.ones(())}

    def drift(self, t, y, args):
        _SEEN.append(sorted(args))
        return {"x": -args["gain"] * y["x"] + args["ctrl"]["u"]}


@pytest.mark.parametrize(
    "solver, kwargs",
    [(js.RK4(), {"dt": 0.1}), (js.Tsit5(), {"rtol": 1e-8, "atol": 1e-10})],
    ids=["grid", "segments"],
)
def test_held_outputs_not_in_the_users_args(solver, kwargs):
    plant = _Seen()
    _SEEN.clear()
    fsw = js.DiscreteModel(
        "ctl",
        js.Clock(0.25),
        lambda t, y, z, args: (z, {"ctrl": {"u": -0.5 * y["x"]}}),
        held0={"ctrl": {"u": jnp.zeros(())}},
    )
    args = {"gain": 0.3}
    sol = js.simulate(
        plant, plant.init_state(), 1.0, solver=solver, args=args, clocks=[fsw], **kwargs
    )
    assert args == {"gain": 0.3}  # the user's dict is not updated
    assert _SEEN and all(keys == ["ctrl", "gain"] for keys in _SEEN)
    # The held command acts: with u = 0 the state would be exp(-0.3).
    assert abs(float(sol.ys["x"][-1]) - np.exp(-0.3)) > 0.05


# --------------------------------------------------------------------------------------------------
# jit, vmap, grad through commanded runs


def _final_rate(u):
    sol = _run({"rw": {"motor_torque": js.Quantity(u, "N m")}})
    return sol.ys["hub"]["omega_BN_B"][-1]


def test_jit_vmap_grad_through_tagged_commands():
    u = jnp.asarray(U)
    eager = _final_rate(u)
    assert _same(jax.jit(_final_rate)(u), eager)
    batch = jnp.stack([u, 0.5 * u, -u])
    looped = jnp.stack([_final_rate(b) for b in batch])
    assert _same(jax.vmap(_final_rate)(batch), looped, TOL_BATCH)
    g = jax.grad(lambda u: _final_rate(u)[0])(u)
    fd = jnp.stack(
        [
            (_final_rate(u + FD_STEP * e)[0] - _final_rate(u - FD_STEP * e)[0]) / (2 * FD_STEP)
            for e in jnp.eye(3)
        ]
    )
    assert float(jnp.max(jnp.abs(g - fd))) <= TOL_FD * float(jnp.max(jnp.abs(fd)))


def test_grad_through_flight_software_commands():
    # The discrete model reads a gain from the user's args and commands the wheels from the
    # sampled body rate: the gradient flows through the held command.
    def fsw_update(t, y, z, args):
        return z, {"rw": {"motor_torque": args["gain"] * y["hub"]["omega_BN_B"]}}

    fsw = js.DiscreteModel(
        "ctl", js.Clock(0.2), fsw_update, units={"rw": {"motor_torque": "N m"}},
        held0={"rw": {"motor_torque": jnp.zeros(3)}},
    )  # fmt: skip

    def final(gain):
        sol = _run({"gain": gain}, clocks=[fsw])
        return sol.ys["hub"]["omega_BN_B"][-1, 1]

    gain = jnp.asarray(0.5)
    g = jax.jit(jax.grad(final))(gain)
    fd = (final(gain + FD_STEP) - final(gain - FD_STEP)) / (2 * FD_STEP)
    assert abs(float(g - fd)) <= TOL_FD * abs(float(fd))
    assert abs(float(fd)) > 1e-6  # the gain matters


def test_commands_of_attached_effectors_have_units():
    # An effector mounted on a panel reads `args[its name]` as a top-level one does: its command
    # units are declared (the run is not refused for a command without a unit) and checked.
    pusher = fx.ExtForceTorque(torque_B=[0.0, 0.0, 0.0], name="pusher")
    panel = fx.HingedRigidBodies(
        mass=[10.0], IPntS_S=[np.eye(3)], d=[1.0], k=[10.0], c=[1.0], dcm_HB=[np.eye(3)],
        r_HB_B=[[1.0, 0.0, 0.0]], attached={0: pusher},
    )  # fmt: skip
    hub = fx.Hub(mass=100.0, IHubPntBc_B=np.diag([10.0, 10.0, 10.0]))
    sc = fx.Spacecraft(hub, state_effectors=[panel])
    y0 = sc.init_state()
    assert sc.units()["args"]["pusher"] == pusher.units()["args"]
    torque = jnp.array([0.0, 0.0, 1.0])  # [N m] about the hinge axis
    plain = js.simulate(sc, y0, 0.1, dt=0.05, args={"pusher": {"torque_B": torque}})
    tagged = js.simulate(
        sc, y0, 0.1, dt=0.05, args={"pusher": {"torque_B": js.Quantity(torque, "N m")}}
    )
    assert _same(plain.ys, tagged.ys)
    with pytest.raises(ValueError, match=r"`args\['pusher'\]\['torque_B'\]` is given in 'N'"):
        js.simulate(sc, y0, 0.1, dt=0.05, args={"pusher": {"torque_B": js.Quantity(torque, "N")}})
