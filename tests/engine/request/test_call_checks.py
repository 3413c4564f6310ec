"""`simulate`'s arguments checked at the call, and parameter sweeps that compile once.

Every bad input gets a `ValueError`/`TypeError` naming the argument and the value before anything
is traced; tolerated inputs (an int seed, float32 or int initial states, lists and Python floats in
`args` or in a model) give the same result as their canonical form. The sweep tests count XLA
compilations (`jax_log_compiles`) over 20 values set with `eqx.tree_at` or given in `args`.
"""

import re

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim._request._commands import EVERY_KEY, check_commands


I_HUB = np.diag([10.0, 20.0, 30.0])
# Three orthogonal wheels named "wheels" (not the default "rw" of flight software and examples).
WHEEL_AXES = np.eye(3)
WHEEL_JS = [0.1, 0.1, 0.1]


def make_sc(name="sc", mass=100.0):
    return fx.Spacecraft(
        fx.Hub(mass, I_HUB, [0.0, 0.05, 0.1]),
        state_effectors=(fx.ReactionWheels(WHEEL_AXES, WHEEL_JS, name="wheels"),),
        # A force through B, off the CoM: the hub mass sets both accelerations.
        dynamic_effectors=(fx.ExtForceTorque(force_B=[1.0, 0.0, 0.0], name="ext"),),
        name=name,
    )


def y0_of(sc):
    return sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])


class Decay(js.AbstractDynamicObject):
    """$\\dot x = -k x + u$ (two components), `u = args["u"]` when given (a user model: it reads
    any key of `args`, so its `args` are not checked)."""

    k: jax.Array  # [1/s]
    name: str = eqx.field(static=True)

    def __init__(self, k=1.0, name="decay"):
        self.k = jnp.asarray(k, dtype=float)
        self.name = name

    def init_state(self):
        return {"x": jnp.array([1.0, -2.0])}

    def drift(self, t, y, args):
        u = 0.0 if args is None else args.get("u", 0.0)
        return {"x": -self.k * y["x"] + u}


class NoisyDecay(Decay):
    """`Decay` with additive noise `0.1 dW` on each component."""

    @property
    def noise_dim(self):
        return 2

    def diffusion(self, t, y, args):
        return {"x": 0.1 * jnp.eye(2)}


DT = 0.1
T1 = 1.0


def rk4_decay(k, u, x0, n):
    """RK4's exact iterate for $\\dot x = -k x + u$: the fixed point $u/k$ is a fixed point of the
    step, and a deviation from it is multiplied by $R(-k h)$ per step."""
    z = -k * DT
    R = 1.0 + z + z**2 / 2 + z**3 / 6 + z**4 / 24
    xs = u / k
    return xs + (np.asarray(x0) - xs) * R**n


# The RK4 iterate is evaluated in another order than the solver's stages: round-off of 10 steps.
RK4_ORACLE_TOL = 1e-14


def run_sc(sc=None, **kw):
    sc = make_sc() if sc is None else sc
    y0 = kw.pop("y0", None)
    return js.simulate(sc, y0_of(sc) if y0 is None else y0, kw.pop("t1", 1.0), **{"dt": 0.5, **kw})


# --------------------------------------------------------------------------------------------------
# Times and tolerances


@pytest.mark.parametrize(
    "kw, arg, value",
    [
        ({"t1": np.inf}, "t1", "inf"),
        ({"t1": 1.0, "t0": np.nan}, "t0", "nan"),
        ({"t1": -np.inf}, "t1", "-inf"),
        ({"t1": None, "ts": np.array([0.0, 0.5, np.inf])}, "ts", "inf"),
    ],
)
def test_non_finite_times_are_refused(kw, arg, value):
    # On main, t1 = inf returned "successful" with num_steps = -2**63.
    with pytest.raises(ValueError, match=rf"simulate: `{arg}` \[s\] .*finite.*{value}"):
        run_sc(**kw)


