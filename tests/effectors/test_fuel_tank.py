"""FuelTank (variable mass): the tank models against Basilisk's own model objects and against
automatic differentiation, live Basilisk cross-validation of whole burns (every model, thrusters,
leaks, both depletion modes), mass balance, the rocket equation, what the energy and momentum
outputs do as mass leaves, gradients w.r.t. the fuel load, vmap, and the construction errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._actuators._thrusters import G0
from tests.reference import basilisk_fuel_tank as bft


# Same formulas as Basilisk's tank models: round-off, except the emptying model's fuel-surface
# angle theta*, a root found two ways (Basilisk: Newton from pi/2; jaxsim: closed form + one Newton
# step), whose conditioning grows like m0/(m0 - m) near full: 3.6e-14 measured at m = 0.9975 m0.
REL_TOL_MODEL = 1e-12
# Rates vs autodiff of the geometry: the same derivative by two routes, round-off.
REL_TOL_RATES = 1e-12
# Live Basilisk, same equations, same RK4, same step: round-off (measured <= 1.1e-14 on r, v, sigma,
# omega, masses, energies; 2.2e-12 on the orbital momentum of the no-gravity scenario, a small
# vector made of large cancelling terms). 1e-9 is the project's bar for Basilisk agreement.
REL_TOL_BASILISK = 1e-9
# Mass balance: RK4 integrates a flow cubic in time exactly; what is left is round-off of ~100
# additions of the mass state, relative to the mass it is added to (tank or spacecraft).
REL_TOL_MASS_BALANCE = 1e-12
# Rocket equation / analytic spin histories: RK4's truncation error at dt = 0.1 s on smooth
# solutions of time constant ~1e3 s (measured < 1e-13).
REL_TOL_ANALYTIC = 1e-11
# Gradients vs central differences (relative step 1e-4): truncation ~1e-8, round-off ~1e-11.
REL_TOL_GRAD = 1e-6
FD_REL_STEP = 1e-4
# vmap vs single runs: the same operations batched, round-off.
REL_TOL_SAME = 1e-13
# Closed forms evaluated in float64 (a few operations): a few ulps.
REL_TOL_ROUNDOFF = 1e-14
# Absolute floor for quantities that are exactly 0 in exact arithmetic (velocities of O(10) m/s,
# inertias of O(1) kg m^2, batched states of O(1)): round-off.
ABS_TOL_ZERO = 1e-14
# Basilisk's sample times are integer ns times 1e-9: one rounding.
REL_TOL_TIME = 1e-15
# Components of a finite-difference derivative treated as non-zero (round-off of the differences
# is ~1e-11 at the relative step used).
FD_NONZERO = 1e-8
# Fuel drained per step vs a numpy sum of h b_j mdot_j over the RK4 stages: the same sum of four
# terms in another order, accumulated over 32 steps on a 30 kg mass (ulp 3.6e-15 kg).
ABS_TOL_FUEL_SUM = 1e-12  # [kg]

MODELS = {
    "ConstantVolume": lambda m0, r: fx.ConstantVolumeTank(m0, 0.5, r),
    "ConstantDensity": lambda m0, r: fx.ConstantDensityTank(m0, 0.5, r),
    "Emptying": lambda m0, r: fx.EmptyingTank(m0, 0.5, r),
    "UniformBurn": lambda m0, r: fx.UniformBurnTank(m0, 0.5, 1.2, r),
    "CentrifugalBurn": lambda m0, r: fx.CentrifugalBurnTank(m0, 0.5, 1.2, r),
}
M0 = 40.0  # [kg]
R_TCT = [0.1, -0.2, 0.3]  # [m]
MASSES = [39.9, 30.0, 20.0, 10.0, 1.0]  # [kg], full excluded (a special case, tested apart)
MDOT = -0.37  # [kg/s]


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = np.abs(b).max()
    return np.abs(a - b).max() / scale if scale > 0 else np.abs(a).max()


# --------------------------------------------------------------------------------------------------
# Tank models


@pytest.mark.parametrize("name", list(MODELS))
def test_models_match_basilisk_model_objects(name):
    fuelTank = pytest.importorskip("Basilisk.simulation.fuelTank")
    model = MODELS[name](M0, R_TCT)
    b = getattr(fuelTank, "FuelTankModel" + name)()
    b.propMassInit = M0
    b.r_TcT_TInit = [[x] for x in R_TCT]
    b.radiusTankInit = 0.5
    if hasattr(b, "lengthTank"):
        b.lengthTank = 1.2
    for m in MASSES + [M0]:
        b.computeTankProps(m)
        b.computeTankPropDerivs(m, MDOT)
        p = model.props(jnp.asarray(m), jnp.asarray(MDOT))
        for ours, theirs in [
            (p.r_TcT_T, b.r_TcT_T),
            (p.rPrime_TcT_T, b.rPrime_TcT_T),
            (p.rPPrime_TcT_T, b.rPPrime_TcT_T),
            (p.ITankPntT_T, b.ITankPntT_T),
            (p.IPrimeTankPntT_T, b.IPrimeTankPntT_T),
        ]:
            err = _rel(np.ravel(ours), np.ravel(np.asarray(theirs, dtype=float)))
            assert err <= REL_TOL_MODEL, (name, m, err)


@pytest.mark.parametrize("name", list(MODELS))
def test_model_rates_are_the_derivatives_of_the_geometry(name):
    # [I]' = dI/dm mdot, r' = dr/dm mdot, r'' = d2r/dm2 mdot^2 (mdot constant): autodiff of the
    # geometry as the oracle of the closed-form rates.
    model = MODELS[name](M0, R_TCT)
    geo = lambda m: model.props(m, jnp.zeros(()))

    @jax.jit
    @jax.vmap
    def both(m):
        p = model.props(m, jnp.asarray(MDOT))
        dI = jax.jacfwd(lambda mm: geo(mm).ITankPntT_T)(m)
        dr = jax.jacfwd(lambda mm: geo(mm).r_TcT_T)(m)
        d2r = jax.jacfwd(jax.jacfwd(lambda mm: geo(mm).r_TcT_T))(m)
        return p, dI * MDOT, dr * MDOT, d2r * MDOT**2

    p, dI, dr, d2r = both(jnp.asarray(MASSES))
    for i, m in enumerate(MASSES):
        assert _rel(p.IPrimeTankPntT_T[i], dI[i]) <= REL_TOL_RATES, (name, m)
        assert _rel(p.rPrime_TcT_T[i], dr[i]) <= REL_TOL_RATES, (name, m)
        assert _rel(p.rPPrime_TcT_T[i], d2r[i]) <= REL_TOL_RATES, (name, m)
    if name == "Emptying":
        assert float(jnp.min(jnp.abs(dr[:, 2]))) > 1e-4  # the fuel's centre of mass does move


def test_emptying_tank_full_and_empty_limits():
    model = fx.EmptyingTank(M0, 0.5, R_TCT)
    full = model.props(jnp.asarray(M0), jnp.asarray(MDOT))
    np.testing.assert_array_equal(np.asarray(full.r_TcT_T), R_TCT)  # a full sphere's centre
    np.testing.assert_allclose(np.diag(full.ITankPntT_T), 0.4 * M0 * 0.25, rtol=REL_TOL_ROUNDOFF)
    for rate in (full.rPrime_TcT_T, full.rPPrime_TcT_T, full.IPrimeTankPntT_T):
        assert not np.any(np.asarray(rate))  # Basilisk's full-tank branch: no rates
    empty = model.props(jnp.asarray(0.0), jnp.asarray(0.0))
    assert np.all(np.isfinite(np.asarray(empty.r_TcT_T)))
    np.testing.assert_allclose(np.asarray(empty.ITankPntT_T), 0.0, atol=ABS_TOL_ZERO)


# --------------------------------------------------------------------------------------------------
# Live Basilisk


@pytest.fixture(scope="module", params=["five_tanks_orbit", "leak_spin"])
def basilisk_pair(request):
    pytest.importorskip("Basilisk")
    spec = bft.scenarios()[request.param]
    out = bft.run(spec)
    sc, y0, args = bft.jaxsim_scenario(spec)
    sol = js.simulate(
        sc, y0, spec["duration"], dt=spec["step"], sample_dt=spec["sample_dt"], args=args
    )
    return request.param, spec, out, sol


@pytest.mark.crossval
@pytest.mark.parametrize(
    "key",
    [
        "r_BN_N",
        "v_BN_N",
        "r_CN_N",
        "v_CN_N",
        "sigma_BN",
        "omega_BN_B",
        "massSC",
        "c_B",
        "ISC_PntB_B",
        "totOrbEnergy",
        "totRotEnergy",
        "totOrbAngMomPntN_N",
        "totRotAngMomPntC_N",
    ],
)
def test_basilisk_burns(basilisk_pair, key):
    name, _, out, sol = basilisk_pair
    np.testing.assert_allclose(np.asarray(sol.ts), out["t"], rtol=REL_TOL_TIME, atol=0.0)
    err = _rel(sol.outputs[key], out[key])
    assert err <= REL_TOL_BASILISK, f"{name} {key}: {err:.3g}"


@pytest.mark.crossval
def test_basilisk_fuel_masses(basilisk_pair):
    name, spec, out, sol = basilisk_pair
    for tk in spec["tanks"]:
        o = sol.outputs[tk["name"]]
        mass, flow = out[tk["name"] + "_fuelMass"], out[tk["name"] + "_fuelMassDot"]
        assert _rel(o["fuelMass"], mass) <= REL_TOL_BASILISK, (name, tk["name"])
        assert _rel(o["fuelMassDot"], flow) <= REL_TOL_BASILISK, (name, tk["name"])
        assert mass[0] - mass[-1] > 1e-2  # every tank drains


# --------------------------------------------------------------------------------------------------
# Burns that start and stop mid-run: Basilisk's one-stage lag of the thrusters' flow
# (`FuelTank(basilisk_lag=True)`), with on-time commands and with a ThrusterStateEffector.

# Strong thrusters with a low Isp (flows of 0.01-0.04 kg/s), so that the lag matters; an
# off-centre constant-density tank with the depletion torque.
PULSE_THRUST = {"max_thrust": [20.0, 15.0, 8.0], "Isp": [50.0, 40.0, 60.0]}
PULSE_TANK = {
    "model": "ConstantDensity",
    "prop_mass_init": 30.0,
    "radius": 0.4,
    "r_TB_B": [0.3, -0.2, 0.5],
    "update_only": False,
}
HUB_KEYS = ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B")


def _pulse_spec(state):
    from tests.effectors.test_thrusters import EDGE_COMMANDS, MIN_ON
    from tests.reference import basilisk_thrusters as bth

    # The state effector's MinOnTime rule (kappa > 1e-5) is not the schedule's: no minimum there.
    min_on = [0.0, 0.0, 0.0] if state else MIN_ON
    S = dict(bth.SCENARIO, commands=EDGE_COMMANDS, min_on_time=min_on, tank=PULSE_TANK)
    S.update(PULSE_THRUST, state=state, cutoff_frequency=[2.0, 1.0, 0.5])
    sched = fx.OnTimeSchedule(
        [c[0] for c in EDGE_COMMANDS], [c[1] for c in EDGE_COMMANDS], min_on_time=min_on
    )
    return S, sched


def _pulse_run(S, sched, lag):
    from tests.reference import basilisk_thrusters as bth

    args = (S["r_TB_B"], bth.tHat_B(S), S["max_thrust"], S["Isp"])
    if S["state"]:
        thr = fx.ThrusterStateEffector(
            *args, S["cutoff_frequency"], sched, basilisk_hold=True, name="thrusters"
        )
        state_effectors, dynamic_effectors = [thr], []
    else:
        thr = fx.Thrusters(*args, throttle=sched, name="thrusters")
        state_effectors, dynamic_effectors = [], [thr]
    tk = PULSE_TANK
    tank = fx.FuelTank(
        fx.ConstantDensityTank(tk["prop_mass_init"], tk["radius"]),
        r_TB_B=tk["r_TB_B"],
        thrusters="thrusters",
        update_only=tk["update_only"],
        basilisk_lag=lag,
        name="tank",
    )
    sc = fx.Spacecraft(
        fx.Hub(S["mass"], S["I_B"]),
        state_effectors=state_effectors + [tank],
        dynamic_effectors=dynamic_effectors,
    )
    y0 = sc.init_state(S["r_CN_N0"], S["v_CN_N0"], S["sigma_BN0"], S["omega_BN_B0"])
    return js.simulate(
        sc, y0, S["duration"], dt=S["dyn_dt"], solver=js.RK4(), sample_dt=S["sample_dt"]
    )


def _stage_flows(S, sched, lag):
    """(steps, 4) thruster flow [kg/s] the tank drains at each RK4 stage, from Basilisk's firing
    rule in numpy (command in force chosen at the step midpoint, closed window; with `lag`, the
    flow of the previous stage, 0 before the first step)."""
    h, K = S["dyn_dt"], int(round(S["duration"] / S["dyn_dt"]))
    times = np.asarray(sched.times)
    T = np.asarray(sched.effective())
    mdot = np.asarray(S["max_thrust"]) / (np.asarray(S["Isp"]) * G0)
    flows = np.zeros((K, 4))
    for k in range(K):
        c = np.searchsorted(times, (k + 0.5) * h, side="right") - 1
        for j, tau in enumerate(k * h + h * np.array([0.0, 0.5, 0.5, 1.0])):
            on = (c >= 0) & (T[c] > 0) & (tau <= times[c] + T[c])
            flows[k, j] = np.sum(np.where(on, mdot, 0.0))
    if lag:
        flat = np.concatenate([[0.0], flows.ravel()[:-1]])
        flows = flat.reshape(K, 4)
    return flows


def _drained(S, flows):
    """Fuel drained by each step [kg] under RK4's weights."""
    return S["dyn_dt"] * flows @ np.array([1.0, 2.0, 2.0, 1.0]) / 6.0


