"""Attitude estimation (issue 43 item 3): Basilisk's `cssWlsEst` and `sunlineEKF`, and a
multiplicative EKF.

Oracles: live Basilisk 2.12.1 (`cssWlsEst` in a task at 0.5 s on the same sensor values, every
coverage case: eclipse, one, two, up to five sensors; weighted and unweighted; `sunlineEKF` over
40 updates with an eclipse, extended and classical updates); the exact heading of
noise-free cosine sensors; the MEKF's consistency over a Monte Carlo (the normalized estimation
error squared averages the state dimension 6 and the innovations' NIS the measurement dimension
3, inside chi-square bounds) on a truth generated with the gyro model the filter assumes
(Crassidis & Junkins sec. 7.2.1), and its failure to be consistent when mistuned; central
differences of a loss through a filter run in its noise parameters.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors._fsw._estimation import _rotation_quaternion, nees, quat_multiply


# cssWlsEst against live Basilisk: same formulas, double precision; the heading and residuals
# to round-off of O(10) operations on O(1) values, the rate through arccos near 1 divided by
# dt = 0.5 s (conditioning 1/sin(angle) ~ 10 at these headings): measured 5e-16, 6e-16, 4.9e-15.
CSS_TOL = 1e-14
CSS_RATE_TOL = 5e-14
# sunlineEKF against live Basilisk: the same updates; Basilisk inverts H P H^T + R by Gauss-Jordan
# elimination, jaxsim solves it by LU: S has condition ~|H P H^T| / qObsVal ~ 1e5 here, so the
# gains differ by ~1e-16 x 1e5 per update (measured over 40 updates: state 2.1e-12, covariance
# 1.5e-12 relative, post-fit residuals 1.4e-12).
SUNLINE_TOL = 1e-10
# Noise-free cosines on >= 3 sensors: the least squares are exact up to round-off.
CSS_EXACT_TOL = 1e-13
# Monte Carlo of the filter: M runs; the run-averaged NEES (6 dof) at each time inside the
# two-sided 99 % chi-square bounds (normal approximation: 6 +- 2.576 sqrt(12 / M)) for at least
# NEES_INSIDE of the times (consistent: measured 1.0; mistuned: 0.05 and 0.14), and its mean over
# all times within NEES_MEAN_TOL of 6 (measured 6.02; mistuned 15.2 and 4.4).
MC_RUNS = 64
NEES_INSIDE = 0.9
NEES_MEAN_TOL = 0.3
NIS_MEAN_TOL = 0.25  # NIS (3 dof) averaged over all updates: measured 3.06; mistuned 4.4, 1.2
# Central differences of the filter-error loss in log(sigma_v): step 1e-4 (truncation ~1e-9
# relative, round-off of a loss O(1e-8) summed over 100 steps ~1e-12 relative).
FD_STEP = 1e-4
FD_RTOL = 1e-6


def _constellation():
    rng = np.random.default_rng(3)
    el = np.deg2rad(30.0)
    az = np.deg2rad(np.arange(8) * 45.0 + 10.0)
    up = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    normals = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el) * up], 1)
    return normals, 1.0 + 0.05 * rng.standard_normal(8), rng


def _css_values():
    """Noisy cosines of a sun heading turning in the body, with an eclipse and ticks seen by two
    and by one sensor."""
    normals, cbias, rng = _constellation()
    times = np.arange(12) * 0.5
    values = []
    for k, t in enumerate(times):
        s = np.array([np.cos(0.2 * t), np.sin(0.2 * t), 0.3])
        s /= np.linalg.norm(s)
        v = np.maximum(cbias * (normals @ s), 0.0) + 0.01 * rng.standard_normal(8)
        if k == 5:
            v[:] = 0.0  # eclipse
        if k == 7:
            v = np.where(np.arange(8) < 2, 0.5, 0.0)  # two sensors: minimum norm
        if k == 8:
            v = np.where(np.arange(8) < 1, 0.7, 0.0)  # one sensor
        values.append(v)
    return normals, cbias, times, values


def _basilisk_task(module_class, normals, cbias, settings):
    """A Basilisk simulation with `module_class` in a 0.5 s task, reading the constellation
    (`CSSConfigMsg`) and a `CSSArraySensorMsg`; `(sim, module, write(values, t))`."""
    from Basilisk.architecture import messaging
    from Basilisk.utilities import SimulationBaseClass, macros

    sim = SimulationBaseClass.SimBaseClass()
    sim.CreateNewProcess("fsw").addTask(sim.CreateNewTask("fsw", macros.sec2nano(0.5)))
    module = module_class()
    sim.AddModelToTask("fsw", module)
    config = messaging.CSSConfigMsgPayload()
    units = []
    for n, c in zip(normals, cbias):
        unit = messaging.CSSUnitConfigMsgPayload()
        unit.CBias, unit.nHat_B = float(c), n.tolist()
        units.append(unit)
    config.cssVals, config.nCSS = units, len(units)
    config_msg = messaging.CSSConfigMsg().write(config)
    data_msg = messaging.CSSArraySensorMsg()
    module.cssConfigInMsg.subscribeTo(config_msg)
    module.cssDataInMsg.subscribeTo(data_msg)
    for name, value in settings.items():
        setattr(module, name, value)
    pad = [0.0] * (messaging.MAX_NUM_CSS_SENSORS - len(normals))

    def write(values, t):  # the sensors write at the call time
        payload = messaging.CSSArraySensorMsgPayload()
        payload.CosValue = list(values) + pad
        data_msg.write(payload, macros.sec2nano(t))

    return sim, module, write


def _step_to(sim, t):
    from Basilisk.utilities import macros

    sim.ConfigureStopTime(macros.sec2nano(t))
    sim.ExecuteSimulation()


def _basilisk_css(normals, cbias, times, values, thresh, use_weights):
    from Basilisk.fswAlgorithms import cssWlsEst

    settings = {"sensorUseThresh": thresh, "useWeights": int(use_weights)}
    sim, module, write = _basilisk_task(cssWlsEst.cssWlsEst, normals, cbias, settings)
    sim.InitializeSimulation()
    out = []
    for t, v in zip(times, values):
        write(v, t)
        _step_to(sim, t)
        nav = module.navStateOutMsg.read()
        out.append(
            (
                np.array(nav.vehSunPntBdy),
                np.array(nav.omega_BN_B),
                np.array(module.filtStatus.postFitRes)[: len(normals)],
                int(module.numActiveCss),
            )
        )
    return out


@pytest.mark.parametrize("use_weights", [True, False])
def test_css_wls_matches_live_basilisk(use_weights):
    pytest.importorskip("Basilisk")
    normals, cbias, times, values = _css_values()
    thresh = 0.1
    ref = _basilisk_css(normals, cbias, times, values, thresh, use_weights)
    est = fx.CSSWlsEst(normals, CBias=cbias, sensorUseThresh=thresh, useWeights=use_weights)
    step = jax.jit(est.__call__)
    z = est.init_state()
    for t, v, (heading, omega, res, count) in zip(times, values, ref):
        z, out = step(t, v, z)
        assert int(out["numObs"]) == count
        np.testing.assert_allclose(out["vehSunPntBdy"], heading, rtol=0, atol=CSS_TOL)
        np.testing.assert_allclose(out["omega_BN_B"], omega, rtol=0, atol=CSS_RATE_TOL)
        np.testing.assert_allclose(out["postFitRes"], res, rtol=0, atol=CSS_TOL)
    # The cases were all met: eclipse (zero heading), one and two sensors, least squares.
    counts = [r[3] for r in ref]
    assert {0, 1, 2} <= set(counts) and max(counts) >= 4


def _basilisk_sunline(normals, cbias, times, values, settings, state0, covar0):
    from Basilisk.fswAlgorithms import sunlineEKF

    sim, module, write = _basilisk_task(sunlineEKF.sunlineEKF, normals, cbias, settings)
    module.state = list(state0)
    module.covar = np.asarray(covar0).ravel().tolist()
    sim.InitializeSimulation()
    out = []
    for t, v in zip(times, values):
        write(v, t)
        _step_to(sim, t)
        filt = module.filtDataOutMsg.read()
        out.append(
            (
                np.array(module.navStateOutMsg.read().vehSunPntBdy),
                np.array(filt.state)[:6],
                np.array(filt.covar)[:36].reshape(6, 6),
                np.array(filt.postFitRes)[: module.numObs],
            )
        )
    return out


@pytest.mark.parametrize("switch", [5.0, 0.1], ids=["extended", "classical-first"])
def test_sunline_ekf_matches_live_basilisk(switch):
    """40 updates at 0.5 s with an eclipse of two calls; eKFSwitch 5 (extended updates from the
    start) and 0.1 (classical updates until the covariance falls below it)."""
    pytest.importorskip("Basilisk")
    normals, cbias, rng = _constellation()
    times = np.arange(40) * 0.5
    values = []
    for k, t in enumerate(times):
        s = np.array([np.cos(0.05 * t), np.sin(0.05 * t), 0.4])
        s /= np.linalg.norm(s)
        v = np.maximum(cbias * (normals @ s), 0.0) + 0.002 * rng.standard_normal(8)
        if k in (12, 13):
            v[:] = 0.0
        values.append(v)
    settings = {"sensorUseThresh": 0.1, "qProcVal": 1e-6, "qObsVal": 4e-6, "eKFSwitch": switch}
    state0 = [1.0, 0.1, 0.5, 0.0, 0.01, 0.0]
    covar0 = np.diag([0.4, 0.4, 0.4, 0.004, 0.004, 0.004])
    ref = _basilisk_sunline(normals, cbias, times, values, settings, state0, covar0)
    ekf = fx.SunlineEKF(normals, CBias=cbias, **settings)
    step = jax.jit(ekf.__call__)
    z = ekf.init_state(state0, covar0)
    for t, v, (heading, state, covar, post) in zip(times, values, ref):
        z, out = step(t, v, z)
        np.testing.assert_allclose(out["vehSunPntBdy"], heading, rtol=0, atol=SUNLINE_TOL)
        np.testing.assert_allclose(out["state"], state, rtol=0, atol=SUNLINE_TOL)
        scale = np.abs(covar).max()
        np.testing.assert_allclose(out["covar"], covar, rtol=0, atol=SUNLINE_TOL * scale)
        used = np.asarray(out["postFitRes"])[np.asarray(v) > 0.1]
        np.testing.assert_allclose(used, post, rtol=0, atol=SUNLINE_TOL)
    # The heading converged to the truth (noise 0.002 on the cosines).
    truth = np.array([np.cos(0.05 * times[-1]), np.sin(0.05 * times[-1]), 0.4])
    assert np.linalg.norm(np.asarray(out["vehSunPntBdy"]) - truth / np.linalg.norm(truth)) < 0.01


def test_css_wls_exact_heading_and_time_rule():
    normals, cbias, _ = _constellation()
    est = fx.CSSWlsEst(normals, CBias=cbias)
    sun = np.array([0.3, -0.5, 0.8])
    sun /= np.linalg.norm(sun)
    cos = np.maximum(cbias * (normals @ sun), 0.0)
    assert np.sum(cos > 0) >= 3
    z = est.init_state()
    z, out = est(0.0, cos, z)
    np.testing.assert_allclose(out["vehSunPntBdy"], sun, rtol=0, atol=CSS_EXACT_TOL)
    # Basilisk's time rule: a first call at t = 0 stores prior time 0, so the next call has
    # dt = 0 and no rate; the third call differences the headings.
    z, out = est(1.0, cos, z)
    assert float(jnp.max(jnp.abs(out["omega_BN_B"]))) == 0.0
    c, s = np.cos(0.01), np.sin(0.01)
    turned = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ sun
    z, out = est(2.0, np.maximum(cbias * (normals @ turned), 0.0), z)
    rate = np.asarray(out["omega_BN_B"])
    angle = np.arccos(sun @ turned)  # the heading turned by this angle in 1 s
    assert abs(np.linalg.norm(rate) - angle) < CSS_EXACT_TOL
    np.testing.assert_allclose(
        rate / np.linalg.norm(rate), np.cross(turned, sun) / np.sin(angle), atol=1e-9
    )


def test_css_wls_bad_input_refused_by_name():
    normals, _, _ = _constellation()
    with pytest.raises(ValueError, match=r"CSSWlsEst: `nHat_B`"):
        fx.CSSWlsEst(2.0 * normals)
    with pytest.raises(ValueError, match=r"CSSWlsEst: `CBias`"):
        fx.CSSWlsEst(normals, CBias=np.ones(3))
    est = fx.CSSWlsEst(normals)
    with pytest.raises(ValueError, match=r"`cos_values` \[-\] must have shape \(8,\)"):
        est(0.0, np.ones(7), est.init_state())
    with pytest.raises(ValueError, match=r"AttitudeMEKF: `sigma_st`"):
        fx.AttitudeMEKF(1e-5, 1e-8, -1e-4)


# The filter's Monte Carlo: a gyro with angle random walk SV and bias walk SU, a star tracker
# every ST_EVERY steps with noise SST per axis, a body turning at OMEGA.
DT, STEPS, ST_EVERY = 0.5, 400, 10
SV, SU, SST = 1e-5 * np.sqrt(10.0), 1e-8 * np.sqrt(10.0), 1e-4
OMEGA = jnp.array([0.01, -0.02, 0.015])
P0 = jnp.diag(jnp.array([1e-4] * 3 + [1e-10] * 3))


def _filter_run(key, sv, su, sst, steps=STEPS):
    """`(nees, nis, err)` per step of one run (nis NaN between star-tracker updates)."""
    f = fx.AttitudeMEKF(sv, su, sst)
    k0, k1 = jax.random.split(key)
    q0 = jnp.array([1.0, 0.0, 0.0, 0.0])
    beta0 = jnp.array([1e-5, -2e-5, 5e-6])
    e0 = jax.random.multivariate_normal(k0, jnp.zeros(6), P0)  # initial error drawn from P0
    z = f.init_state(quat_multiply(_rotation_quaternion(-e0[:3]), q0), beta0 - e0[3:], P0)

    def step(carry, inputs):
        q, beta, z = carry
        k, n = inputs
        kv, ku, ks = jax.random.split(k, 3)
        # Crassidis & Junkins sec. 7.2.1: the discrete gyro and bias-walk model.
        beta1 = beta + SU * jnp.sqrt(DT) * jax.random.normal(ku, (3,))
        noise = jnp.sqrt(SV**2 / DT + SU**2 * DT / 12.0) * jax.random.normal(kv, (3,))
        measured = OMEGA + 0.5 * (beta + beta1) + noise
        q1 = quat_multiply(_rotation_quaternion(OMEGA * DT), q)
        z = f.propagate(z, measured, DT)
        q_st = quat_multiply(_rotation_quaternion(SST * jax.random.normal(ks, (3,))), q1)
        z_upd, nu, S = f.update(z, q_st)
        due = n % ST_EVERY == ST_EVERY - 1
        z = jax.tree.map(lambda a, b: jnp.where(due, a, b), z_upd, z)
        nis = jnp.where(due, nu @ jnp.linalg.solve(S, nu), jnp.nan)
        err = f.error(z, q1, beta1)
        return (q1, beta1, z), (nees(err, z["P"]), nis, err)

    keys = jax.random.split(k1, steps)
    _, out = jax.lax.scan(step, (q0, beta0, z), (keys, jnp.arange(steps)))
    return out


_RUNS = jax.jit(jax.vmap(_filter_run, in_axes=(0, None, None, None)))


def _consistency(sv, su, sst):
    keys = jax.random.split(jax.random.key(0), MC_RUNS)
    ne, ni, _ = (np.asarray(a) for a in _RUNS(keys, sv, su, sst))
    anees = ne.mean(axis=0)
    half = 2.576 * np.sqrt(12.0 / MC_RUNS)
    inside = np.mean((anees > 6.0 - half) & (anees < 6.0 + half))
    nis = ni[:, ~np.isnan(ni[0])]
    return inside, float(ne.mean()), float(nis.mean())


def test_mekf_consistent_over_monte_carlo():
    inside, mean_nees, mean_nis = _consistency(SV, SU, SST)
    assert inside >= NEES_INSIDE, inside
    assert abs(mean_nees - 6.0) < NEES_MEAN_TOL, mean_nees
    assert abs(mean_nis - 3.0) < NIS_MEAN_TOL, mean_nis


@pytest.mark.parametrize("mistuned", ["gyro noise halved", "star tracker noise doubled"])
def test_mekf_mistuned_is_detected(mistuned):
    """The consistency test can fail: the same truth filtered with a wrong noise model."""
    sv, sst = (SV / 2, SST) if mistuned == "gyro noise halved" else (SV, 2 * SST)
    inside, mean_nees, mean_nis = _consistency(sv, SU, sst)
    assert inside < NEES_INSIDE
    assert abs(mean_nees - 6.0) > NEES_MEAN_TOL
    assert abs(mean_nis - 3.0) > NIS_MEAN_TOL


def test_mekf_gradient_in_noise_parameter_matches_central_differences():
    keys = jax.random.split(jax.random.key(1), 4)

    def loss(log_sv):
        runs = jax.vmap(lambda k: _filter_run(k, jnp.exp(log_sv), SU, SST, steps=100)[2])(keys)
        return jnp.mean(runs[..., :3] ** 2)

    x = jnp.log(SV)
    g = jax.grad(loss)(x)
    fd = (loss(x + FD_STEP) - loss(x - FD_STEP)) / (2 * FD_STEP)
    assert abs(float(g) / float(fd) - 1.0) < FD_RTOL, (float(g), float(fd))