@pytest.mark.parametrize(
    "rtol, atol, arg, value",
    [(-1.0, 1e-9, "rtol", "-1.0"), (1e-9, -1e-12, "atol", "-1e-12"), (np.nan, 1e-9, "rtol", "nan")],
)
def test_negative_or_nan_tolerances_are_refused(rtol, atol, arg, value):
    # On main, rtol = -1 was accepted (117 m error after an orbit).
    with pytest.raises(
        ValueError, match=rf"simulate: `{arg}` \[.*\] must be finite and >= 0; got {value}"
    ):
        run_sc(solver=js.Tsit5(), dt=None, rtol=rtol, atol=atol)


def test_zero_rtol_and_atol_together_are_refused():
    with pytest.raises(
        ValueError, match=r"`rtol` \[-\] and `atol` .* not both be 0.*rtol=0.0, atol=0.0"
    ):
        run_sc(solver=js.Tsit5(), dt=None, rtol=0.0, atol=0.0)


# --------------------------------------------------------------------------------------------------
# Solver and key


@pytest.mark.parametrize(
    "solver, hint",
    [(js.RK4, "js.RK4()"), (js.Tsit5, "js.Tsit5()"), (dfx.Tsit5, "diffrax.Tsit5()")],
)
def test_solver_class_is_refused_with_the_instance_to_pass(solver, hint):
    with pytest.raises(
        TypeError,
        match=rf"`solver` must be a solver instance; got the class .*pass `{re.escape(hint)}`",
    ):
        run_sc(solver=solver)


def test_solver_of_another_kind_is_refused():
    with pytest.raises(TypeError, match=r"`solver` must be a jaxsim solver .*got str \('rk4'\)"):
        run_sc(solver="rk4")


def test_int_seed_is_the_key_of_that_seed():
    model = NoisyDecay()
    kw = dict(dt=DT, solver=js.EulerMaruyama(), outputs=False)
    by_seed = js.simulate(model, model.init_state(), T1, key=7, **kw)
    by_key = js.simulate(model, model.init_state(), T1, key=jax.random.key(7), **kw)
    other = js.simulate(model, model.init_state(), T1, key=8, **kw)
    np.testing.assert_array_equal(by_seed.ys["x"], by_key.ys["x"])
    assert not np.array_equal(by_seed.ys["x"], other.ys["x"])  # the seed is used
    # A seed traced under vmap is converted the same way.
    seeds = jnp.array([7, 8])
    batch = jax.vmap(lambda s: js.simulate(model, model.init_state(), T1, key=s, **kw).ys["x"])(
        seeds
    )
    np.testing.assert_array_equal(batch[0], by_seed.ys["x"])
    np.testing.assert_array_equal(batch[1], other.ys["x"])


@pytest.mark.parametrize(
    "key, shown",
    [
        ("seed", "str: 'seed'"),
        (1.5, "float: 1.5"),
        (True, "True"),
        (jnp.zeros(3), "shape \\(3,\\)"),
    ],
)
def test_keys_of_another_kind_are_refused(key, shown):
    model = NoisyDecay()
    with pytest.raises(TypeError, match=rf"`key` must be a jax.random key .*int seed.*{shown}"):
        js.simulate(model, model.init_state(), T1, dt=DT, solver=js.EulerMaruyama(), key=key)


# --------------------------------------------------------------------------------------------------
# Initial state


def test_y0_leaf_of_wrong_shape_is_named():
    sc = make_sc()
    y0 = y0_of(sc)
    y0["hub"]["r_BN_N"] = jnp.zeros(2)
    with pytest.raises(
        ValueError, match=r"`y0\['hub'\]\['r_BN_N'\]` must have shape \(3,\).*got shape \(2,\)"
    ):
        run_sc(sc, y0=y0)


