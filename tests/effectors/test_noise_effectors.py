"""Noise state effectors (OU, IGBM), exponential atmosphere + drag with stochastic density, and the
stochastic disturbance torque: closed forms, statistics, coupling through `ctx.states`, validation."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim.kinematics import mrp_to_dcm


# Closed-form loads evaluated from the same inputs: float64 round-off only.
FORMULA_RTOL = 1e-13
# Prescribed-noise replays of exact recursions (omega = h/I sum x): round-off of 1000 additions.
REPLAY_ATOL = 1e-13
# Ensemble checks: within this many standard errors (fixed key: deterministic).
N_SE = 3.0
# Basilisk's own OU-effector statistics test tolerances (test_meanRevertingNoiseStateEffector.py):
# autocorrelation 3 % rel + 0.003 abs, fitted tau 5 % rel + 0.1 abs, variance 30 % rel.
AUTOCORR_RTOL, AUTOCORR_ATOL = 0.03, 0.003
TAU_FIT_RTOL, TAU_FIT_ATOL = 0.05, 0.1
VAR_RTOL = 0.3

RHO0, H_SCALE, R_EARTH = 1.217, 8500.0, 6371e3  # [kg/m^3], [m], [m] (Basilisk test values)
MU_EARTH = 3.986004418e14  # [m^3/s^2]


def inert_hub(I=1.0):
    return fx.Hub(1.0, I * jnp.eye(3))


# --------------------------------------------------------------------------------------------------
# MeanRevertingNoise


def test_ou_diffusion_blocks_in_spacecraft():
    """noise_dim sums over effectors; each effector owns its slice; hub rows are zero."""
    a = fx.MeanRevertingNoise(tau=[1.0, 2.0], sigma=[0.1, 0.2], name="a")
    b = fx.GeometricBrownianMotion(mu=1.0, tau=3.0, sigma_st=0.3, name="b")
    sc = fx.Spacecraft(inert_hub(), state_effectors=(a, b))
    y = sc.init_state()
    assert sc.noise_dim == 3
    G = sc.diffusion(0.0, y, None)
    assert G["hub"]["r_BN_N"].shape == (3, 3) and float(jnp.abs(G["hub"]["omega_BN_B"]).max()) == 0
    np.testing.assert_allclose(
        G["a"][:, :2], np.diag([0.1, 0.2]) * np.sqrt(2 / np.array([1.0, 2.0]))
    )
    np.testing.assert_array_equal(G["a"][:, 2], 0.0)
    np.testing.assert_array_equal(G["b"][:, :2], 0.0)
    np.testing.assert_allclose(G["b"][0, 2], b.s[0] * (1 + y["b"][0]))


def test_ou_single_path_statistics_basilisk_style():
    """Basilisk's OU effector test: EM, h = 2 ms, 100 s, sigma 0.8, tau 0.1 s, sampled every step."""
    h, tau, sigma = 0.002, 0.1, 0.8
    ou = fx.MeanRevertingNoise(tau=tau, sigma=sigma, name="ou")
    sc = fx.Spacecraft(inert_hub(), state_effectors=(ou,))
    sol = js.simulate(sc, sc.init_state(), 100.0, dt=h, sample_dt=h, solver=js.EulerMaruyama(),
                      key=jr.key(0), outputs=False)  # fmt: skip
    y = 1.0 + np.asarray(sol.ys["ou"][:, 0])
    assert abs(y.mean() - 1.0) <= 0.2
    np.testing.assert_allclose(y.var(), sigma**2, rtol=VAR_RTOL)
    d = y - y.mean()
    phi = np.dot(d[1:], d[:-1]) / np.dot(d, d)
    assert abs(phi - np.exp(-h / tau)) <= AUTOCORR_RTOL * np.exp(-h / tau) + AUTOCORR_ATOL
    tau_hat = -h / np.log(phi)
    assert abs(tau_hat - tau) <= TAU_FIT_RTOL * tau + TAU_FIT_ATOL


