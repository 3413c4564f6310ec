"""Attitude guidance (`effectors._gnc._guidance`) against live Basilisk (`bsk` 2.12.1) modules run
standalone on the same inputs (`tests/reference/basilisk_gnc.py`), plus closed forms, gradients
against central differences, `vmap`, and refused arguments.

Basilisk checks are skipped when Basilisk is not importable (`pytest.importorskip`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim.kinematics import mrp_to_dcm


# Same formulas, float64, different operation orders (Basilisk's rv2elem / C2MRP / addMRP vs ours):
# round-off of O(1) quantities, measured <= 3e-16 absolute on MRPs and rates; relative to each
# quantity's scale (rates ~1e-3 rad/s, accelerations ~1e-9 rad/s^2) measured <= 2e-14.
TOL_BSK_REL = 1e-12
# Central differences with step 1e-6 relative on smooth O(1) maps: truncation ~1e-12, round-off
# ~1e-10 relative.
TOL_FD_REL = 1e-6
FD_STEP = 1e-6
# Batched vs one-at-a-time evaluation: XLA fuses the batch differently (measured 1.8e-15 relative).
VMAP_RTOL = 1e-14
MU = 3.986004418e14  # [m^3/s^2] Earth
GUID = ("sigma_BR", "omega_BR_B", "omega_RN_B", "domega_RN_B")
REF = ("sigma_RN", "omega_RN_N", "domega_RN_N")


def _orbits():
    """(r_BN_N [m], v_BN_N [m/s], r_PN_N, v_PN_N): eccentric, near-circular, polar, hyperbolic."""
    return [
        ([7000e3, 1200e3, -300e3], [-1.2e3, 7.1e3, 1.0e3], [1e3, 2e3, 3e3], [1.0, 2.0, 3.0]),
        ([6778e3, 0.0, 0.0], [0.0, 7668.6, 1.0], [0.0] * 3, [0.0] * 3),
        ([0.0, 8000e3, 100e3], [0.0, 500.0, -7.5e3], [0.0] * 3, [0.0] * 3),
        ([9000e3, -2000e3, 500e3], [2.0e3, 11.0e3, -1.5e3], [-5e3, 0.0, 1e3], [0.1, -0.2, 0.3]),
    ]


def _close(ours, ref, what):
    ours, ref = np.asarray(ours), np.asarray(ref)
    scale = max(np.max(np.abs(ref)), 1e-300)
    err = np.max(np.abs(ours - ref)) / scale
    assert err < TOL_BSK_REL, f"{what}: rel err {err:.3e} (scale {scale:.3e})"
    return err


def _bsk():
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_gnc as bg

    return bg


# --------------------------------------------------------------------------------------------------
# Against live Basilisk


@pytest.mark.crossval
@pytest.mark.parametrize("module", ["hillPoint", "velocityPoint"])
def test_orbit_frames_match_basilisk(module):
    bg = _bsk()
    inputs = [
        {
            "transNavInMsg": ("NavTransMsgPayload", {"r_BN_N": r, "v_BN_N": v}),
            "celBodyInMsg": ("EphemerisMsgPayload", {"r_BdyZero_N": rp, "v_BdyZero_N": vp}),
        }
        for r, v, rp, vp in _orbits()
    ]
    config = {"mu": MU} if module == "velocityPoint" else {}
    ref = bg.run_module(module, config, inputs, {"attRefOutMsg": REF})
    ours = {key: [] for key in REF}
    for r, v, rp, vp in _orbits():
        g = fx.HillPoint(rp, vp) if module == "hillPoint" else fx.VelocityPoint(MU, rp, vp)
        out = g({"r_BN_N": jnp.asarray(r), "v_BN_N": jnp.asarray(v)})
        for key in REF:
            ours[key].append(out[key])
    # Each quantity relative to its largest value over the cases (a circular orbit has
    # domega_RN_N = 0, which Basilisk returns as round-off ~1e-27).
    for key in REF:
        _close(ours[key], ref[f"attRefOutMsg.{key}"], f"{module} {key}")


@pytest.mark.crossval
def test_inertial3d_and_tracking_error_match_basilisk():
    bg = _bsk()
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(6):
        sb, sr0, srr = (rng.uniform(-0.6, 0.6, 3) for _ in range(3))
        cases.append(
            (sb, rng.normal(0, 0.05, 3), sr0, rng.normal(0, 1e-3, 3), rng.normal(0, 1e-5, 3), srr)
        )
    # A near-singular pair (sigma_RN close to the shadow of -sigma_BN) takes the shadow branches.
    cases.append(
        ([0.9, 0.1, 0.0], [0.01, 0.0, 0.0], [-0.92, -0.1, 0.0], [0.0] * 3, [0.0] * 3, [0.0] * 3)
    )
    inputs = [
        {
            "attNavInMsg": ("NavAttMsgPayload", {"sigma_BN": sb, "omega_BN_B": w}),
            "attRefInMsg": (
                "AttRefMsgPayload",
                {"sigma_RN": sr, "omega_RN_N": wr, "domega_RN_N": dwr},
            ),
        }
        for sb, w, sr, wr, dwr, _ in cases
    ]
    for srr in (cases[0][5], [0.0, 0.0, 0.0]):
        ref = bg.run_module(
            "attTrackingError", {"sigma_R0R": list(srr)}, inputs, {"attGuidOutMsg": GUID}
        )
        te = fx.AttTrackingError(srr)
        for k, (sb, w, sr, wr, dwr, _) in enumerate(cases):
            out = te(
                {"sigma_BN": sb, "omega_BN_B": w},
                {"sigma_RN": sr, "omega_RN_N": wr, "domega_RN_N": dwr},
            )
            for key in GUID:
                _close(out[key], ref[f"attGuidOutMsg.{key}"][k], f"attTrackingError case {k} {key}")
    # inertial3D: the reference is the configured attitude, at rest.
    ref = bg.run_module("inertial3D", {"sigma_R0N": [0.1, -0.2, 0.3]}, [{}], {"attRefOutMsg": REF})
    out = fx.Inertial3D([0.1, -0.2, 0.3])()
    for key in REF:
        np.testing.assert_array_equal(out[key], ref[f"attRefOutMsg.{key}"][0], err_msg=key)


@pytest.mark.crossval
def test_sun_safe_point_matches_basilisk():
    bg = _bsk()
    w = [0.01, -0.02, 0.005]
    suns = [
        [0.3, 0.5, 0.8],  # generic
        [-0.2, 0.1, -1.3],  # large angle, not unit
        [1e-3, 0.0, 0.0],  # below min_unit_mag: no sun
        [0.0, 0.0, -2.0],  # anti-parallel to sHat_c: 180 deg axis
        [1e-5, 0.0, 1.0],  # within small_angle of sHat_c
    ]
    config = {"sHatBdyCmd": [0.0, 0.0, 1.0], "minUnitMag": 0.01, "smallAngle": 1e-3,
              "sunAxisSpinRate": 0.02, "omega_RN_B": [0.0, 0.01, 0.0]}  # fmt: skip
    inputs = [
        {
            "sunDirectionInMsg": ("NavAttMsgPayload", {"vehSunPntBdy": s}),
            "imuInMsg": ("NavAttMsgPayload", {"omega_BN_B": w}),
        }
        for s in suns
    ]
    ref = bg.run_module("sunSafePoint", config, inputs, {"attGuidanceOutMsg": GUID})
    g = fx.SunSafePoint([0.0, 0.0, 1.0], min_unit_mag=0.01, small_angle=1e-3,
                        sun_axis_spin_rate=0.02, omega_RN_B=[0.0, 0.01, 0.0])  # fmt: skip
    for k, s in enumerate(suns):
        out = g({"vehSunPntBdy": jnp.asarray(s), "omega_BN_B": jnp.asarray(w)})
        for key in GUID:
            np.testing.assert_allclose(out[key], ref[f"attGuidanceOutMsg.{key}"][k], rtol=0.0,
                                       atol=TOL_BSK_REL, err_msg=f"case {k} {key}")  # fmt: skip


def _location_ticks(n=5):
    ticks = []
    for k in range(n):
        s = np.array([0.1 + 0.01 * k, -0.2 + 0.005 * k * k, 0.3])
        w = np.array([0.01, -0.02 + 0.001 * k, 0.03])
        ticks.append((s, w, np.array([7000e3, 100e3 * k, 20e3 * k])))
    return ticks


@pytest.mark.crossval
@pytest.mark.parametrize("damping", [False, True])
def test_location_pointing_matches_basilisk(damping):
    bg = _bsk()
    r_LN = [6378e3, 500e3, 300e3]
    p = [0.0, 0.6, 0.8]
    dt = 0.5
    ticks = _location_ticks()
    inputs = [
        {
            "scAttInMsg": ("NavAttMsgPayload", {"sigma_BN": s, "omega_BN_B": w}),
            "scTransInMsg": ("NavTransMsgPayload", {"r_BN_N": r}),
            "locationInMsg": ("GroundStateMsgPayload", {"r_LN_N": r_LN}),
        }
        for s, w, r in ticks
    ]
    ref = bg.run_module("locationPointing", {"pHat_B": p, "useBoresightRateDamping": int(damping)},
                        inputs, {"attGuidOutMsg": GUID, "attRefOutMsg": REF}, dt=dt)  # fmt: skip
    g = fx.LocationPointing(p, r_LN, use_boresight_rate_damping=damping)
    z = g.init_state()
    for k, (s, w, r) in enumerate(ticks):
        z, guid, refm = g(k * dt, {"sigma_BN": s, "omega_BN_B": w, "r_BN_N": r}, z)
        for key in GUID:
            np.testing.assert_allclose(guid[key], ref[f"attGuidOutMsg.{key}"][k], rtol=0.0,
                                       atol=TOL_BSK_REL, err_msg=f"tick {k} {key}")  # fmt: skip
        for key in REF:
            np.testing.assert_allclose(refm[key], ref[f"attRefOutMsg.{key}"][k], rtol=0.0,
                                       atol=TOL_BSK_REL, err_msg=f"tick {k} {key}")  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Closed forms, differentiability, refused arguments


def test_reference_frames_are_consistent():
    """[RN] of hillPoint maps r to +x and h to +z; the tracking error of B = R is zero."""
    for r, v, rp, vp in _orbits():
        r, v = np.asarray(r) - rp, np.asarray(v) - vp
        out = fx.HillPoint(rp, vp)({"r_BN_N": np.asarray(r) + rp, "v_BN_N": np.asarray(v) + vp})
        RN = np.asarray(mrp_to_dcm(out["sigma_RN"]))
        np.testing.assert_allclose(RN @ r / np.linalg.norm(r), [1.0, 0.0, 0.0], atol=1e-14)
        h = np.cross(r, v)
        np.testing.assert_allclose(RN @ h / np.linalg.norm(h), [0.0, 0.0, 1.0], atol=1e-14)
        vel = fx.VelocityPoint(MU, rp, vp)({"r_BN_N": r + rp, "v_BN_N": v + vp})
        RN = np.asarray(mrp_to_dcm(vel["sigma_RN"]))
        np.testing.assert_allclose(RN @ v / np.linalg.norm(v), [0.0, 1.0, 0.0], atol=1e-14)
        guid = fx.AttTrackingError()(
            {"sigma_BN": out["sigma_RN"], "omega_BN_B": RN @ out["omega_RN_N"]}, out
        )
        assert np.max(np.abs(guid["sigma_BR"])) < 1e-15


def test_mrp_add_inverts_subtract():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s1, s2 = rng.uniform(-0.7, 0.7, 3), rng.uniform(-0.7, 0.7, 3)
        back = fx.mrp_subtract(fx.mrp_add(s1, s2), s1)
        np.testing.assert_allclose(mrp_to_dcm(back), mrp_to_dcm(s2), atol=1e-13)


def _fd(f, x, step):
    x = np.asarray(x, float)
    g = np.zeros((np.size(f(x)), x.size))
    for i in range(x.size):
        dx = np.zeros_like(x)
        dx.flat[i] = step * max(abs(x.flat[i]), 1.0)
        g[:, i] = (np.ravel(f(x + dx)) - np.ravel(f(x - dx))) / (2 * dx.flat[i])
    return g


@pytest.mark.parametrize("which", ["hill", "velocity", "sunsafe", "location", "tracking"])
def test_gradients_match_central_differences(which):
    r0 = np.array([7000e3, 1200e3, -300e3])
    v0 = np.array([-1.2e3, 7.1e3, 1.0e3])
    if which == "hill":
        f = lambda x: fx.HillPoint()({"r_BN_N": x[:3] * 1e6, "v_BN_N": x[3:] * 1e3})["omega_RN_N"]  # noqa: E731
        x0 = np.concatenate([r0 / 1e6, v0 / 1e3])
    elif which == "velocity":

        def f(x):
            out = fx.VelocityPoint(x[6] * 1e14)({"r_BN_N": x[:3] * 1e6, "v_BN_N": x[3:6] * 1e3})
            return jnp.concatenate([out["sigma_RN"], out["domega_RN_N"] * 1e9])

        x0 = np.concatenate([r0 / 1e6, v0 / 1e3, [MU / 1e14]])
    elif which == "sunsafe":

        def f(x):
            g = fx.SunSafePoint([0.0, 0.0, 1.0], sun_axis_spin_rate=x[3])
            return jnp.concatenate(
                list(g({"vehSunPntBdy": x[:3], "omega_BN_B": jnp.ones(3) * 0.01}).values())
            )

        x0 = np.array([0.3, -0.5, 0.7, 0.02])
    elif which == "location":

        def f(x):
            g = fx.LocationPointing([0.0, 0.6, 0.8], [6378e3, 500e3, 300e3])
            nav = {
                "sigma_BN": x[:3],
                "omega_BN_B": jnp.array([0.01, 0.0, 0.0]),
                "r_BN_N": jnp.asarray(r0),
            }
            z = {
                "sigma_BR_old": jnp.array([0.1, 0.2, 0.0]),
                "time_old": jnp.asarray(1.0),
                "init": jnp.asarray(0.0),
            }
            _, guid, ref = g(1.5, nav, z)
            return jnp.concatenate([guid["sigma_BR"], guid["omega_BR_B"], ref["sigma_RN"]])

        x0 = np.array([0.1, -0.2, 0.3])
    else:

        def f(x):
            out = fx.AttTrackingError(x[6:9])({"sigma_BN": x[:3], "omega_BN_B": jnp.zeros(3)},
                                              {"sigma_RN": x[3:6], "omega_RN_N": jnp.array([0.0, 1e-3, 0.0]),
                                               "domega_RN_N": jnp.zeros(3)})  # fmt: skip
            return jnp.concatenate([out["sigma_BR"], out["omega_RN_B"] * 1e3])

        x0 = np.array([0.1, -0.2, 0.3, -0.3, 0.1, 0.05, 0.02, 0.0, -0.01])
    jf = jax.jit(f)  # one compilation for the 2 n evaluations of the differences
    jac = np.asarray(jax.jit(jax.jacfwd(f))(jnp.asarray(x0)))
    rev = np.asarray(jax.jit(jax.jacrev(f))(jnp.asarray(x0)))
    fd = _fd(lambda x: np.asarray(jf(jnp.asarray(x))), x0, FD_STEP)
    scale = np.max(np.abs(fd))
    assert np.max(np.abs(jac - fd)) < TOL_FD_REL * scale, (jac, fd)
    np.testing.assert_allclose(rev, jac, atol=1e-12 * scale)


def test_vmap_over_orbits():
    rs = jnp.asarray([o[0] for o in _orbits()])
    vs = jnp.asarray([o[1] for o in _orbits()])
    one_orbit = jax.jit(lambda r, v: fx.HillPoint()({"r_BN_N": r, "v_BN_N": v}))
    batched = jax.vmap(one_orbit)(rs, vs)
    for k in range(len(rs)):
        one = one_orbit(rs[k], vs[k])
        for key in REF:
            np.testing.assert_allclose(batched[key][k], one[key], rtol=VMAP_RTOL, atol=0.0)


def test_refused_arguments():
    with pytest.raises(ValueError, match=r"Inertial3D: `sigma_R0N`.*shape \(3,\)"):
        fx.Inertial3D([0.0, 0.0])
    with pytest.raises(ValueError, match=r"VelocityPoint: `mu` must be > 0 \[m\^3/s\^2\]; got -1"):
        fx.VelocityPoint(-1.0)
    with pytest.raises(ValueError, match=r"HillPoint: `r_PN_N` must be finite \[m\]"):
        fx.HillPoint([np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"SunSafePoint: `sHat_c_B` must be unit"):
        fx.SunSafePoint([0.0, 0.0, 2.0])
    with pytest.raises(ValueError, match=r"SunSafePoint: `small_angle` must be >= 0 \[rad\]"):
        fx.SunSafePoint([0.0, 0.0, 1.0], small_angle=-0.1)
    with pytest.raises(ValueError, match=r"LocationPointing: `pHat_B` must be unit"):
        fx.LocationPointing([1.0, 1.0, 0.0], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"LocationPointing: `use_boresight_rate_damping`"):
        fx.LocationPointing([1.0, 0.0, 0.0], [0.0, 0.0, 0.0], use_boresight_rate_damping="yes")
    with pytest.raises(ValueError, match=r"AttTrackingError: `sigma_R0R`"):
        fx.AttTrackingError([0.0, 0.0, 0.0, 1.0])
    # In the wheel flight software: a stateful module and a sun-safe mode without the sun.
    ctrl = fx.MRPFeedback(1.0, 1.0, np.eye(3))
    mt = fx.RWMotorTorque(np.eye(3))
    loc = fx.LocationPointing([1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"RWAttitudeFSW: `guidance` must be a stateless"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt, guidance=loc)
    with pytest.raises(ValueError, match=r"RWAttitudeFSW: `guidance` SunSafePoint.*`r_sun_N`"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt, guidance=fx.SunSafePoint([0.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match=r"RWAttitudeFSW: give either `guidance` or"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt, [0.0, 0.0, 0.0], guidance=fx.HillPoint())
    with pytest.raises(ValueError, match=r"RWAttitudeFSW: `sigma_RN` \[-\] is required"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt)
