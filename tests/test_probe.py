"""A hostile probe of the public API (issue #33): one case per class of silent wrong answer or
unclear failure that was found, each asserting the corrected behaviour (each failed before)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._thrusters import G0


Z3 = np.zeros(3)


# --------------------------------------------------------------------------------------------------
# Actuators beyond their range


def _thruster_sc(throttle=1.0, tank=None, F=100.0, isp=100.0, m_hub=100.0):
    thr = fx.Thrusters(
        [[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], [F], [isp], throttle=throttle, name="thr"
    )
    tanks = () if tank is None else (tank,)
    sc = fx.Spacecraft(fx.Hub(m_hub, np.eye(3)), dynamic_effectors=(thr,), state_effectors=tanks)
    return sc, sc.init_state(Z3, Z3, Z3, Z3)


# Thrust out of range after construction: the delta-v of a full-throttle burn is F/m t to round-off.
THROTTLE_RTOL = 1e-12


@pytest.mark.parametrize("u, factor", [(2.0, 1.0), (-1.0, 0.0)])
def test_throttle_changed_after_construction_is_clipped(u, factor):
    """A throttle set to 2 (or -1) with `eqx.tree_at` gives full (or no) thrust, never 2x."""
    sc, y0 = _thruster_sc(F=1.0, m_hub=1.0)
    sc = eqx.tree_at(lambda s: s.dynamic_effectors[0].throttle, sc, jnp.array([u]))
    sol = js.simulate(sc, y0, 1.0, dt=0.1)
    v = float(sol.ys["hub"]["v_BN_N"][-1, 0])
    assert v == pytest.approx(factor * 1.0, rel=THROTTLE_RTOL, abs=THROTTLE_RTOL)


def test_thrusters_starve_from_an_empty_tank():
    """A tank that empties stops its thrusters (default): the delta-v is the rocket equation's to
    within the one step in which the tank empties; Basilisk's behaviour (`starve_thrusters=False`)
    keeps the thrust."""
    F, isp, m_dry, m_fuel, dt = 100.0, 100.0, 100.0, 1.0, 0.1
    dv_rocket = isp * G0 * np.log((m_dry + m_fuel) / m_dry)
    step_dv = F / m_dry * dt  # at most one step of thrust past the empty time
    out = {}
    for starve in (True, False):
        tank = fx.FuelTank(
            fx.ConstantVolumeTank(m_fuel, 0.5), thrusters=("thr",), starve_thrusters=starve
        )
        sc, y0 = _thruster_sc(tank=tank, F=F, isp=isp, m_hub=m_dry)
        sol = js.simulate(sc, y0, 20.0, dt=dt)
        assert sol.ok
        out[starve] = sol
    starved = out[True]
    assert float(starved.ys["tank"]["mass"][-1]) == 0.0
    assert float(starved.outputs["thr"]["throttle"][-1, 0]) == 0.0
    dv = float(starved.ys["hub"]["v_BN_N"][-1, 0])
    assert abs(dv - dv_rocket) <= step_dv
    # Basilisk's rule: thrust continues on an empty tank (about 10 s more at F / m_dry).
    assert float(out[False].ys["hub"]["v_BN_N"][-1, 0]) > dv + 5.0


# --------------------------------------------------------------------------------------------------
# Physics changed after construction; singular states


def _rigid_sc(**kw):
    sc = fx.Spacecraft(fx.Hub(750.0, np.diag([900.0, 800.0, 600.0])), **kw)
    return sc


@pytest.mark.parametrize(
    "where, value, name",
    [
        (lambda s: s.hub.mass, -750.0, "hub.mass"),
        (lambda s: s.hub.IHubPntBc_B, -np.eye(3), "hub.IHubPntBc_B"),  # not positive definite
        (lambda s: s.hub.IHubPntBc_B, np.diag([1.0, 1.0, 3.0]), "hub.IHubPntBc_B"),  # 1 + 1 < 3
    ],
)
def test_physics_changed_after_construction(where, value, name):
    """A model changed with `eqx.tree_at` is refused at the call (naming the quantity) when
    concrete, and fails in the program (never ok=True, gradient NaN) when traced."""
    sc = _rigid_sc()
    y0 = sc.init_state(Z3, Z3, Z3, np.array([0.01, 0.02, 0.0]))
    bad = eqx.tree_at(where, sc, jnp.asarray(value))
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        js.simulate(bad, y0, 1.0, dt=0.1)

    def run(v):
        return js.simulate(eqx.tree_at(where, sc, v), y0, 1.0, dt=0.1, throw=False)

    sol = jax.jit(run)(jnp.asarray(value))
    assert not bool(sol.ok)
    g = jax.jit(jax.grad(lambda v: jnp.sum(run(v).ys["hub"]["omega_BN_B"][-1])))(jnp.asarray(value))
    assert np.all(np.isnan(np.asarray(g)))


def test_inertia_triangle_inequality_at_construction():
    with pytest.raises(ValueError, match="triangle inequality"):
        fx.Hub(1.0, np.diag([1.0, 1.0, 3.0]))


def test_fuel_above_max_in_y0_is_refused():
    tank = fx.FuelTank(fx.ConstantVolumeTank(10.0, 0.5), name="tank")
    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), state_effectors=(tank,))
    y0 = sc.init_state(Z3, Z3, Z3, Z3)
    y0["tank"]["mass"] = jnp.asarray(20.0)  # above max_fuel_mass = 10 kg
    with pytest.raises(ValueError, match=r"tank\.fuelMass"):
        js.simulate(sc, y0, 1.0, dt=0.1)


MU_EARTH = 3.986004418e14  # [m^3/s^2]
R_EARTH = 6.3781e6  # [m]


def test_fall_through_the_centre_fails():
    """A radial fall from rest at 7000 km passes through the body: with `min_radius` (or a
    spherical-harmonic body's radius) the run fails instead of reporting success, and the
    gradient through it is NaN."""
    g = fx.PointMassGravity(MU_EARTH, central=True)
    sc = _rigid_sc(gravity=[g], min_radius=R_EARTH)

    def run(r):
        y0 = sc.init_state(jnp.stack([r, 0.0, 0.0]), Z3, Z3, Z3)
        return js.simulate(sc, y0, 2000.0, dt=1.0, throw=False)

    sol = run(7.0e6)
    assert not bool(sol.ok)
    g_r = jax.jit(jax.grad(lambda r: run(r).ys["hub"]["r_BN_N"][-1, 0]))(7.0e6)
    assert np.isnan(float(g_r))
    # Spherical harmonics: the body's reference radius applies without `min_radius`.
    sh = fx.SphericalHarmonicGravity.j2(MU_EARTH, R_EARTH, 1.08263e-3, central=True)
    sc2 = _rigid_sc(gravity=[sh])
    y0 = sc2.init_state(np.array([7.0e6, 0.0, 0.0]), Z3, Z3, Z3)
    assert not bool(js.simulate(sc2, y0, 2000.0, dt=1.0, throw=False).ok)
    # A circular orbit above the surface is untouched.
    v = np.sqrt(MU_EARTH / 7.0e6)
    y1 = sc.init_state(np.array([7.0e6, 0.0, 0.0]), np.array([0.0, v, 0.0]), Z3, Z3)
    assert bool(js.simulate(sc, y1, 2000.0, dt=1.0, throw=False).ok)


# --------------------------------------------------------------------------------------------------
# Deep crashes and hangs: a clear error naming the argument


def _crash_cases():
    sc = _rigid_sc()
    y0 = sc.init_state(Z3, Z3, Z3, np.array([0.01, 0.0, 0.0]))
    ev = js.Event(lambda t, y, args: y["hub"]["omega_BN_B"][0] - 1.0)
    tsit = dict(solver=js.Tsit5(), rtol=1e-6, atol=1e-9)
    return (
        sc,
        y0,
        {
            "t1 vector": (lambda: js.simulate(sc, y0, jnp.array([1.0, 2.0]), dt=0.1), "`t1`"),
            "rtol vector": (
                lambda: js.simulate(sc, y0, 1.0, **{**tsit, "rtol": jnp.array([1e-6, 1e-6])}),
                "`rtol`",
            ),
            "dtmax 0": (lambda: js.simulate(sc, y0, 1.0, dtmax=0.0, **tsit), "`dtmax`"),
            "dtmax negative": (lambda: js.simulate(sc, y0, 1.0, dtmax=-1.0, **tsit), "`dtmax`"),
            "single event": (lambda: js.simulate(sc, y0, 1.0, dt=0.1, events=ev), "`events`"),
            "args list": (lambda: js.simulate(sc, y0, 1.0, dt=0.1, args=[1.0]), "`args`"),
            # 1e10 steps: refused at once with the estimate (it ran for minutes).
            "dt tiny": (lambda: js.simulate(sc, y0, 100.0, dt=1e-8), "1e\\+10 steps"),
        },
    )


@pytest.mark.parametrize("case", list(_crash_cases()[2]))
def test_deep_crash_is_a_clear_error(case):
    fn, match = _crash_cases()[2][case]
    with pytest.raises((ValueError, TypeError), match=match):
        fn()


# --------------------------------------------------------------------------------------------------
# Campaigns that cannot lie


def test_deleted_chunk_file_is_named_before_loading(tmp_path):
    """A deleted Zarr chunk of an output read as NaN rows marked ok (and was averaged by
    `summarize_campaign`); now loading and summarising name the damaged chunk, and
    `run_campaign` recomputes it."""
    pytest.importorskip("zarr")
    import jax.random as jr

    from jaxsim import montecarlo as mc
    from tests._sharding_worker import DISPERSIONS, DT, OSC, SAMPLE_DT, T1

    def member(p):
        model = eqx.tree_at(lambda m: m.a, OSC, p["a"])
        return js.simulate(model, model.init_state(), T1, dt=DT, sample_dt=SAMPLE_DT, throw=False)

    d = tmp_path / "c"
    kw = dict(key=jr.key(5), n=4, chunk_size=2)
    full = mc.run_campaign(member, DISPERSIONS, d, **kw)
    target = d / "campaign.zarr" / "outputs.outputs.x" / "c" / "1"
    files = [p for p in target.rglob("*") if p.is_file()] if target.is_dir() else [target]
    for f in files:
        f.unlink()
    with pytest.raises(ValueError, match="chunk 1 .* damaged"):
        mc.load_campaign(d)
    with pytest.raises(ValueError, match="chunk 1 .* damaged"):
        mc.summarize_campaign(d)
    with pytest.warns(mc.CampaignWarning, match="chunk 1"):
        again = mc.run_campaign(member, DISPERSIONS, d, **kw)
    for a, b in zip(jax.tree.leaves(again.outputs), jax.tree.leaves(full.outputs)):
        np.testing.assert_array_equal(a, b)


def test_member_returning_a_string_is_refused():
    import jax.random as jr

    from jaxsim import montecarlo as mc
    from tests._sharding_worker import DISPERSIONS

    with pytest.raises(TypeError, match=r"\['s'\] must be an array"):
        mc.run_batch(lambda p: {"v": p["a"], "s": "abc"}, DISPERSIONS, key=jr.key(0), n=2)


def test_clock_period_in_the_wrong_unit_is_refused_at_once():
    """A clock of period 1e-8 s over 100 s (1e10 ticks) listed ticks for minutes; now refused
    with the estimate before anything runs."""
    thr = fx.Thrusters([[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], [1.0], [100.0], name="thr")
    sc = fx.Spacecraft(fx.Hub(750.0, np.diag([900.0, 800.0, 600.0])), dynamic_effectors=(thr,))
    y0 = sc.init_state(Z3, Z3, Z3, Z3)
    fsw = fx.OnTimeFSW(js.Clock("1/100000000"), lambda t, y, a: jnp.zeros(1), 1, thrusters="thr")
    with pytest.raises(ValueError, match="1e\\+10 times"):
        js.simulate(sc, y0, 100.0, dt=0.1, clocks=[fsw])


def test_normal_mass_dispersion_members_with_mass_le_0_fail():
    """`mc.Normal` on a hub mass draws members with mass <= 0: they are failed members (the
    traced physical check), the others succeed."""
    import jax.random as jr

    from jaxsim import montecarlo as mc

    sc = _rigid_sc()
    y0 = sc.init_state(Z3, Z3, Z3, np.array([0.01, 0.02, 0.0]))

    def member(p):
        model = eqx.tree_at(lambda s: s.hub.mass, sc, p["m"])
        return js.simulate(model, y0, 0.5, dt=0.1, outputs=False, throw=False)

    disp = mc.Dispersions({"m": mc.Normal(1.0, 2.0, unit="kg")})
    res = mc.run_batch(member, disp, key=jr.key(3), n=16)
    m = np.asarray(res.params["m"])
    ok = np.asarray(res.ok)
    assert np.any(m <= 0) and np.any(m > 0)
    np.testing.assert_array_equal(ok, m > 0)