@pytest.mark.parametrize(
    "kwargs, arg",
    [({"tau": 0.0}, "tau"), ({"tau": -1.0}, "tau"), ({"sigma": -0.1}, "sigma"),
     ({"tau": [1.0, 2.0], "sigma": [1.0, 2.0, 3.0]}, "n"), ({"tau": [[1.0]]}, "tau"),
     ({"x0": np.nan}, "x0")],
)  # fmt: skip
def test_ou_validation(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        fx.MeanRevertingNoise(**kwargs)


def test_ou_unit_labels_its_state_and_output():
    ou = fx.MeanRevertingNoise(tau=[1.0, 2.0], unit="N m", name="ou")
    units = js.results.model_units(fx.Spacecraft(inert_hub(), state_effectors=(ou,)))
    assert units["ys"]["ou"] == "N m" and units["outputs"]["ou"] == {"x": "N m"}
    assert fx.MeanRevertingNoise().units()["ys"] == "-"  # default: a relative correction
    with pytest.raises(TypeError, match="MeanRevertingNoise: `unit`"):
        fx.MeanRevertingNoise(unit=1.0)


def test_ou_init_state_override_shape():
    ou = fx.MeanRevertingNoise(tau=[1.0, 2.0])
    np.testing.assert_array_equal(ou.init_state(), 0.0)
    np.testing.assert_array_equal(ou.init_state([0.5, 0.25]), [0.5, 0.25])
    with pytest.raises(ValueError, match="x"):
        ou.init_state([1.0, 2.0, 3.0])


# --------------------------------------------------------------------------------------------------
# GeometricBrownianMotion (IGBM)


@pytest.fixture(scope="module")
def igbm_ensemble():
    mu, tau, sig = 1.2, 0.5, 0.3
    g = fx.GeometricBrownianMotion(mu=mu, tau=tau, sigma_st=sig, delta0=0.0, name="igbm")
    sc = fx.Spacecraft(inert_hub(), state_effectors=(g,))
    y0 = sc.init_state()
    run = lambda k: js.simulate(sc, y0, 4.0, dt=0.005, sample_dt=0.5, solver=js.Milstein(), key=k,
                                outputs=False).ys["igbm"][:, 0]  # fmt: skip
    delta = np.asarray(jax.jit(jax.vmap(run))(jr.split(jr.key(9), 3000)))
    return (mu, tau, sig), 1.0 + delta


def test_igbm_mean_relaxes_exactly(igbm_ensemble):
    """E[X_t] = mu + (X_0 - mu) exp(-t/tau) (linear drift, Ito)."""
    (mu, tau, sig), X = igbm_ensemble
    t = 0.5 * np.arange(X.shape[1])
    exact = mu + (1.0 - mu) * np.exp(-t / tau)
    se = np.sqrt(X.var(0, ddof=1) / X.shape[0])
    assert np.all(np.abs(X.mean(0)[1:] - exact[1:]) <= N_SE * se[1:])


def test_igbm_stationary_std(igbm_ensemble):
    """After 8 tau the std of X is sigma_st; the variance relaxes as exp(-(2/tau - s^2) t) and the
    transient is < 1e-3; allowed error: 3 SE of the sample variance (Gaussian approximation x 1.5 for
    the lognormal-like tails)."""
    (mu, tau, sig), X = igbm_ensemble
    n = X.shape[0]
    var = X[:, -1].var(ddof=1)
    assert abs(var - sig**2) <= N_SE * 1.5 * sig**2 * np.sqrt(2.0 / (n - 1)), (var, sig**2)


def test_igbm_rejected_by_additive_solver():
    g = fx.GeometricBrownianMotion(tau=1.0, sigma_st=0.2, name="igbm")
    sc = fx.Spacecraft(inert_hub(), state_effectors=(g,))
    with pytest.raises(ValueError, match="additive"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.SRA1(), key=jr.key(0))


@pytest.mark.parametrize(
    "kwargs, arg",
    [({"mu": 0.0}, "mu"), ({"tau": 0.0}, "tau"), ({"sigma_st": -1.0}, "sigma_st")],
)
def test_igbm_validation(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        fx.GeometricBrownianMotion(**kwargs)


def test_igbm_default_initial_state_is_mean():
    g = fx.GeometricBrownianMotion(mu=[0.9, 1.1], tau=2.0, sigma_st=0.1)
    np.testing.assert_allclose(g.init_state(), [-0.1, 0.1])


# --------------------------------------------------------------------------------------------------
# ExponentialAtmosphere and Drag


def _drag_spacecraft(delta, r_cp_B=(0.1, -0.2, 0.3), sigma_BN=(0.1, 0.2, -0.3)):
    atmo = fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH)
    drag = fx.Drag(atmo, 2.2, 1.5, r_cp_B, density_correction="rho_noise")
    noise = fx.MeanRevertingNoise(tau=108.0, sigma=0.15, x0=delta, name="rho_noise")
    sc = fx.Spacecraft(fx.Hub(750.0, jnp.diag(jnp.array([900.0, 800.0, 600.0]))),
                       state_effectors=(noise,), dynamic_effectors=(drag,))  # fmt: skip
    r_N = jnp.array([R_EARTH + 300e3, 1000.0, -2000.0])
    v_N = jnp.array([10.0, 7700.0, 100.0])
    return sc, drag, sc.init_state(r_N, v_N, sigma_BN, (0.01, -0.02, 0.03))


@pytest.mark.parametrize("delta", [0.0, 0.3, -0.4, -1.5])
def test_drag_force_formula(delta):
    sc, drag, y = _drag_spacecraft(delta)
    ctx = sc.context(0.0, y, None)
    ft = drag.force_torque(ctx)
    r, v = np.asarray(y["hub"]["r_BN_N"]), np.asarray(y["hub"]["v_BN_N"])
    h = np.linalg.norm(r) - R_EARTH
    rho = max(0.0, RHO0 * np.exp(-h / H_SCALE) * (1 + delta))
    v_B = np.asarray(mrp_to_dcm(jnp.array([0.1, 0.2, -0.3]))) @ v
    F_expected = -0.5 * 2.2 * 1.5 * rho * np.dot(v_B, v_B) * v_B / np.linalg.norm(v_B)
    if rho == 0.0:
        np.testing.assert_array_equal(ft.force_B, 0.0)
    else:
        np.testing.assert_allclose(ft.force_B, F_expected, rtol=FORMULA_RTOL)
        np.testing.assert_allclose(np.linalg.norm(ft.force_B), 0.5 * 2.2 * 1.5 * rho * v @ v,
                                   rtol=FORMULA_RTOL)  # fmt: skip
    np.testing.assert_allclose(ft.torque_B, np.cross([0.1, -0.2, 0.3], F_expected),
                               rtol=FORMULA_RTOL, atol=1e-300)  # fmt: skip
    np.testing.assert_array_equal(ft.force_N, 0.0)


@pytest.mark.parametrize("delta, eps", [(0.2, -0.1), (0.0, 0.4), (0.1, -1.3)])
def test_drag_coefficient_correction(delta, eps):
    """Cd_eff = max(0, Cd (1 + eps)) from a second, independent OU state; density as before."""
    atmo = fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH)
    drag = fx.Drag(atmo, 2.2, 1.5, density_correction="rho_noise", cd_correction="cd_noise")
    rho_noise = fx.MeanRevertingNoise(tau=108.0, sigma=0.15, x0=delta, name="rho_noise")
    cd_noise = fx.MeanRevertingNoise(tau=50.0, sigma=0.05, x0=eps, name="cd_noise")
    sc = fx.Spacecraft(fx.Hub(750.0, jnp.diag(jnp.array([900.0, 800.0, 600.0]))),
                       state_effectors=(rho_noise, cd_noise), dynamic_effectors=(drag,))  # fmt: skip
    assert sc.noise_dim == 2 and drag.reads_states == ("rho_noise", "cd_noise")
    r_N = jnp.array([R_EARTH + 300e3, 1000.0, -2000.0])
    v_N = jnp.array([10.0, 7700.0, 100.0])
    y = sc.init_state(r_N, v_N)
    out = drag.outputs(sc.context(0.0, y, None))
    h = np.linalg.norm(np.asarray(y["hub"]["r_BN_N"])) - R_EARTH
    rho = max(0.0, RHO0 * np.exp(-h / H_SCALE) * (1 + delta))
    cd = max(0.0, 2.2 * (1 + eps))
    np.testing.assert_allclose(out["Cd"], cd, rtol=FORMULA_RTOL)
    v = np.asarray(y["hub"]["v_BN_N"])
    np.testing.assert_allclose(np.linalg.norm(out["force_B"]), 0.5 * cd * 1.5 * rho * v @ v,
                               rtol=FORMULA_RTOL, atol=1e-300)  # fmt: skip
    with pytest.raises(ValueError, match="cd_correction_index"):
        fx.Drag(atmo, 2.2, 1.5, cd_correction="cd_noise", cd_correction_index=-2)