@pytest.fixture(scope="module", params=[False, True], ids=["on_time", "state_effector"])
def pulse_pair(request):
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_thrusters as bth

    S, sched = _pulse_spec(request.param)
    ref = bth.run(**S)
    sols = {lag: _pulse_run(S, sched, lag) for lag in (True, False)}
    return S, sched, ref, sols


@pytest.mark.crossval
def test_pulsed_burn_with_lag_matches_basilisk(pulse_pair):
    """On-time commands starting and stopping mid-run (ends on step ends, on a half step, inside a
    first half; MinOnTime drops) draining a tank, and the same commands through a
    ThrusterStateEffector with `basilisk_hold`: `basilisk_lag=True` equals live Basilisk.
    Measured <= 1.3e-15 relative on r, v, sigma, omega, the masses and the flow."""
    S, _, ref, sols = pulse_pair
    sol = sols[True]
    np.testing.assert_allclose(np.asarray(sol.ts), ref["t"], rtol=REL_TOL_TIME, atol=0.0)
    for key in HUB_KEYS:
        err = _rel(sol.ys["hub"][key], ref[key])
        assert err <= REL_TOL_BASILISK, f"{key}: {err:.3g}"
    assert _rel(sol.outputs["massSC"], ref["massSC"]) <= REL_TOL_BASILISK
    out = sol.outputs["tank"]
    assert _rel(out["fuelMass"], ref["fuelMass"]) <= REL_TOL_BASILISK
    assert _rel(out["fuelMassDot"], ref["fuelMassDot"]) <= REL_TOL_BASILISK
    assert ref["fuelMass"][0] - ref["fuelMass"][-1] > 0.1  # it drains