def test_float32_and_int_y0_leaves_are_cast_to_float64():
    # On main: "carry input and carry output must have equal types".
    model = Decay(0.7)
    ref = js.simulate(model, {"x": jnp.array([1.0, -2.0])}, T1, dt=DT, outputs=False)
    ints = js.simulate(model, {"x": jnp.array([1, -2])}, T1, dt=DT, outputs=False)
    np.testing.assert_array_equal(ints.ys["x"], ref.ys["x"])
    x32 = jnp.array([0.1, -2.3], dtype=jnp.float32)
    f32 = js.simulate(model, {"x": x32}, T1, dt=DT, outputs=False)
    f64 = js.simulate(model, {"x": x32.astype(jnp.float64)}, T1, dt=DT, outputs=False)
    assert f32.ys["x"].dtype == jnp.float64
    np.testing.assert_array_equal(f32.ys["x"], f64.ys["x"])


def test_y0_leaf_that_cannot_be_cast_is_refused():
    model = Decay()
    with pytest.raises(TypeError, match=r"`y0\['x'\]` must have dtype float64.*got complex128"):
        js.simulate(model, {"x": jnp.array([1.0, 2.0j])}, T1, dt=DT)


def test_effector_states_of_wrong_shape_are_refused_at_init_state():
    sc = make_sc()
    with pytest.raises(
        ValueError,
        match=r"Spacecraft.init_state: `effector_states\['wheels'\]\['Omega'\]` must have shape "
        r"\(3,\).*got shape \(2,\)",
    ):
        sc.init_state(effector_states={"wheels": {"Omega": jnp.zeros(2)}})
    with pytest.raises(ValueError, match=r"`effector_states\['wheels'\]` must have the structure"):
        sc.init_state(effector_states={"wheels": {"Omeg": jnp.zeros(3)}})
    y = sc.init_state(effector_states={"wheels": {"Omega": np.array([1, 2, 3])}})
    assert y["wheels"]["Omega"].dtype == jnp.float64


# --------------------------------------------------------------------------------------------------
# Commands in args


def test_command_spec_of_a_spacecraft_lists_its_effectors():
    sc = make_sc()
    assert sc.command_spec() == {
        "wheels": {"motor_torque": (3,)},
        "ext": {"force_N": (3,), "force_B": (3,), "torque_B": (3,)},
    }
    assert sc.reads_only_commands
    assert Decay().command_spec() is None and not Decay().reads_only_commands


def test_args_address_of_no_effector_is_refused():
    # On main, commands for "rw" were dropped silently (the wheels are named "wheels").
    with pytest.raises(
        ValueError, match=r"`args` has unknown address\(es\) \['rw'\].*\['ext', 'wheels'\]"
    ):
        run_sc(args={"rw": {"motor_torque": jnp.ones(3)}})


def test_args_unknown_command_key_is_refused():
    # On main, {"motor_torq": ...} was ignored.
    with pytest.raises(
        ValueError,
        match=r"`args\['wheels'\]` has unknown command key\(s\) \['motor_torq'\].*\['motor_torque'\]",
    ):
        run_sc(args={"wheels": {"motor_torq": jnp.ones(3)}})


def test_args_command_of_wrong_shape_or_kind_is_refused():
    with pytest.raises(
        ValueError,
        match=r"`args\['wheels'\]\['motor_torque'\]` must have shape \(3,\).*got shape \(2,\)",
    ):
        run_sc(args={"wheels": {"motor_torque": jnp.ones(2)}})
    with pytest.raises(
        ValueError, match=r"`args\['wheels'\]` must be a dict of commands.*got float"
    ):
        run_sc(args={"wheels": 0.1})


def test_args_of_a_system_are_checked_per_routed_object():
    system = js.System([make_sc("a"), make_sc("b")])
    y0 = system.init_state()
    with pytest.raises(ValueError, match=r"`args\['a'\]\['wheels'\]` has unknown command key"):
        js.simulate(system, y0, 1.0, dt=0.5, args={"a": {"wheels": {"torque": jnp.ones(3)}}})
    with pytest.raises(ValueError, match=r"`args` has unknown address\(es\) \['rw'\]"):
        js.simulate(system, y0, 1.0, dt=0.5, args={"a": {}, "rw": {"motor_torque": jnp.ones(3)}})