def test_drag_enters_hub_acceleration():
    """No gravity, CoM at B: dv/dt = [NB] F_B / m."""
    sc, drag, y = _drag_spacecraft(0.2, r_cp_B=(0.0, 0.0, 0.0))
    dy = sc.drift(0.0, y, None)
    F_B = drag.force_torque(sc.context(0.0, y, None)).force_B
    dcm_NB = mrp_to_dcm(y["hub"]["sigma_BN"]).T
    np.testing.assert_allclose(dy["hub"]["v_BN_N"], dcm_NB @ F_B / 750.0, rtol=1e-12)


def test_drag_zero_speed_has_zero_force_and_finite_gradient():
    sc, drag, y = _drag_spacecraft(0.0)
    y["hub"]["v_BN_N"] = jnp.zeros(3)

    def fx_of_v(v):
        yy = {**y, "hub": {**y["hub"], "v_BN_N": v}}
        return drag.force_torque(sc.context(0.0, yy, None)).force_B[0]

    assert float(fx_of_v(jnp.zeros(3))) == 0.0
    assert np.all(np.isfinite(np.asarray(jax.grad(fx_of_v)(jnp.zeros(3)))))


def test_atmosphere_window():
    atmo = fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH, min_altitude=100e3, max_altitude=1000e3)
    assert float(atmo.density(jnp.array([R_EARTH + 50e3, 0.0, 0.0]))) == 0.0
    assert float(atmo.density(jnp.array([R_EARTH + 2000e3, 0.0, 0.0]))) == 0.0
    np.testing.assert_allclose(atmo.density(jnp.array([0.0, R_EARTH + 400e3, 0.0])),
                               RHO0 * np.exp(-400e3 / H_SCALE), rtol=FORMULA_RTOL)  # fmt: skip