@pytest.mark.crossval
def test_default_tank_differs_from_basilisk_by_one_stage(pulse_pair):
    """The default tank drains the current stage's flow: it differs from Basilisk, step by step,
    by exactly the one-stage shift of the flow (at every burn start and cut-off)."""
    S, sched, ref, sols = pulse_pair
    fuel = np.asarray(sols[False].outputs["tank"]["fuelMass"])
    err = np.abs(fuel - ref["fuelMass"]).max()
    assert err > 1e3 * REL_TOL_BASILISK * ref["fuelMass"][0]  # the flag matters
    if not S["state"]:
        # Default minus Basilisk, per step: the fuel drained by the lagged flows minus the
        # current ones, from the firing rule (zero on steps without an edge).
        shift = np.diff(fuel - ref["fuelMass"])
        expected = _drained(S, _stage_flows(S, sched, True)) - _drained(
            S, _stage_flows(S, sched, False)
        )
        np.testing.assert_allclose(shift, expected, rtol=0.0, atol=ABS_TOL_FUEL_SUM)
        # Thruster 2's cut-off at 2.125 s, half-way through the step [2.0, 2.25] (stages 1-3 fire):
        # Basilisk's fourth stage still drains the third stage's flow, h/6 of it more than the
        # default. The 6.1 s cut-off (inside a first half) is in the series above.
        h = S["dyn_dt"]
        mdot2 = S["max_thrust"][2] / (S["Isp"][2] * G0)
        np.testing.assert_allclose(shift[8], h / 6.0 * mdot2, rtol=0.0, atol=ABS_TOL_FUEL_SUM)
        assert np.count_nonzero(np.abs(expected) > ABS_TOL_FUEL_SUM) == 9  # every edge shows


