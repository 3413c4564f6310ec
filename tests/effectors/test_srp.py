"""Cannonball SRP: force magnitude at 1 AU, cylindrical and conical shadows, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors._forces._srp import (
    AU,
    R_EARTH,
    R_SUN,
    SOLAR_FLUX_1AU,
    SPEED_OF_LIGHT,
    conical_illumination,
    cylindrical_shadow_margin,
)


# Closed-form force vs the effector: a handful of float64 operations on 1e11-size numbers.
FORCE_RTOL = 1e-13
# Penumbra overlap vs an independent trapezoid quadrature of the disc overlap with N_QUAD nodes
# (square-root end behaviour: error ~ N^-1.5 ~ 1e-8 of the disc area; 1e-6 leaves margin).
OVERLAP_ATOL = 1e-6
N_QUAD = 400_001
# Largest change of nu between neighbouring samples 75 m apart across a ~65 km penumbra
# (mean change ~1e-3; a jump, i.e. a discontinuity, would exceed this).
NU_MAX_JUMP = 0.01
# d nu / d position in the penumbra vs central differences. nu carries ~1e-10 absolute round-off
# (the lens-area formula cancels terms ~b^2 ~ 0.5 down to ~a^2 ~ 2e-5), so the step is 30 m:
# round-off 1e-10 / 60 m ~ 2e-12 against nu' ~ 2e-5 /m (1e-7 relative), truncation
# (h / 65 km penumbra)^2 ~ 2e-7; measured 6e-7 at 10 m, 1.2e-7 at 100 m.
GRAD_RTOL = 2e-6
FD_STEP = 30.0  # m

R_SUN_N = np.array([AU, 0.0, 0.0])
A_SRP, C_R = 4.0, 1.3
LEO = 7000e3  # m


def context(sc, r_BN_N, t=0.0):
    z = np.zeros(3)
    y = sc.init_state(np.asarray(r_BN_N, float), z, z, z)
    return sc.context(jnp.asarray(t), y, None)


def srp_sc(**kw):
    srp = fx.CannonballSRP(A_SRP, kw.pop("r_sun_N", R_SUN_N), C_R, **kw)
    return fx.Spacecraft(fx.Hub(100.0, np.eye(3)), dynamic_effectors=(srp,)), srp


def test_force_at_one_au_and_inverse_square():
    sc, srp = srp_sc()
    P = C_R * A_SRP * SOLAR_FLUX_1AU / SPEED_OF_LIGHT  # N, at 1 AU
    F = np.asarray(srp.force_torque(context(sc, [AU, -AU, 0.0])).force_N)
    np.testing.assert_allclose(F, [0.0, -P, 0.0], rtol=FORCE_RTOL, atol=1e-30)
    assert P == pytest.approx(2.3606e-5, rel=1e-3)  # ~ 4.54e-6 N/m^2 * C_R A
    F2 = np.asarray(srp.force_torque(context(sc, [-AU, 0.0, 0.0])).force_N)
    np.testing.assert_allclose(F2, [-P / 4.0, 0.0, 0.0], rtol=FORCE_RTOL)
    ft = srp.force_torque(context(sc, [-AU, 0.0, 0.0]))
    np.testing.assert_array_equal(ft.torque_B, np.zeros(3))
    np.testing.assert_array_equal(ft.force_B, np.zeros(3))
    out = srp.outputs(context(sc, [AU, -AU, 0.0]))
    assert float(out["nu"]) == 1.0


def test_cylindrical_shadow():
    sc, srp = srp_sc(shadow="cylindrical")
    nu = lambda r, t=0.0: float(srp.outputs(context(sc, r, t))["nu"])  # noqa: E731
    assert nu([-LEO, 0.0, 0.0]) == 0.0  # behind the Earth
    assert nu([LEO, 0.0, 0.0]) == 1.0  # in front
    assert nu([-LEO, R_EARTH - 1.0, 0.0]) == 0.0  # just inside the cylinder
    assert nu([-LEO, R_EARTH + 1.0, 0.0]) == 1.0  # just outside
    assert nu([0.0, 0.0, LEO]) == 1.0  # terminator plane, above the pole
    F = srp.force_torque(context(sc, [-LEO, 0.0, 0.0])).force_N
    np.testing.assert_array_equal(F, np.zeros(3))
    m = cylindrical_shadow_margin(np.array([-LEO, 100.0, 0.0]), R_SUN_N, np.zeros(3), R_EARTH)
    np.testing.assert_allclose(m, 100.0 - R_EARTH, rtol=1e-12)
    # Sun given as a function of time: at t = 1 it has moved to -x, so -x is now lit.
    sc2, srp2 = srp_sc(
        shadow="cylindrical", r_sun_N=lambda t: AU * jnp.array([jnp.cos(jnp.pi * t), 0.0, 0.0])
    )
    assert float(srp2.outputs(context(sc2, [-LEO, 0.0, 0.0], 1.0))["nu"]) == 1.0
    assert float(srp2.outputs(context(sc2, [LEO, 0.0, 0.0], 1.0))["nu"]) == 0.0


def overlap_fraction_quadrature(a, b, c):
    """Fraction of a disc (radius a, centre 0) covered by a disc (radius b, centre (c, 0))."""
    x = np.linspace(-a, a, N_QUAD)
    h1 = np.sqrt(np.maximum(a * a - x * x, 0.0))
    h2 = np.sqrt(np.maximum(b * b - (x - c) ** 2, 0.0))
    return np.trapezoid(2.0 * np.minimum(h1, h2), x) / (np.pi * a * a)


def apparent(r):
    s, p = R_SUN_N - r, -r
    a = np.arcsin(R_SUN / np.linalg.norm(s))
    b = np.arcsin(R_EARTH / np.linalg.norm(p))
    c = np.arccos(s @ p / (np.linalg.norm(s) * np.linalg.norm(p)))
    return a, b, c


def test_conical_penumbra_continuous_and_umbra():
    ys = np.linspace(6300e3, 6450e3, 2001)  # across the penumbra at 7000 km behind the Earth
    r = np.stack([np.full_like(ys, -LEO), ys, np.zeros_like(ys)], axis=1)
    nu = np.asarray(conical_illumination(jnp.asarray(r), R_SUN_N, np.zeros(3), R_EARTH))
    assert np.all((nu >= 0.0) & (nu <= 1.0))
    assert nu[0] == 0.0 and nu[-1] == 1.0
    assert np.all(np.diff(nu) >= -1e-12)  # monotone out of the shadow
    assert np.max(np.abs(np.diff(nu))) < NU_MAX_JUMP
    pen = np.flatnonzero((nu > 0.0) & (nu < 1.0))
    assert pen.size > 500  # a penumbra tens of km wide, not a step
    for i in pen[:: pen.size // 7]:
        a, b, c = apparent(r[i])
        np.testing.assert_allclose(nu[i], 1.0 - overlap_fraction_quadrature(a, b, c),
                                   atol=OVERLAP_ATOL)  # fmt: skip
    # Umbra on the axis, full sun in front, through the effector.
    sc, srp = srp_sc(shadow="conical")
    assert float(srp.outputs(context(sc, [-LEO, 0.0, 0.0]))["nu"]) == 0.0
    assert float(srp.outputs(context(sc, [LEO, 0.0, 0.0]))["nu"]) == 1.0
    out = srp.outputs(context(sc, r[pen[pen.size // 2]]))
    np.testing.assert_allclose(out["nu"], nu[pen[pen.size // 2]], rtol=1e-12)


def test_conical_gradient():
    def nu(r):
        return conical_illumination(r, R_SUN_N, np.zeros(3), R_EARTH)

    g = jax.grad(nu)
    # Finite (zero) on the sun-occulter axis, in the umbra and in full sun.
    for r in ([-LEO, 0.0, 0.0], [LEO, 0.0, 0.0]):
        np.testing.assert_array_equal(g(jnp.array(r)), np.zeros(3))
    r0 = np.array([-LEO, 6380e3 * np.cos(0.3), 6380e3 * np.sin(0.3)])
    a, b, c = apparent(r0)
    assert abs(a - b) < c < a + b  # in the penumbra
    grad = np.asarray(g(jnp.asarray(r0)))
    fd = [(nu(r0 + FD_STEP * e) - nu(r0 - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=GRAD_RTOL, atol=1e-6 * np.max(np.abs(grad)))


def test_conical_annular():
    R_occ, d = 1.0e6, 4.0e8  # occulter's disc smaller than the sun's: annular eclipse on axis
    r = np.array([-d, 0.0, 0.0])
    nu = float(conical_illumination(jnp.asarray(r), R_SUN_N, np.zeros(3), R_occ))
    a = np.arcsin(R_SUN / (AU + d))
    b = np.arcsin(R_occ / d)
    np.testing.assert_allclose(nu, 1.0 - b**2 / a**2, rtol=1e-12)


def test_srp_validation():
    with pytest.raises(ValueError, match="area"):
        fx.CannonballSRP(-1.0, R_SUN_N)
    with pytest.raises(ValueError, match="C_R"):
        fx.CannonballSRP(1.0, R_SUN_N, 0.0)
    with pytest.raises(ValueError, match="r_sun_N"):
        fx.CannonballSRP(1.0, [1.0, 2.0])
    with pytest.raises(ValueError, match="shadow"):
        fx.CannonballSRP(1.0, R_SUN_N, shadow="umbra")
    with pytest.raises(ValueError, match="R_occ"):
        fx.CannonballSRP(1.0, R_SUN_N, R_occ=0.0)
    with pytest.raises(ValueError, match="r_occ_N"):
        fx.CannonballSRP(1.0, R_SUN_N, r_occ_N=[0.0, np.nan, 0.0])
    with pytest.raises(ValueError, match="R_sun"):
        fx.CannonballSRP(1.0, R_SUN_N, R_sun=-1.0)
    with pytest.raises(ValueError, match="name"):
        fx.CannonballSRP(1.0, R_SUN_N, name="")
