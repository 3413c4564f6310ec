"""Hub, gravity and dynamic effectors against closed-form solutions."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim import kinematics as K


MU_EARTH = 3.986004415e14  # [m^3/s^2] Basilisk unit-test value
R_EARTH = 6378136.6  # [m]
J2_EARTH = 1.082616e-3


def elements_to_rv(a, e, i, raan, argp, f, mu=MU_EARTH):
    """Classical elements to inertial position/velocity (perifocal rotation), numpy."""
    p = a * (1 - e**2)
    r_pf = p / (1 + e * np.cos(f)) * np.array([np.cos(f), np.sin(f), 0.0])
    v_pf = np.sqrt(mu / p) * np.array([-np.sin(f), e + np.cos(f), 0.0])
    R3 = lambda x: np.array([[np.cos(x), -np.sin(x), 0], [np.sin(x), np.cos(x), 0], [0, 0, 1]])
    R1 = lambda x: np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    Q = R3(raan) @ R1(i) @ R3(argp)
    return Q @ r_pf, Q @ v_pf


def rv_to_raan_argp(r, v, mu=MU_EARTH):
    h = np.cross(r, v)
    n = np.cross([0.0, 0.0, 1.0], h)
    e_vec = np.cross(v, h) / mu - r / np.linalg.norm(r)
    raan = np.arctan2(n[1], n[0])
    argp = np.arctan2(np.dot(np.cross(n, e_vec), h) / np.linalg.norm(h), np.dot(n, e_vec))
    return raan, argp


def point_mass_spacecraft(**kw):
    hub = fx.Hub(100.0, np.diag([10.0, 12.0, 8.0]))
    return fx.Spacecraft(hub, gravity=(fx.PointMassGravity(MU_EARTH),), **kw)


# Kepler reference: Dopri8 at rtol 1e-12 over one orbit keeps the position error ~1e-9 relative.
KEPLER_REL_TOL = 1e-8


def test_two_body_vs_kepler_equation():
    a, e = 7000e3, 0.1
    r0, v0 = elements_to_rv(a, e, 0.5, 0.3, 1.1, 0.0)
    n = math.sqrt(MU_EARTH / a**3)
    T = 2 * math.pi / n
    ts = np.linspace(0.0, T, 9)
    sc = point_mass_spacecraft()
    sol = js.simulate(sc, sc.init_state(r0, v0), ts=ts, solver=js.Dopri8(), rtol=1e-12, atol=1e-6)
    for t, r in zip(ts, np.asarray(sol.outputs["r_CN_N"])):
        M = n * t
        E = M
        for _ in range(30):  # Newton on Kepler's equation E - e sin E = M
            E = E - (E - e * np.sin(E) - M) / (1 - e * np.cos(E))
        f = 2 * np.arctan2(np.sqrt(1 + e) * np.sin(E / 2), np.sqrt(1 - e) * np.cos(E / 2))
        r_exact, _ = elements_to_rv(a, e, 0.5, 0.3, 1.1, f)
        err = np.linalg.norm(r - r_exact) / np.linalg.norm(r_exact)
        assert err <= KEPLER_REL_TOL, f"t={t}: {err:.3e}"


# J2 secular rates: the fitted slope of osculating elements over one day averages the short-period
# terms; mean-vs-osculating element differences are O(J2) ~ 1e-3 of the rate. Issue bound: 1%.
J2_RATE_REL_TOL = 0.01


def test_j2_secular_raan_and_perigee_rates():
    a, e, i = 7000e3, 0.05, math.radians(30.0)
    r0, v0 = elements_to_rv(a, e, i, 0.7, 1.0, 0.0)
    earth = fx.SphericalHarmonicGravity.j2(MU_EARTH, R_EARTH, J2_EARTH)
    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), gravity=(earth,))
    ts = np.linspace(0.0, 86400.0, 1441)
    sol = js.simulate(sc, sc.init_state(r0, v0), ts=ts, solver=js.Dopri8(), rtol=1e-12, atol=1e-6)
    r, v = np.asarray(sol.outputs["r_CN_N"]), np.asarray(sol.outputs["v_CN_N"])
    raan, argp = np.array([rv_to_raan_argp(ri, vi) for ri, vi in zip(r, v)]).T
    raan_rate = np.polyfit(ts, np.unwrap(raan), 1)[0]
    argp_rate = np.polyfit(ts, np.unwrap(argp), 1)[0]
    n = math.sqrt(MU_EARTH / a**3)
    p = a * (1 - e**2)
    k = 1.5 * n * J2_EARTH * (R_EARTH / p) ** 2
    assert raan_rate == pytest.approx(-k * math.cos(i), rel=J2_RATE_REL_TOL)
    assert argp_rate == pytest.approx(0.5 * k * (5 * math.cos(i) ** 2 - 1), rel=J2_RATE_REL_TOL)


# RK4 at 1 ms over 20 s for rates ~0.5 rad/s: global error ~ (h w)^4 ~ 1e-13.
TORQUE_FREE_TOL = 1e-10


def test_torque_free_axisymmetric_body():
    It, Ia = 800.0, 400.0
    w0 = np.array([0.3, -0.1, 0.5])
    sc = fx.Spacecraft(fx.Hub(500.0, np.diag([It, It, Ia])))
    sol = js.simulate(sc, sc.init_state(omega_BN_B=w0), 20.0, dt=1e-3, sample_dt=1.0)
    lam = (Ia - It) / It * w0[2]
    t = np.asarray(sol.ts)
    c, s = np.cos(lam * t), np.sin(lam * t)
    # Euler's equations: w1' = -lambda w2, w2' = lambda w1 with lambda = (Ia - It)/It * w3.
    w1 = w0[0] * c - w0[1] * s
    w2 = w0[0] * s + w0[1] * c
    expected = np.stack([w1, w2, np.full_like(t, w0[2])], axis=-1)
    np.testing.assert_allclose(sol.outputs["omega_BN_B"], expected, atol=TORQUE_FREE_TOL)


# RK4 integrates the polynomial r(t), omega(t) exactly; sigma(t) only to truncation ~1e-15 here.
HUB_CLOSED_FORM_TOL = 1e-12


def test_hub_constant_force_and_torque():
    """Basilisk `test_spacecraftHubOnlyFastPath.py` analytic case: m=20, I=diag(4,5,6),
    F_N=(10,-4,6), tau_B=(0,2,0), h=0.01 s, 0.5 s."""
    F = np.array([10.0, -4.0, 6.0])
    r0, v0 = np.array([10.0, -20.0, 30.0]), np.array([1.0, -2.0, 0.5])
    sc = fx.Spacecraft(
        fx.Hub(20.0, np.diag([4.0, 5.0, 6.0])),
        dynamic_effectors=(fx.ExtForceTorque(force_N=F, torque_B=[0.0, 2.0, 0.0]),),
    )
    sol = js.simulate(sc, sc.init_state(r0, v0), 0.5, dt=0.01, sample_dt=0.1)
    t = np.asarray(sol.ts)[:, None]
    r = r0 + v0 * t + 0.5 * (F / 20.0) * t**2
    np.testing.assert_allclose(sol.outputs["r_BN_N"], r, rtol=HUB_CLOSED_FORM_TOL)
    np.testing.assert_allclose(sol.outputs["v_BN_N"], v0 + F / 20.0 * t, rtol=HUB_CLOSED_FORM_TOL)
    w = np.concatenate([0 * t, 0.4 * t, 0 * t], axis=1)
    np.testing.assert_allclose(sol.outputs["omega_BN_B"], w, atol=HUB_CLOSED_FORM_TOL)
    sig = np.concatenate([0 * t, np.tan(0.2 * t**2 / 4), 0 * t], axis=1)
    np.testing.assert_allclose(sol.outputs["sigma_BN"], sig, atol=HUB_CLOSED_FORM_TOL)


def test_hub_piecewise_body_force():
    """Basilisk `test_spacecraft.py` translation back-of-envelope case: body force 3 N for t <= 3,
    0 for 3 < t <= 6, -7 N for 6 < t <= 10."""
    force = js.PiecewiseConstant([3.0, 6.0], [[3.0, 0, 0], [0.0, 0, 0], [-7.0, 0, 0]])
    sc = fx.Spacecraft(
        fx.Hub(100.0, np.eye(3)), dynamic_effectors=(fx.ExtForceTorque(force_B=force),)
    )
    sol = js.simulate(sc, sc.init_state(), ts=[0.0, 3.0, 6.0, 10.0], dt=0.1)
    x = np.asarray(sol.outputs["r_BN_N"])[:, 0]
    v = np.asarray(sol.outputs["v_BN_N"])[:, 0]
    a1, a2 = 0.03, -0.07
    x3, v3 = 0.5 * a1 * 9, a1 * 3
    x6 = x3 + v3 * 3
    x10 = x6 + v3 * 4 + 0.5 * a2 * 16
    np.testing.assert_allclose(x, [0.0, x3, x6, x10], rtol=HUB_CLOSED_FORM_TOL)
    np.testing.assert_allclose(v, [0.0, v3, v3, v3 + a2 * 4], rtol=HUB_CLOSED_FORM_TOL)


# The torque formula is evaluated twice in float64: round-off.
GG_TOL = 1e-12


def test_gravity_gradient_torque_formula():
    earth = fx.PointMassGravity(MU_EARTH)
    gg = fx.GravityGradient(earth)
    hub = fx.Hub(
        100.0, [[500.0, 10.0, -5.0], [10.0, 800.0, 3.0], [-5.0, 3.0, 350.0]], [0.1, 0.15, -0.1]
    )
    sc = fx.Spacecraft(hub, gravity=(earth,), dynamic_effectors=(gg,))
    r, v = elements_to_rv(7000e3, 1e-4, 0.58, 0.84, 6.07, 1.49)
    y = sc.init_state(r, v, [0.1, 0.2, -0.3], [0.0, 0.0, 0.0])
    ctx = sc.context(0.0, y, None)
    tau = np.asarray(gg.force_torque(ctx).torque_B)
    # Independent: composite inertia about C = hub inertia about its CoM (only body here).
    I_C = np.asarray(hub.IHubPntBc_B)
    r_C = np.asarray(ctx.r_CN_N)
    rhat = np.asarray(K.mrp_to_dcm(jnp.array([0.1, 0.2, -0.3]))) @ (r_C / np.linalg.norm(r_C))
    expected = 3 * MU_EARTH / np.linalg.norm(r_C) ** 3 * np.cross(rhat, I_C @ rhat)
    np.testing.assert_allclose(tau, expected, rtol=GG_TOL, atol=GG_TOL * np.abs(expected).max())
    # Zero torque with a principal axis along r-hat.
    assert np.abs(np.cross(rhat, rhat)).max() == 0.0


def _normalized_legendre(L, x):
    """Fully normalised associated Legendre functions Pbar[l, m](x), standard column recursion."""
    P = [[jnp.zeros(()) for _ in range(L + 1)] for _ in range(L + 1)]
    y = jnp.sqrt(1 - x * x)
    P[0][0] = jnp.ones(())
    for m in range(1, L + 1):
        k = math.sqrt((2 * m + 1) / (2 * m)) if m > 1 else math.sqrt(3.0)
        P[m][m] = k * y * P[m - 1][m - 1]
    for m in range(0, L):
        P[m + 1][m] = math.sqrt(2 * m + 3) * x * P[m][m]
    for m in range(0, L + 1):
        for l in range(m + 2, L + 1):
            a = math.sqrt((4 * l * l - 1) / (l * l - m * m))
            b = math.sqrt(((l - 1) ** 2 - m * m) / (4 * (l - 1) ** 2 - 1))
            P[l][m] = a * (x * P[l - 1][m] - b * P[l - 2][m])
    return P


def _potential(x, mu, R, C, S, L):
    """U = mu/r sum (R/r)^l Pbar_lm(sin phi) (C cos m lambda + S sin m lambda)."""
    r = jnp.sqrt(jnp.sum(x * x))
    sinphi = x[2] / r
    lam = jnp.arctan2(x[1], x[0])
    P = _normalized_legendre(L, sinphi)
    U = 0.0
    for l in range(L + 1):
        for m in range(l + 1):
            U = U + (R / r) ** l * P[l][m] * (
                C[l, m] * jnp.cos(m * lam) + S[l, m] * jnp.sin(m * lam)
            )
    return mu / r * U


# Pines' recursion vs an independently written potential differentiated exactly by autodiff:
# agreement at round-off of a degree-8 sum (issue bound 1e-10).
SH_GRAD_TOL = 1e-10


def test_spherical_harmonics_match_gradient_of_potential():
    L = 8
    rng = np.random.default_rng(3)
    C = np.tril(rng.normal(scale=1e-6, size=(L + 1, L + 1)))
    S = np.tril(rng.normal(scale=1e-6, size=(L + 1, L + 1)))
    S[:, 0] = 0.0
    C[0, 0] = 1.0
    C[1, :] = 0.0
    S[1, :] = 0.0
    body = fx.SphericalHarmonicGravity(MU_EARTH, R_EARTH, C, S)
    for x in [np.array([7.0e6, 1.0e6, 2.0e6]), np.array([-1.5e6, 4.0e6, -6.1e6])]:
        a = np.asarray(body.field_planet_fixed(jnp.asarray(x)))
        g = np.asarray(jax.grad(_potential)(jnp.asarray(x), MU_EARTH, R_EARTH, C, S, L))
        np.testing.assert_allclose(a, g, rtol=SH_GRAD_TOL, atol=SH_GRAD_TOL * np.linalg.norm(g))


# Closed-form J2 acceleration vs the recursion: round-off. The recursion matches the closed form to
# ~1e-15 relative at random LEO-GEO points; an independent re-implementation of the same recursion
# reached 1.9e-13, so 1e-12 keeps a margin.
J2_CLOSED_FORM_TOL = 1e-12


def test_j2_closed_form_and_surface_gravity():
    body = fx.SphericalHarmonicGravity.j2(MU_EARTH, R_EARTH, J2_EARTH)
    x, y, z = 5.0e6, -3.0e6, 4.0e6
    r = math.sqrt(x * x + y * y + z * z)
    k = 1.5 * J2_EARTH * MU_EARTH * R_EARTH**2 / r**5
    pm = -MU_EARTH / r**3 * np.array([x, y, z])
    j2 = k * np.array(
        [x * (5 * z * z / r**2 - 1), y * (5 * z * z / r**2 - 1), z * (5 * z * z / r**2 - 3)]
    )
    a = np.asarray(body.field(0.0, jnp.array([x, y, z])))
    np.testing.assert_allclose(a - pm, j2, rtol=J2_CLOSED_FORM_TOL * 1e3)
    np.testing.assert_allclose(a, pm + j2, rtol=J2_CLOSED_FORM_TOL)
    g_pole = np.linalg.norm(body.field(0.0, jnp.array([0.0, 0.0, R_EARTH])))
    assert 9.7 < g_pole < 9.9
    # A zonal field is invariant to rotations about z.
    rot = np.asarray(K.euler_axis_rotation(3, 0.7))
    a_rot = np.asarray(body.field(0.0, jnp.asarray(rot @ np.array([x, y, z]))))
    np.testing.assert_allclose(a_rot, rot @ a, rtol=J2_CLOSED_FORM_TOL)


def test_gravity_superposition_and_third_body():
    """Superposition: body B (mu/2) opposite body A halves g_x; a third identical to B cancels."""
    d = 1.0e7
    A = fx.PointMassGravity(MU_EARTH, r_PN_N=[d, 0, 0], name="A")
    B = fx.PointMassGravity(MU_EARTH / 2, r_PN_N=[-d, 0, 0], name="B")
    B2 = fx.PointMassGravity(MU_EARTH / 2, r_PN_N=[-d, 0, 0], name="B2")
    sc1 = fx.Spacecraft(fx.Hub(1.0, np.eye(3)), gravity=(A,))
    sc2 = fx.Spacecraft(fx.Hub(1.0, np.eye(3)), gravity=(A, B))
    sc3 = fx.Spacecraft(fx.Hub(1.0, np.eye(3)), gravity=(A, B, B2))
    y = sc1.init_state()
    g1 = np.asarray(sc1.context(0.0, y, None).g_N)
    g2 = np.asarray(sc2.context(0.0, y, None).g_N)
    g3 = np.asarray(sc3.context(0.0, y, None).g_N)
    np.testing.assert_allclose(g2[0], g1[0] / 2, rtol=1e-12)
    np.testing.assert_allclose(g3, 0.0, atol=1e-12 * np.abs(g1).max())