def test_basilisk_lag_drains_the_previous_stage_flow():
    """Without Basilisk: `basilisk_lag=True` drains h sum_j b_j F_{j-1} per RK4 step (F_0: the
    previous step's last stage, 0 before the run), the default h sum_j b_j F_j; pulsed commands."""
    pytest.importorskip("benchmarks.basilisk_thrusters")
    S, sched = _pulse_spec(False)
    for lag in (True, False):
        sol = _pulse_run(S, sched, lag)
        drained = -np.diff(np.asarray(sol.outputs["tank"]["fuelMass"]))
        expected = _drained(S, _stage_flows(S, sched, lag))
        np.testing.assert_allclose(drained, expected, rtol=0.0, atol=ABS_TOL_FUEL_SUM)
    assert np.abs(_drained(S, _stage_flows(S, sched, True)) - expected).max() > 1e-3


def test_basilisk_stage_options_refuse_other_solvers():
    """`basilisk_lag` (tank) and `basilisk_hold` (thruster state effector) follow RK4's stage
    sequence: any other solver, or an adaptive run, is refused at the call, naming the option."""
    thr = fx.Thrusters([[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], [10.0], [200.0], 1.0, name="thr")
    tank = fx.FuelTank(fx.ConstantVolumeTank(30.0, 0.4), thrusters="thr", basilisk_lag=True)
    sc = fx.Spacecraft(
        fx.Hub(500.0, np.eye(3) * 300.0), state_effectors=[tank], dynamic_effectors=[thr]
    )
    y0 = sc.init_state()
    assert js.simulate(sc, y0, 0.2, dt=0.1).result == js.RESULTS.successful
    with pytest.raises(ValueError, match=r"FuelTank 'tank'.*`basilisk_lag=True`.*got solver Euler"):
        js.simulate(sc, y0, 0.2, dt=0.1, solver=js.Euler())
    with pytest.raises(ValueError, match=r"`basilisk_lag=True`.*got solver Tsit5, dt=None"):
        js.simulate(sc, y0, 0.2, solver=js.Tsit5(), rtol=1e-8, atol=1e-8)
    hold = fx.ThrusterStateEffector(
        [[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], [10.0], [200.0], 5.0,
        fx.OnTimeSchedule([0.0], [[1.0]]), basilisk_hold=True, name="rcs",
    )  # fmt: skip
    sc = fx.Spacecraft(fx.Hub(500.0, np.eye(3) * 300.0), state_effectors=[hold])
    with pytest.raises(ValueError, match=r"ThrusterStateEffector 'rcs'.*`basilisk_hold=True`"):
        js.simulate(sc, sc.init_state(), 0.2, dt=0.1, solver=js.RK2())


# --------------------------------------------------------------------------------------------------
# Conservation and analytic solutions

HUB = fx.Hub(500.0, np.diag([300.0, 300.0, 300.0]))  # isotropic, CoM at B


def _thrusters(throttle=None, name="thr"):
    # Two thrusters along +x through B (no torque), 10 N and 5 N.
    return fx.Thrusters(
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]],
        [10.0, 5.0],
        [200.0, 250.0],
        throttle,
        name=name,
    )