def test_args_of_a_user_model_are_not_checked():
    # A user model declares nothing (command_spec() is None): any key may be read.
    model = Decay(0.5)
    sol = js.simulate(model, model.init_state(), T1, dt=DT, args={"u": 0.3, "mine": "x"})
    np.testing.assert_allclose(
        sol.ys["x"][-1], rk4_decay(0.5, 0.3, [1.0, -2.0], 10), rtol=0, atol=RK4_ORACLE_TOL
    )


def test_unknown_top_level_key_is_allowed_when_discrete_models_or_events_read_it():
    sc = make_sc()
    check_commands(sc, {"gain": 2.0}, readers=frozenset({"gain"}))
    check_commands(sc, {"gain": 2.0}, readers=EVERY_KEY)
    for readers in (frozenset(), frozenset({"other"})):
        with pytest.raises(ValueError, match=r"unknown address\(es\) \['gain'\]"):
            check_commands(sc, {"gain": 2.0}, readers=readers)


def _reads_gain(t, y, z, a):
    return z, {"wheels": {"motor_torque": a["gain"] * jnp.zeros(3)}}


@pytest.mark.parametrize("with_clock", [False, True])
def test_misspelt_address_is_refused_with_clocks_and_events_too(with_clock):
    """A misspelt command address was refused on the plain path only: with a clock or an event
    (which may read `args`) it was ignored. Now a key is allowed only when something reads it."""
    extra = (
        {"clocks": [js.DiscreteModel("ctrl", js.Clock(0.5), lambda t, y, z, a: (z, {}))]}
        if with_clock
        else {"events": [js.Event(lambda t, y, a: t - 0.7)]}
    )
    with pytest.raises(ValueError, match=r"`args` has unknown address\(es\) \['rw'\]"):
        run_sc(args={"rw": {"motor_torque": jnp.ones(3)}}, **extra)
    system = js.System([make_sc("a"), make_sc("b")])
    with pytest.raises(ValueError, match=r"`args` has unknown address\(es\) \['rw'\]"):
        js.simulate(
            system, system.init_state(), 1.0, dt=0.5, args={"rw": {"motor_torque": jnp.ones(3)}},
            **extra,
        )  # fmt: skip
    # A key that the flight software reads is allowed.
    fsw = js.DiscreteModel("ctrl", js.Clock(0.5), _reads_gain)
    assert bool(run_sc(args={"gain": 2.0}, clocks=[fsw]).ok)


def _reads_other(t, y, z, a):
    return z, {"wheels": {"motor_torque": a["other"] * jnp.zeros(3)}}


def test_kept_probe_of_what_is_read_is_per_function():
    """What discrete models read is found once per structure and kept (repeated calls do not trace
    the functions again); a model of the same structure with another function is probed anew, so
    a key the first read is not allowed for the second."""
    first = js.DiscreteModel("ctrl", js.Clock(0.5), _reads_gain)
    for _ in range(2):
        assert bool(run_sc(args={"gain": 2.0}, clocks=[first]).ok)
    second = js.DiscreteModel("ctrl", js.Clock(0.5), _reads_other)
    with pytest.raises(ValueError, match=r"`args` has unknown address\(es\) \['gain'\]"):
        run_sc(args={"gain": 2.0, "other": 1.0}, clocks=[second])


def test_held_output_at_an_address_nothing_reads_is_refused():
    """Flight software writing commands to a misspelt address ("wheelz") was ignored."""
    fsw = js.DiscreteModel(
        "ctrl", js.Clock(0.5), lambda t, y, z, a: (z, {"wheelz": {"motor_torque": jnp.ones(3)}})
    )
    with pytest.raises(
        ValueError,
        match=r"discrete model 'ctrl' writes held output\(s\) at "
        r"`args\['wheelz'\]`, which no effector",
    ):
        run_sc(clocks=[fsw])
    # Its own name is its diagnostics address; another model reading an address uses it.
    diag = js.DiscreteModel("ctrl", js.Clock(0.5), lambda t, y, z, a: (z, {"ctrl": jnp.ones(3)}))
    nav = js.DiscreteModel("nav", js.Clock(0.5), lambda t, y, z, a: (z, {"att": jnp.ones(3)}))
    user = js.DiscreteModel(
        "user", js.Clock(0.5), lambda t, y, z, a: (z, {"wheels": {"motor_torque": a["att"]}}),
        sequential=True,
    )  # fmt: skip
    assert bool(run_sc(clocks=[diag, nav, user]).ok)


