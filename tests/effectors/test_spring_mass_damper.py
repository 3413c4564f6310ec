"""SpringMassDampers (fuel slosh): Basilisk reference, conservation, energy balance with dampers,
closed forms on a heavy hub, free particle and zero load, vectorization, the final-state gradient,
validation. (jit, vmap, the drift's gradients w.r.t. k, c and mass, mass-property rates, refused
states and commands, units: the generic suite, `tests/effectors/test_generic.py`.)"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from tests.effectors._support import (
    HEAVY_HUB,
    MU_EARTH,
    assert_basilisk_run,
    assert_conserved,
    assert_damped_energy_balance,
    assert_grad_matches_fd,
    assert_logged,
    assert_split_equal,
    jit_drift,
    random_hub_state,
    tracked_run,
)
from tests.helpers import hub_from_spec, load_reference, simulate_spec


# Basilisk runs the same RK4 in float64: agreement is at round-off. Positions/velocities: relative
# error scaled by the largest reference norm of the run (per-sample norms; v_BN_N components cross
# zero); attitude, rates, rho, rhoDot: absolute.
REL_TOL_RV = 1e-9
ABS_TOL_STATES = 1e-9
# Logged mass properties and energies vs Basilisk's log: same formulas, round-off only.
REL_TOL_LOGGED = 1e-11
# Conservation over 5 s at h = 2 ms (particle frequency sqrt(k/m) <= 3.2 rad/s, hub spin 0.17 rad/s):
# RK4 energy error ~(omega h)^4 per unit time, well below 1e-12.
REL_TOL_CONSERVED = 1e-12
# Energy balance with dampers (W integrated in the same RK4 state): residual = RK4 error, relative
# to the dissipated energy W(T).
REL_TOL_DISSIPATION = 1e-9
# Heavy hub (1e12 kg, 1e12 kg m^2): the particle decouples up to m/M ~ 1e-11; RK4 phase error at
# omega h = 6e-3 is ~1e-14 per step. Tolerance on rho relative to the amplitude.
REL_TOL_ANALYTIC = 1e-8
# Two one-particle effectors vs one two-particle effector: only the summation order differs.
TOL_VECTORIZED = 1e-14
# Central differences with relative step 1e-4: truncation ~1e-8, round-off ~1e-11.
REL_TOL_GRAD = 1e-6
FD_REL_STEP = 1e-4


def particles_from_spec(spec, **overrides):
    P = spec["effectors"][0]["particles"]
    g = lambda key: np.array([p[key] for p in P])
    kw = dict(c=g("c_Ns_per_m"), rho0=g("rho0_m"), rhoDot0=g("rhoDot0_mps"), name="slosh")
    kw.update(overrides)
    return fx.SpringMassDampers(g("mass_kg"), g("k_N_per_m"), g("pHat_B"), g("r_PB_B_m"), **kw)


# --------------------------------------------------------------------------------------------------
# Basilisk reference (spring_mass_damper, full 20 s run: the compile, not the 4000 steps, dominates)


@pytest.fixture(scope="module")
def reference_run():
    spec, ref = load_reference("spring_mass_damper")
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=(particles_from_spec(spec),))
    return spec, ref, simulate_spec(sc, spec)


def test_basilisk_reference(reference_run):
    spec, ref, sol = reference_run
    particles = {
        ("slosh", key): np.stack([ref[f"particle{i + 1}_{key}"] for i in range(2)], axis=-1)
        for key in ["rho", "rhoDot"]
    }
    rv = ("r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N")
    assert_basilisk_run(sol, ref, particles, REL_TOL_RV, ABS_TOL_STATES, rv_keys=rv)
    assert_logged(sol.outputs, ref, REL_TOL_LOGGED)


def test_particle_position_output(reference_run):
    spec, ref, sol = reference_run
    P = spec["effectors"][0]["particles"]
    r = np.asarray(sol.outputs["slosh"]["r_PcB_B"])
    rho = np.asarray(sol.outputs["slosh"]["rho"])
    for i, p in enumerate(P):
        expected = np.asarray(p["r_PB_B_m"]) + rho[:, i : i + 1] * np.asarray(p["pHat_B"])
        np.testing.assert_allclose(r[:, i], expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        sol.outputs["slosh"]["spring_force"], -100.0 * rho, rtol=1e-15, atol=1e-15
    )


# --------------------------------------------------------------------------------------------------
# One compiled scenario (2 particles + point-mass gravity + dissipated-work state), many parameter sets


DT = 0.002  # [s]
T_END = 5.0  # [s]
SAMPLE_DT = 0.25  # [s]


def tracked_scenario(*, c=(0.0, 0.0), k=(100.0, 100.0), rho0=(0.05, -0.025), rhoDot0=(0.0, 0.01),
                     **hub):  # fmt: skip
    """The spec's particles (`k` a traced leaf) on `tracked_run`'s hub (CoM at B) and orbit."""
    spec, _ = load_reference("spring_mass_damper")
    slosh = particles_from_spec(spec, c=np.asarray(c), rho0=rho0, rhoDot0=rhoDot0)
    slosh = eqx.tree_at(lambda p: p.k, slosh, jnp.asarray(k, dtype=float))
    sol = tracked_run(slosh, dt=DT, t_end=T_END, sample_dt=SAMPLE_DT, r_BcB_B=(0.0, 0.0, 0.0),
                      **hub)  # fmt: skip
    return slosh, sol


@pytest.mark.parametrize("mu", [0.0, MU_EARTH], ids=["free_space", "orbit"])
def test_conservation_undamped(mu):
    _, sol = tracked_scenario(mu=mu)
    out = sol.outputs
    assert_conserved(out, REL_TOL_CONSERVED)
    assert np.all(np.asarray(out["W"]) == 0.0)
    assert np.ptp(np.asarray(out["slosh"]["rho"]), axis=0).min() > 0.02  # particles really move


@pytest.mark.parametrize("mu", [0.0, MU_EARTH], ids=["free_space", "orbit"])
def test_damped_energy_balance(mu):
    _, sol = tracked_scenario(mu=mu, c=(15.0, 17.0))
    assert_damped_energy_balance(sol.outputs, 0.01, REL_TOL_DISSIPATION, REL_TOL_CONSERVED)


HEAVY = HEAVY_HUB


def test_slosh_frequency_heavy_hub():
    """rho(t) = rho0 cos(sqrt(k/m) t) + rhoDot0 sin(sqrt(k/m) t) / sqrt(k/m) on a hub that does not move."""
    k = np.array([100.0, 60.0])
    rho0, rhoDot0 = np.array([0.05, -0.025]), np.array([0.0, 0.01])
    slosh, sol = tracked_scenario(k=k, rho0=rho0, rhoDot0=rhoDot0, **HEAVY)
    wn = np.sqrt(k / np.asarray(slosh.mass))
    t = np.asarray(sol.ts)[:, None]
    expected = rho0 * np.cos(wn * t) + rhoDot0 / wn * np.sin(wn * t)
    amp = np.sqrt(rho0**2 + (rhoDot0 / wn) ** 2)
    err = np.abs(np.asarray(sol.outputs["slosh"]["rho"]) - expected).max(axis=0)
    assert np.all(err <= REL_TOL_ANALYTIC * amp), err / amp


def test_free_particle_heavy_hub():
    """k = c = 0: the particle slides at constant rate, rho = rho0 + rhoDot0 t."""
    rho0, rhoDot0 = np.array([0.05, -0.025]), np.array([0.02, -0.01])
    _, sol = tracked_scenario(k=(0.0, 0.0), rho0=rho0, rhoDot0=rhoDot0, **HEAVY)
    t = np.asarray(sol.ts)[:, None]
    err = np.abs(np.asarray(sol.outputs["slosh"]["rho"]) - (rho0 + rhoDot0 * t)).max()
    assert err <= REL_TOL_ANALYTIC * np.abs(rho0 + rhoDot0 * T_END).max()


def test_zero_load_stays_at_rest():
    _, sol = tracked_scenario(
        k=(0.0, 0.0), rho0=(0.0, 0.0), rhoDot0=(0.0, 0.0), **{**HEAVY, "hub_mass": 750.0}
    )
    ys = sol.ys["sc"]
    for leaf in [
        ys["slosh"]["rho"],
        ys["slosh"]["rhoDot"],
        ys["hub"]["omega_BN_B"],
        ys["hub"]["v_BN_N"],
    ]:
        assert np.all(np.asarray(leaf) == 0.0)


# --------------------------------------------------------------------------------------------------
# Vectorization, gradients


def test_two_effectors_equal_one_vectorized():
    """Drift of one 2-particle effector equals that of two 1-particle effectors at several states."""
    spec, _ = load_reference("spring_mass_damper")
    hub = hub_from_spec(spec)
    both = particles_from_spec(spec, c=np.array([3.0, 7.0]))
    split = tuple(
        fx.SpringMassDampers(
            both.mass[i], both.k[i], both.pHat_B[i], both.r_PB_B[i], c=both.c[i], name=f"s{i}"
        )
        for i in range(2)
    )
    sc1 = fx.Spacecraft(hub, state_effectors=(both,))
    sc2 = fx.Spacecraft(hub, state_effectors=split)
    rng = np.random.default_rng(3)
    for _ in range(3):
        rho, rhoDot = rng.normal(0, 0.05, 2), rng.normal(0, 0.05, 2)
        hub_state = random_hub_state(rng)
        y1 = sc1.init_state(**hub_state, effector_states={"slosh": {"rho": rho, "rhoDot": rhoDot}})
        y2 = sc2.init_state(
            **hub_state,
            effector_states={
                f"s{i}": {"rho": rho[i : i + 1], "rhoDot": rhoDot[i : i + 1]} for i in range(2)
            },
        )
        d = jit_drift(sc1, 0.0, y1), jit_drift(sc2, 0.0, y2)
        assert_split_equal(d, ["s0", "s1"], "slosh", ["rho", "rhoDot"], TOL_VECTORIZED)


@pytest.mark.slow
def test_gradients_match_finite_differences():
    """jax.grad of a final-state scalar w.r.t. k, c and mass vs central differences (the forward
    evaluations reuse the compiled tracked scenario)."""
    slosh0, _ = tracked_scenario(c=(4.0, 6.0))
    h = load_reference("spring_mass_damper")[0]["hub"]
    hub = dict(hub_mass=h["mHub_kg"], hub_inertia=h["IHubPntBc_B_kgm2"], r_BcB_B=h["r_BcB_B_m"])

    def final_scalar(params):
        slosh = eqx.tree_at(lambda p: (p.k, p.c, p.mass), slosh0, params)
        ys = tracked_run(slosh, dt=DT, t_end=T_END, sample_dt=SAMPLE_DT, **hub).ys["sc"]
        return (
            ys["slosh"]["rho"][-1, 0]
            - 0.7 * ys["slosh"]["rhoDot"][-1, 1]
            + 3.0 * ys["hub"]["omega_BN_B"][-1, 1]
        )

    p0 = (slosh0.k, slosh0.c, slosh0.mass)
    assert_grad_matches_fd(final_scalar, p0, FD_REL_STEP, REL_TOL_GRAD, ("k", "c", "mass"))


# --------------------------------------------------------------------------------------------------
# Validation


GOOD = dict(mass=[10.0, 20.0], k=100.0, pHat_B=[1.0, 0.0, 0.0], r_PB_B=[[0.1, 0, 0], [0, 0, 0.1]])


@pytest.mark.parametrize(
    "arg, value",
    [
        ("mass", [10.0, 0.0]),
        ("mass", [10.0, -1.0]),
        ("mass", [10.0, np.inf]),
        ("k", -1.0),
        ("k", [1.0, 2.0, 3.0]),
        ("c", [-1.0, 0.0]),
        ("pHat_B", [1.0, 1.0, 0.0]),
        ("pHat_B", [[1.0, 0.0]]),
        ("r_PB_B", [0.0, np.nan, 0.0]),
        ("rho0", [0.0, 0.0, 0.0]),
        ("rhoDot0", np.nan),
        ("name", 3),
    ],
)
def test_validation_errors(arg, value):
    with pytest.raises(ValueError, match=arg):
        fx.SpringMassDampers(**{**GOOD, arg: value})


def test_broadcast_and_init_state():
    s = fx.SpringMassDampers(**GOOD)
    assert s.num_particles == 2 and s.pHat_B.shape == (2, 3) and s.k.shape == (2,)
    x = s.init_state(rho=0.01)
    np.testing.assert_array_equal(x["rho"], [0.01, 0.01])
    with pytest.raises(ValueError, match="rhoDot"):
        s.init_state(rhoDot=[0.0, 0.0, 0.0])