def test_mass_balance_two_tanks_one_thruster_set():
    # Throttle cubic in time: RK4 integrates the flow exactly. Each tank drains the full flow of
    # the set (Basilisk's rule), the spacecraft loses both.
    T = 10.0
    throttle = lambda t: jnp.clip(0.2 + 0.05 * t - 0.006 * t**2 + 0.0003 * t**3, 0.0, 1.0)
    thr = _thrusters(throttle)
    a = fx.FuelTank(fx.ConstantVolumeTank(30.0, 0.4), r_TB_B=[0.2, 0, 0], thrusters="thr", name="a")
    b = fx.FuelTank(
        fx.UniformBurnTank(20.0, 0.2, 0.6), r_TB_B=[0, 0.3, 0], thrusters=("thr",), name="b"
    )
    sc = fx.Spacecraft(HUB, state_effectors=[a, b], dynamic_effectors=[thr])
    sol = js.simulate(sc, sc.init_state(), T, dt=0.1, sample_dt=T)
    u_int = 0.2 * T + 0.025 * T**2 - 0.002 * T**3 + 0.000075 * T**4  # int_0^T u dt
    drained = u_int * (10.0 / (200.0 * G0) + 5.0 / (250.0 * G0))
    for name, m0 in (("a", 30.0), ("b", 20.0)):
        got = m0 - float(sol.ys[name]["mass"][-1])
        assert abs(got - drained) <= REL_TOL_MASS_BALANCE * m0, (name, got, drained)
    m_sc = np.asarray(sol.outputs["massSC"])
    assert abs(m_sc[0] - m_sc[-1] - 2 * drained) <= REL_TOL_MASS_BALANCE * m_sc[0]