def test_args_that_are_not_a_dict_are_refused_when_the_model_reads_commands():
    for bad in ([1.0], "abc", 3.0):
        with pytest.raises(TypeError, match="`args` must be a dict of commands"):
            run_sc(args=bad)


def test_command_given_as_a_string_is_refused_by_name():
    with pytest.raises(
        TypeError, match=r"`args\['wheels'\]\['motor_torque'\]` must be a number or an array"
    ):
        run_sc(args={"wheels": {"motor_torque": "0.1"}})


def test_flight_software_commanding_missing_wheels_is_refused():
    # RWAttitudeFSW writes args["rw"] by default; this spacecraft's wheels are "wheels".
    sc = make_sc()
    fsw = fx.RWAttitudeFSW(
        js.Clock(0.5), fx.MRPFeedback(1.0, 2.0, I_HUB), fx.RWMotorTorque(WHEEL_AXES), np.zeros(3)
    )
    with pytest.raises(
        ValueError,
        match=r"discrete model 'fsw' writes commands to `args\['rw'\]`.*no such effector.*"
        r"\['ext', 'wheels'\]",
    ):
        js.simulate(sc, y0_of(sc), 1.0, dt=0.5, clocks=(fsw,))


def test_held_outputs_with_unknown_command_key_are_refused():
    sc = make_sc()
    fsw = js.DiscreteModel(
        "ctrl", js.Clock(0.5), lambda t, y, z, a: (z, {"wheels": {"motor_torq": jnp.zeros(3)}})
    )
    with pytest.raises(
        ValueError,
        match=r"held output of discrete model 'ctrl': `args\['wheels'\]` has unknown command "
        r"key\(s\) \['motor_torq'\]",
    ):
        js.simulate(sc, y0_of(sc), 1.0, dt=0.5, clocks=(fsw,))


# --------------------------------------------------------------------------------------------------
# Sweeps compile once


SWEEP = np.linspace(0.5, 2.4, 20)


class SweptDecay(Decay):
    """`Decay` under its own class name, so that its first `simulate` compiles in this test."""


def test_model_parameter_sweep_with_tree_at_compiles_once(compilations):
    # On main, each Python float put with eqx.tree_at compiled again (1-3 s, 18 MiB never freed).
    base = SweptDecay(1.0)
    for k in SWEEP:
        model = eqx.tree_at(lambda m: m.k, base, float(k))
        sol = js.simulate(model, model.init_state(), T1, dt=DT, outputs=False)
        np.testing.assert_allclose(
            sol.ys["x"][-1], rk4_decay(k, 0.0, [1.0, -2.0], 10), rtol=0, atol=RK4_ORACLE_TOL
        )
    assert compilations.count("jit(_run_fixed)") == 1, compilations


class ArgsDecay(Decay):
    """`Decay` under its own class name, so that its first `simulate` compiles in this test."""


def test_args_sweep_with_python_floats_and_lists_compiles_once(compilations):
    model = ArgsDecay(0.8)
    for u in SWEEP:
        sol = js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, args={"u": float(u)})
        np.testing.assert_allclose(
            sol.ys["x"][-1], rk4_decay(0.8, u, [1.0, -2.0], 10), rtol=0, atol=RK4_ORACLE_TOL
        )
    assert compilations.count("jit(_run_fixed)") == 1, compilations
    for u in SWEEP:  # a list of Python floats: one array argument
        sol = js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, args={"u": [u, -u]})
        np.testing.assert_allclose(
            sol.ys["x"][-1], rk4_decay(0.8, np.array([u, -u]), [1.0, -2.0], 10), atol=RK4_ORACLE_TOL
        )
    assert compilations.count("jit(_run_fixed)") == 2, compilations