def test_stochastic_drag_sigma_zero_is_deterministic():
    """With sigma = 0 the Euler-Maruyama SDE run is the Euler ODE run, bit for bit; with noise the
    density correction changes the along-track velocity."""
    atmo = fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH)

    def build(sigma):
        noise = fx.MeanRevertingNoise(tau=108.0, sigma=sigma, name="rho_noise")
        drag = fx.Drag(atmo, 2.2, 10.0, density_correction="rho_noise")
        return fx.Spacecraft(fx.Hub(100.0, jnp.eye(3)), state_effectors=(noise,),
                             dynamic_effectors=(drag,), gravity=(fx.PointMassGravity(MU_EARTH),))  # fmt: skip

    r0 = jnp.array([R_EARTH + 200e3, 0.0, 0.0])
    v0 = jnp.array([0.0, np.sqrt(MU_EARTH / (R_EARTH + 200e3)), 0.0])
    det = build(0.0)
    y0 = det.init_state(r0, v0)
    a = js.simulate(det, y0, 100.0, dt=1.0, solver=js.EulerMaruyama(), key=jr.key(0), outputs=False)
    b = js.simulate(det, y0, 100.0, dt=1.0, solver=js.Euler(), outputs=False)
    np.testing.assert_array_equal(a.ys["hub"]["v_BN_N"], b.ys["hub"]["v_BN_N"])

    # Same structure, so the compiled EM run is reused: only the noise amplitude differs.
    c = js.simulate(build(0.5), y0, 100.0, dt=1.0, solver=js.EulerMaruyama(), key=jr.key(0),
                    outputs=False)  # fmt: skip
    dv = np.abs(np.asarray(c.ys["hub"]["v_BN_N"][-1] - a.ys["hub"]["v_BN_N"][-1]))
    assert dv[1] > 0.0
    np.testing.assert_array_equal(c.ys["rho_noise"][0], 0.0)