def test_tank_fed_by_a_thruster_state_effector():
    # The flow of a ThrusterStateEffector comes from its state kappa (mass_flow reads
    # mctx.states): with dkappa/dt = wc (1 - kappa) and dm/dt = -k kappa (k = F/(Isp g0)),
    # m - (k/wc) kappa + k t is a linear invariant, which RK4 keeps exactly (round-off).
    F, Isp, wc, T = 50.0, 230.0, 0.8, 10.0
    thr = fx.ThrusterStateEffector(
        [[0.0, 0.0, 0.0]],
        [[1.0, 0.0, 0.0]],
        [F],
        [Isp],
        wc,
        fx.OnTimeSchedule([0.0], [[1e3]]),
        name="thr",
    )
    tank = fx.FuelTank(fx.ConstantVolumeTank(30.0, 0.4), thrusters="thr", update_only=False)
    sc = fx.Spacecraft(HUB, state_effectors=[thr, tank])
    sol = js.simulate(sc, sc.init_state(), T, dt=0.1, sample_dt=1.0)
    k = F / (Isp * G0)
    t = np.asarray(sol.ts)
    invariant = (
        np.asarray(sol.ys["tank"]["mass"])
        - k / wc * np.asarray(sol.ys["thr"]["kappa"][:, 0])
        + k * t
    )
    np.testing.assert_allclose(invariant, 30.0, rtol=REL_TOL_MASS_BALANCE)
    assert 30.0 - float(sol.ys["tank"]["mass"][-1]) > 0.1  # it drains


@pytest.mark.parametrize("update_only", [True, False])
def test_rocket_equation(update_only):
    # Thrust through the composite CoM (tank and hub centred on B), no gravity, no rotation: the
    # CoM velocity follows Tsiolkovsky, dv = Isp g0 ln(m0 / m) per thruster of equal Isp.
    Isp, F, m_dry, m_fuel, T = 220.0, 20.0, 500.0, 60.0, 30.0
    thr = fx.Thrusters([[0.0, 0, 0]], [[1.0, 0, 0]], [F], [Isp], 1.0, name="thr")
    tank = fx.FuelTank(
        fx.ConstantDensityTank(m_fuel, 0.4), thrusters="thr", update_only=update_only
    )
    sc = fx.Spacecraft(HUB, state_effectors=[tank], dynamic_effectors=[thr])
    sol = js.simulate(sc, sc.init_state(), T, dt=0.1, sample_dt=5.0)
    t = np.asarray(sol.ts)
    m = m_dry + m_fuel - F / (Isp * G0) * t
    np.testing.assert_allclose(np.asarray(sol.outputs["massSC"]), m, rtol=REL_TOL_MASS_BALANCE)
    dv = Isp * G0 * np.log((m_dry + m_fuel) / m)
    v = np.asarray(sol.outputs["v_CN_N"])
    np.testing.assert_allclose(v[:, 0], dv, rtol=REL_TOL_ANALYTIC, atol=ABS_TOL_ZERO)
    np.testing.assert_allclose(v[:, 1:], 0.0, atol=ABS_TOL_ZERO)


