"""Attitude kinematics against closed forms and each other; gradients finite at zero rotation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsim import kinematics as K


# Identities of exact formulas evaluated in float64: round-off of a few operations.
ROUNDOFF = 1e-14

rng = np.random.default_rng(0)
SIGMAS = [np.array([0.1, 0.2, -0.3]), np.array([0.0, 0.0, 0.0]), rng.uniform(-0.6, 0.6, 3)]


@pytest.mark.parametrize("sigma", SIGMAS)
def test_mrp_dcm_is_rotation_and_roundtrips(sigma):
    C = K.mrp_to_dcm(sigma)
    np.testing.assert_allclose(C @ C.T, np.eye(3), atol=ROUNDOFF)
    assert np.linalg.det(C) == pytest.approx(1.0, abs=ROUNDOFF)
    np.testing.assert_allclose(K.dcm_to_mrp(C), sigma, atol=ROUNDOFF)
    np.testing.assert_allclose(K.quat_to_dcm(K.mrp_to_quat(sigma)), C, atol=ROUNDOFF)


def test_mrp_principal_rotation():
    """sigma = e tan(phi/4) is the DCM of a rotation by phi about e: [BN] = prv_to_dcm(phi e)."""
    e = np.array([1.0, 2.0, 2.0]) / 3.0
    phi = 1.3
    np.testing.assert_allclose(
        K.mrp_to_dcm(e * np.tan(phi / 4)), K.prv_to_dcm(phi * e), atol=ROUNDOFF
    )
    np.testing.assert_allclose(
        K.euler_axis_rotation(3, phi), K.prv_to_dcm(phi * np.eye(3)[2]), atol=ROUNDOFF
    )


def test_shadow_set_same_attitude():
    sigma = np.array([0.7, -0.6, 0.5])  # |sigma| > 1
    new, switched = K.mrp_switch(sigma)
    assert bool(switched)
    assert np.linalg.norm(new) < 1.0
    np.testing.assert_allclose(K.mrp_to_dcm(new), K.mrp_to_dcm(sigma), atol=ROUNDOFF)
    same, switched = K.mrp_switch(np.array([0.1, 0.2, 0.3]))
    assert not bool(switched)


def test_mrp_kinematics_matches_dcm_rate():
    """d[BN]/dt = -[omega~][BN] through the MRP differential equation (finite difference in time)."""
    sigma, omega = SIGMAS[0], np.array([0.3, -0.2, 0.5])
    sdot = K.mrp_dot(sigma, omega)
    h = 1e-6
    dC = (K.mrp_to_dcm(sigma + h * sdot) - K.mrp_to_dcm(sigma - h * sdot)) / (2 * h)
    # Central difference of smooth functions with h = 1e-6: O(h^2) truncation, O(eps/h) round-off.
    np.testing.assert_allclose(dC, -K.tilde(omega) @ K.mrp_to_dcm(sigma), atol=1e-9)


def test_gradients_finite_at_zero_rotation():
    z = jnp.zeros(3)
    for f in [
        lambda s: jnp.sum(K.mrp_to_dcm(s)),
        lambda s: jnp.sum(K.mrp_switch(s)[0]),
        lambda q: jnp.sum(K.prv_to_dcm(q)),
        lambda s: jnp.sum(K.dcm_to_mrp(K.mrp_to_dcm(s))),
    ]:
        g = jax.grad(f)(z)
        assert np.all(np.isfinite(g))
    # d(dcm_to_mrp o mrp_to_dcm)/dsigma = I at zero.
    J = jax.jacfwd(lambda s: K.dcm_to_mrp(K.mrp_to_dcm(s)))(z)
    np.testing.assert_allclose(J, np.eye(3), atol=ROUNDOFF)


def test_inv3_and_helpers():
    M = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(K.inv3(M), np.linalg.inv(M), rtol=1e-13)
    v = rng.normal(size=3)
    np.testing.assert_allclose(K.solve3(M, v), np.linalg.solve(M, v), rtol=1e-13)
    a, b = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(K.cross3(a, b), np.cross(a, b), atol=ROUNDOFF)
    np.testing.assert_allclose(K.tilde(a) @ b, np.cross(a, b), atol=ROUNDOFF)
    np.testing.assert_allclose(K.mv3(M, v), M @ v, rtol=ROUNDOFF)
    np.testing.assert_allclose(K.dot3(a, b), a @ b, rtol=ROUNDOFF)


def test_dcm_to_quat_all_branches():
    """Sheppard's method picks the largest Euler parameter; cover each branch."""
    for axis in range(3):
        for phi in [0.3, 3.0]:
            e = np.eye(3)[axis]
            C = K.prv_to_dcm(phi * e)
            q = K.dcm_to_quat(C)
            expected = np.concatenate([[np.cos(phi / 2)], np.sin(phi / 2) * e])
            np.testing.assert_allclose(q, expected, atol=ROUNDOFF)