def test_spacecraft_mass_sweep_compiles_once_and_matches_a_built_model(compilations):
    # The README's pattern: a hub parameter set with eqx.tree_at (as a float or an int).
    base = make_sc(mass=100.0)
    y0 = y0_of(base)
    cmd = {"wheels": {"motor_torque": [0.01, -0.02, 0.0]}}
    finals = []
    for m in 100.0 + 10.0 * SWEEP:
        sc = eqx.tree_at(lambda s: s.hub.mass, base, float(m))
        finals.append(js.simulate(sc, y0, 1.0, dt=0.5, args=cmd, outputs=False).ys)
    sc = eqx.tree_at(lambda s: s.hub.mass, base, 150)  # an int
    as_int = js.simulate(sc, y0, 1.0, dt=0.5, args=cmd, outputs=False).ys
    assert compilations.count("jit(_run_fixed)") == 1, compilations
    # Each value is used: the last equals a spacecraft built with that mass, and differs from the first.
    last = js.simulate(
        make_sc(mass=100.0 + 10.0 * SWEEP[-1]), y0, 1.0, dt=0.5, args=cmd, outputs=False
    )
    for key in ("v_BN_N", "omega_BN_B"):
        np.testing.assert_array_equal(finals[-1]["hub"][key], last.ys["hub"][key])
        assert not np.array_equal(finals[0]["hub"][key], finals[-1]["hub"][key])
    built = js.simulate(make_sc(mass=150.0), y0, 1.0, dt=0.5, args=cmd, outputs=False)
    for key in ("v_BN_N", "omega_BN_B"):
        np.testing.assert_array_equal(as_int["hub"][key], built.ys["hub"][key])


class JitDecay(Decay):
    """`Decay` under its own class name, so that its first `simulate` compiles in this test."""


def test_user_jaxsim_jit_traces_python_floats_of_models(compilations):
    @js.jit
    def final_x(model):
        return js.simulate(model, model.init_state(), T1, dt=DT, outputs=False).ys["x"][-1]

    base = JitDecay(1.0)
    for k in SWEEP:
        x = final_x(eqx.tree_at(lambda m: m.k, base, float(k)))
        np.testing.assert_allclose(
            x, rk4_decay(k, 0.0, [1.0, -2.0], 10), rtol=0, atol=RK4_ORACLE_TOL
        )
    assert compilations.count("jit(final_x)") == 1, compilations


class ClockedDecay(Decay):
    """`Decay` under its own class name, so that its first clocked `simulate` compiles here."""


@pytest.mark.parametrize("solver", [js.RK4(), js.Tsit5()], ids=["RK4", "Tsit5"])
def test_repeated_clocked_runs_compile_once(compilations, solver):
    # The diffrax form of a jaxsim fixed-step solver was a new class at every call: every clocked
    # fixed-step `simulate` compiled again (2-5 s each).
    model = ClockedDecay(1.0)
    clock = js.DiscreteModel("noop", js.Clock(0.5), lambda t, y, z, a: (z, {}))
    kw = {"dt": DT} if not solver.adaptive else {"rtol": 1e-8, "atol": 1e-8}
    for _ in range(3):
        js.simulate(model, model.init_state(), T1, solver=type(solver)(), clocks=[clock], **kw)
    runs = compilations.count("jit(run_clocked)") + compilations.count("jit(run_grid)")
    assert runs == 1, compilations


def test_held_outputs_routed_to_an_object_of_a_system_are_checked_there():
    system = js.System([make_sc("a"), make_sc("b")])

    def fsw(torque):
        return js.DiscreteModel(
            "ctrl", js.Clock(0.5), lambda t, y, z, a: (z, {"a": {"wheels": {torque: jnp.ones(3)}}})
        )

    with pytest.raises(ValueError, match=r"`args\['a'\]\['wheels'\]` has unknown command key"):
        js.simulate(system, system.init_state(), 1.0, dt=0.5, clocks=[fsw("motor_torq")])
    sol = js.simulate(system, system.init_state(), 1.0, dt=0.5, clocks=[fsw("motor_torque")])
    assert bool(sol.ok)