@pytest.mark.parametrize("update_only", [True, False])
def test_spin_while_leaking(update_only):
    # Isotropic hub and a spherical tank centred on B, leaking: I(t) = I_hub + 2/5 m_f(t) R^2.
    # update_only (no depletion torque): the leaving fuel takes its angular momentum with it, the
    # rate stays, H = I(t) w decreases. Depletion torque on: the fuel leaves without angular
    # momentum, H is conserved and the rate grows as I(0)/I(t). Energy follows from both.
    R, m_f, leak, T, I_hub = 0.5, 50.0, 2.0, 20.0, 20.0
    tank = fx.FuelTank(fx.ConstantVolumeTank(m_f, R), leak_rate=leak, update_only=update_only)
    sc = fx.Spacecraft(fx.Hub(500.0, I_hub * np.eye(3)), state_effectors=[tank])
    w0 = np.array([0.02, -0.03, 0.05])
    sol = js.simulate(sc, sc.init_state(omega_BN_B=w0), T, dt=0.1, sample_dt=5.0)
    t = np.asarray(sol.ts)
    inertia = I_hub + 0.4 * (m_f - leak * t) * R**2
    H = np.asarray(sol.outputs["totRotAngMomPntC_N"])
    E = np.asarray(sol.outputs["totRotEnergy"])
    w = np.asarray(sol.outputs["omega_BN_B"])
    ratio = inertia / inertia[0]
    if update_only:
        np.testing.assert_allclose(w, np.broadcast_to(w0, w.shape), rtol=REL_TOL_ANALYTIC)
        np.testing.assert_allclose(
            np.linalg.norm(H, axis=1) / np.linalg.norm(H[0]), ratio, rtol=REL_TOL_ANALYTIC
        )
        np.testing.assert_allclose(E / E[0], ratio, rtol=REL_TOL_ANALYTIC)
    else:
        np.testing.assert_allclose(w, w0[None, :] / ratio[:, None], rtol=REL_TOL_ANALYTIC)
        np.testing.assert_allclose(H, np.broadcast_to(H[0], H.shape), rtol=REL_TOL_ANALYTIC)
        np.testing.assert_allclose(E / E[0], 1.0 / ratio, rtol=REL_TOL_ANALYTIC)
    assert ratio[-1] < 0.9  # the effect is not small


def test_empty_tank_stops_draining():
    # 5 kg leaking at 0.5 kg/s: empty at 10 s; then the mass stays at 0 (clamped after the step
    # that overshoots), the flow is 0 and the spacecraft is the dry hub.
    tank = fx.FuelTank(fx.ConstantVolumeTank(5.0, 0.3), r_TB_B=[1.0, 0, 0], leak_rate=0.5)
    sc = fx.Spacecraft(HUB, state_effectors=[tank])
    sol = js.simulate(sc, sc.init_state(), 20.0, dt=0.1, sample_dt=1.0)
    mass = np.asarray(sol.outputs["tank"]["fuelMass"])
    assert mass.min() == 0.0  # empty after 10 s, clamped at 0
    flow = np.asarray(sol.outputs["tank"]["fuelMassDot"])
    np.testing.assert_array_equal(flow[mass == 0.0], 0.0)  # the flow stops
    np.testing.assert_allclose(np.asarray(sol.outputs["massSC"])[-1], 500.0, rtol=REL_TOL_ROUNDOFF)


# --------------------------------------------------------------------------------------------------
# Gradients and batches w.r.t. the fuel load


def _burn(load):
    # An off-centre tank of `load` kg [traced] fed to an off-axis thruster: the final state depends
    # on the load through the mass, the centre of mass and the inertia.
    thr = fx.Thrusters([[0.3, 0.8, -0.2]], [[1.0, 0.0, 0.0]], [20.0], [220.0], 1.0, name="thr")
    tank = fx.FuelTank(
        fx.ConstantDensityTank(load, 0.4, [0.0, 0.0, 0.1]),
        r_TB_B=[0.2, -0.3, 0.5],
        thrusters="thr",
        update_only=False,
    )
    sc = fx.Spacecraft(
        fx.Hub(500.0, [[300.0, 5.0, 0], [5.0, 250.0, 0], [0, 0, 200.0]]),
        state_effectors=[tank],
        dynamic_effectors=[thr],
    )
    y0 = sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])
    sol = js.simulate(sc, y0, 5.0, dt=0.1, sample_dt=5.0)
    return jax.tree_util.tree_map(lambda a: a[-1], sol.ys)


def _flat(tree):
    return jnp.concatenate([jnp.ravel(x) for x in jax.tree_util.tree_leaves(tree)])


def test_final_state_gradient_wrt_fuel_load_matches_central_differences():
    load = 60.0
    f = js.jit(lambda m: _flat(_burn(m)))
    jac = np.asarray(js.jit(jax.jacfwd(lambda m: _flat(_burn(m))))(jnp.asarray(load)))
    h = FD_REL_STEP * load
    fd = (np.asarray(f(jnp.asarray(load + h))) - np.asarray(f(jnp.asarray(load - h)))) / (2 * h)
    big = np.abs(fd) > FD_NONZERO
    assert big.sum() >= 10  # r, v, sigma, omega and the fuel mass all depend on the load
    np.testing.assert_allclose(jac[big], fd[big], rtol=REL_TOL_GRAD)