@pytest.mark.parametrize(
    "kwargs, arg",
    [({"Cd": 0.0}, "Cd"), ({"area": -1.0}, "area"), ({"r_cp_B": [1.0, 2.0]}, "r_cp_B"),
     ({"density_correction_index": -1}, "density_correction_index"),
     ({"atmosphere": 1.0}, "atmosphere")],
)  # fmt: skip
def test_drag_validation(kwargs, arg):
    base = {"atmosphere": fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH), "Cd": 2.2, "area": 1.0}
    with pytest.raises(ValueError, match=arg):
        fx.Drag(**{**base, **kwargs})


@pytest.mark.parametrize(
    "kwargs, arg",
    [({"rho0": -1.0}, "rho0"), ({"scale_height": 0.0}, "scale_height"),
     ({"planet_radius": -1.0}, "planet_radius"),
     ({"min_altitude": 10.0, "max_altitude": 5.0}, "max_altitude")],
)  # fmt: skip
def test_atmosphere_validation(kwargs, arg):
    base = {"rho0": RHO0, "scale_height": H_SCALE, "planet_radius": R_EARTH}
    with pytest.raises(ValueError, match=arg):
        fx.ExponentialAtmosphere(**{**base, **kwargs})


def test_spacecraft_checks_named_noise_state_exists():
    atmo = fx.ExponentialAtmosphere(RHO0, H_SCALE, R_EARTH)
    drag = fx.Drag(atmo, 2.2, 1.0, density_correction="missing")
    with pytest.raises(ValueError, match="missing"):
        fx.Spacecraft(inert_hub(), dynamic_effectors=(drag,))


# --------------------------------------------------------------------------------------------------
# StochasticTorque


def test_stochastic_torque_replay_isotropic_hub():
    """Isotropic inertia I: omega x I omega = 0, so Euler-Maruyama gives omega_n = (h/I) sum_k x_k."""
    h, n, I = 0.01, 1000, 2.0
    noise = fx.MeanRevertingNoise(tau=0.5, sigma=[1e-3, 2e-3, 3e-3], name="torque_noise")
    sc = fx.Spacecraft(inert_hub(I), state_effectors=(noise,),
                       dynamic_effectors=(fx.StochasticTorque("torque_noise"),))  # fmt: skip
    dW = np.sqrt(h) * np.random.default_rng(3).standard_normal((n, 3))
    sol = js.simulate(sc, sc.init_state(), n * h, dt=h, sample_dt=h, solver=js.EulerMaruyama(),
                      dW=dW, outputs=False)  # fmt: skip
    x = np.asarray(sol.ys["torque_noise"])
    omega = np.concatenate([np.zeros((1, 3)), h / I * np.cumsum(x[:-1], axis=0)])
    np.testing.assert_allclose(sol.ys["hub"]["omega_BN_B"], omega, rtol=0, atol=REPLAY_ATOL)
    assert float(np.abs(omega).max()) > 1e-5


def test_stochastic_torque_validation():
    with pytest.raises(ValueError, match="index"):
        fx.StochasticTorque("torque_noise", index=-1)
    with pytest.raises(ValueError, match="noise_state"):
        fx.StochasticTorque("")
    with pytest.raises(ValueError, match="torque_noise"):
        fx.Spacecraft(inert_hub(), dynamic_effectors=(fx.StochasticTorque("torque_noise"),))
    short = fx.MeanRevertingNoise(tau=[1.0, 1.0], name="torque_noise")
    sc = fx.Spacecraft(inert_hub(), state_effectors=(short,),
                       dynamic_effectors=(fx.StochasticTorque("torque_noise"),))  # fmt: skip
    with pytest.raises(ValueError, match="index"):
        sc.drift(0.0, sc.init_state(), None)