def test_vmap_over_dispersed_fuel_loads_equals_single_runs():
    loads = jnp.array([40.0, 60.0, 80.0])
    f = js.jit(lambda m: _flat(_burn(m)))
    batch = np.asarray(js.jit(jax.vmap(lambda m: _flat(_burn(m))))(loads))
    for i, m in enumerate(loads):
        single = np.asarray(f(m))
        np.testing.assert_allclose(batch[i], single, rtol=REL_TOL_SAME, atol=ABS_TOL_ZERO)
    assert np.abs(batch[0] - batch[2]).max() > 1e-3  # the dispersion matters


# --------------------------------------------------------------------------------------------------
# Construction and outputs


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: fx.ConstantVolumeTank(0.0, 0.5),
            r"ConstantVolumeTank: `prop_mass_init` must be > 0 \[kg\]",
        ),
        (lambda: fx.EmptyingTank(10.0, -0.5), r"EmptyingTank: `radius` must be > 0 \[m\]"),
        (
            lambda: fx.UniformBurnTank(10.0, 0.5, 0.0),
            r"UniformBurnTank: `length` must be > 0 \[m\]",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), leak_rate=-1.0),
            r"`leak_rate` must be >= 0 \[kg/s\]",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), dcm_TB=2 * np.eye(3)),
            r"FuelTank: `dcm_TB` must be a proper orthonormal DCM",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), thrusters=("a", "a")),
            r"FuelTank: `thrusters` names a set twice",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), update_only=1),
            r"FuelTank: `update_only` must be a bool",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), basilisk_lag=1),
            r"FuelTank: `basilisk_lag` must be a bool",
        ),
        (
            lambda: fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5)).init_state(flow_prev=0.1),
            r"`flow_prev` needs `basilisk_lag=True`",
        ),
    ],
)
def test_construction_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_model_type_error():
    with pytest.raises(TypeError, match="FuelTank: `model` must be a tank model"):
        fx.FuelTank("ConstantVolume")


def test_spacecraft_checks_the_thruster_links():
    tank = fx.FuelTank(fx.ConstantVolumeTank(1.0, 0.5), thrusters="thr")
    with pytest.raises(
        ValueError, match=r"Spacecraft: effector 'tank' drains the mass flow of 'thr', which is not"
    ):
        fx.Spacecraft(HUB, state_effectors=[tank])
    ext = fx.ExtForceTorque(name="thr")
    with pytest.raises(ValueError, match=r"ExtForceTorque 'thr' has no `mass_flow\(mctx\)` method"):
        fx.Spacecraft(HUB, state_effectors=[tank], dynamic_effectors=[ext])


def test_init_state_outputs_and_units():
    tank = fx.FuelTank(fx.ConstantVolumeTank(12.0, 0.5, max_fuel_mass=15.0), r_TB_B=[0.1, 0, 0])
    assert float(tank.init_state()["mass"]) == 12.0
    assert float(tank.init_state(mass=3.0)["mass"]) == 3.0
    with pytest.raises(ValueError, match=r"`mass` must be >= 0 \[kg\]"):
        tank.init_state(mass=-1.0)
    sc = fx.Spacecraft(HUB, state_effectors=[tank])
    y0 = sc.init_state(effector_states={"tank": {"mass": 6.0}})
    out = sc.outputs(0.0, y0, None)["tank"]
    assert float(out["fuelMass"]) == 6.0 and float(out["maxFuelMass"]) == 15.0
    np.testing.assert_allclose(np.asarray(out["r_TcB_B"]), [0.1, 0, 0])
    np.testing.assert_allclose(np.diag(np.asarray(out["ITankPntT_B"])), 0.4 * 6.0 * 0.25)
    assert sc.units()["ys"]["tank"] == {"mass": "kg"}
    assert set(sc.units()["outputs"]["tank"]) == set(out)
    mp_c = np.asarray(sc.outputs(0.0, y0, None)["c_B"])
    np.testing.assert_allclose(mp_c, [6.0 * 0.1 / 506.0, 0, 0], rtol=REL_TOL_ROUNDOFF)
