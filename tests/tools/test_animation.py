"""Spacecraft animation (`effectors.animation`, drawn by the generic `jaxsim.animation`): geometry
against closed forms and against the panel effector's own outputs, wheel spin angles, the generic
scene primitives, GIF/MP4 export, validation errors, import hygiene."""

import subprocess
import sys

import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors import animation
from jaxsim.kinematics import euler_axis_rotation, mrp_to_dcm


matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt


# Animations built only to check their validation are never rendered; matplotlib warns about that
# when they are garbage-collected.
pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")

# Geometry is closed-form trigonometry on O(1 m) lengths: equal to the closed forms up to a few
# roundings.
GEOM_ATOL = 1e-13  # [m]
# The MRP -> DCM formula is the same as jaxsim.kinematics.mrp_to_dcm (numpy vs JAX): a few roundings.
DCM_ATOL = 1e-14
# Panel CoM from the drawing vs the effector's r_SN_N - r_BN_N: the outputs are ~1e0 m apart from
# r_BN_N ~ 1e-3 m (no orbit), so only roundings of the subtraction and of [NB] r_SB.
COM_ATOL = 1e-12  # [m]
# Trapezoidal wheel angle from the saved speeds vs the RK4-integrated angle state of a jitter wheel
# (no imbalance, same dynamics as a balanced wheel): the trapezoid error per sample is
# h^3 |Omega''| / 12 with h = 0.05 s and |Omega''| < 1 rad/s^3 here (smooth hub/wheel exchange).
TRAPZ_ATOL = 1e-5  # [rad]

DT = 0.05  # [s] RK4 step and sample interval
N_STEPS = 20
PANEL = dict(mass=20.0, IPntS_S=np.diag([2.0, 1.0, 2.5]), d=0.8, k=40.0, c=2.0)
R_HB_B = np.array([0.5, 0.1, 0.3])  # [m]
DCM_HB = np.asarray(euler_axis_rotation(3, 0.4))  # hinge frame rotated 0.4 rad about b3
RW_AXES = np.eye(3)
RW_POS = np.array([[0.2, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, 0.2]])  # [m]
RW_OMEGA0 = np.array([30.0, -20.0, 10.0])  # [rad/s]
SIGMA0 = np.array([0.1, -0.2, 0.05])
OMEGA0 = np.array([0.2, -0.1, 0.3])  # [rad/s]


def _spacecraft():
    hub = fx.Hub(500.0, np.diag([300.0, 250.0, 200.0]), r_BcB_B=[0.01, -0.02, 0.0])
    panels = fx.HingedRigidBodies(
        **PANEL, r_HB_B=R_HB_B, dcm_HB=DCM_HB, theta0=0.2, thetaDot0=0.5, name="panels"
    )
    rw = fx.ReactionWheels(
        RW_AXES[:2], 0.05, rWB_B=RW_POS[:2], Omega=RW_OMEGA0[:2],
        motor_torque=[0.05, -0.02], name="rw",
    )  # fmt: skip
    # A wheel with an angle state (jitter model with no imbalance: same dynamics as balanced).
    rw_j = fx.ReactionWheels(
        RW_AXES[2:], 0.05, model="jitter_simple", rWB_B=RW_POS[2:], Omega=RW_OMEGA0[2:],
        theta=0.3, motor_torque=[0.03], name="rw_j",
    )  # fmt: skip
    return fx.Spacecraft(hub, state_effectors=(panels, rw, rw_j), name="sc")


@pytest.fixture(scope="module")
def run():
    sc = _spacecraft()
    y0 = sc.init_state(sigma_BN=SIGMA0, omega_BN_B=OMEGA0)
    sol = js.simulate(sc, y0, N_STEPS * DT, dt=DT, sample_dt=DT)
    return sc, sol


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _rot_z90():
    """[NB] of a body turned +90 deg about n3 (active rotation of body-fixed vectors)."""
    return np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


# --------------------------------------------------------------------------------------------------
# Geometry oracles


def test_identity_attitude_panel_and_hub_closed_form():
    L, w = 2.0, 1.0
    size = np.array([1.0, 2.0, 3.0])
    r_Bc = np.array([0.1, 0.0, -0.2])
    g = animation.spacecraft_geometry(
        np.zeros(3), hub_size=size, r_BcB_B=r_Bc, panel_theta=[[0.0]], r_HB_B=R_HB_B[None],
        dcm_HB=DCM_HB[None], panel_size=[[L, w]],
    )  # fmt: skip
    h1, h2 = DCM_HB[0], DCM_HB[1]
    expected = np.array(
        [R_HB_B + w / 2 * h2, R_HB_B - w / 2 * h2, R_HB_B - L * h1 - w / 2 * h2,
         R_HB_B - L * h1 + w / 2 * h2]
    )  # fmt: skip
    np.testing.assert_allclose(g["panels"][0, 0], expected, atol=GEOM_ATOL, rtol=0)
    np.testing.assert_allclose(g["axes"][0], np.eye(3), atol=GEOM_ATOL, rtol=0)
    corners = g["hub"][0]
    np.testing.assert_allclose(corners.min(0), r_Bc - size / 2, atol=GEOM_ATOL, rtol=0)
    np.testing.assert_allclose(corners.max(0), r_Bc + size / 2, atol=GEOM_ATOL, rtol=0)
    for face in animation.HUB_FACES:  # each face is a planar rectangle: one coordinate constant
        quad = corners[list(face)]
        assert np.sum(np.ptp(quad, axis=0) < GEOM_ATOL) == 1


def test_rotation_90deg_about_z():
    sigma = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, np.tan(np.pi / 8)]])  # MRP tan(Phi/4)
    kw = dict(
        hub_size=[1.0, 2.0, 3.0], panel_theta=[[0.3], [0.3]], r_HB_B=R_HB_B[None],
        dcm_HB=DCM_HB[None], panel_size=[[2.0, 1.0]], wheel_theta=[[0.7], [0.7]],
        gsHat_B=[[0.0, 0.0, 1.0]], w2Hat0_B=[[1.0, 0.0, 0.0]], w3Hat0_B=[[0.0, 1.0, 0.0]],
        rWB_B=[[0.1, 0.2, 0.3]], wheel_radius=0.2,
    )  # fmt: skip
    g = animation.spacecraft_geometry(sigma, **kw)
    R = _rot_z90()
    for key in ("hub", "panels", "wheel_rim", "wheel_spoke", "wheel_center"):
        np.testing.assert_allclose(g[key][1], g[key][0] @ R.T, atol=GEOM_ATOL, rtol=0)
    # body axes in N: b1 = n2, b2 = -n1, b3 = n3 (rows of [BN])
    np.testing.assert_allclose(g["axes"][1], R.T, atol=GEOM_ATOL, rtol=0)
    # In B components nothing moves.
    gB = animation.spacecraft_geometry(sigma, frame="B", **kw)
    np.testing.assert_allclose(gB["panels"][1], g["panels"][0], atol=GEOM_ATOL, rtol=0)


def test_dcm_matches_kinematics():
    rng = np.random.default_rng(0)
    sigma = rng.uniform(-0.6, 0.6, (5, 3))
    g = animation.spacecraft_geometry(sigma)
    np.testing.assert_allclose(g["dcm_BN"], np.asarray(mrp_to_dcm(sigma)), atol=DCM_ATOL, rtol=0)
    np.testing.assert_allclose(g["axes"], g["dcm_BN"], atol=DCM_ATOL, rtol=0)


def test_panel_rotates_about_hinge_axis():
    thetas = np.array([0.0, 0.3, np.pi / 2])
    L, w = 1.6, 0.8
    g = animation.spacecraft_geometry(
        np.zeros((3, 3)), panel_theta=thetas[:, None], r_HB_B=R_HB_B[None], dcm_HB=DCM_HB[None],
        panel_size=[[L, w]],
    )  # fmt: skip
    h1, h2, h3 = DCM_HB
    for i, th in enumerate(thetas):
        s1 = np.cos(th) * h1 - np.sin(th) * h3  # [SB] = M2(theta) [HB]
        quad = g["panels"][i, 0]
        np.testing.assert_allclose(quad[2], R_HB_B - L * s1 - w / 2 * h2, atol=GEOM_ATOL, rtol=0)
        np.testing.assert_allclose(quad[3], R_HB_B - L * s1 + w / 2 * h2, atol=GEOM_ATOL, rtol=0)
        # the hinge edge does not move
        np.testing.assert_allclose(quad[:2], g["panels"][0, 0, :2], atol=GEOM_ATOL, rtol=0)
    # theta = 90 deg: the panel points along +h3 from the hinge
    far = 0.5 * (g["panels"][2, 0, 2] + g["panels"][2, 0, 3])
    np.testing.assert_allclose(far, R_HB_B + L * h3, atol=GEOM_ATOL, rtol=0)


def test_wheel_spoke_closed_form():
    Omega, theta0, R = 3.0, 0.25, 0.2  # [rad/s], [rad], [m]
    ts = np.linspace(0.0, 2.0, 9)
    theta = animation.wheel_angles(ts, np.full((9, 1), Omega), theta0)
    np.testing.assert_allclose(theta[:, 0], theta0 + Omega * ts, atol=GEOM_ATOL, rtol=0)
    gs, w2, w3 = np.array([0.0, 0.6, 0.8]), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.8, -0.6])
    r_W = np.array([0.1, 0.2, 0.3])
    g = animation.spacecraft_geometry(
        np.zeros((9, 3)), wheel_theta=theta, gsHat_B=gs[None], w2Hat0_B=w2[None],
        w3Hat0_B=w3[None], rWB_B=r_W[None], wheel_radius=R,
    )  # fmt: skip
    tip = r_W + R * (np.cos(theta) * w2 + np.sin(theta) * w3)
    np.testing.assert_allclose(g["wheel_spoke"][:, 0, 1], tip, atol=GEOM_ATOL, rtol=0)
    np.testing.assert_allclose(g["wheel_spoke"][:, 0, 0], np.broadcast_to(r_W, (9, 3)),
                               atol=GEOM_ATOL, rtol=0)  # fmt: skip
    rim = g["wheel_rim"][0, 0] - r_W  # a circle of radius R normal to gs
    np.testing.assert_allclose(np.linalg.norm(rim, axis=-1), R, atol=GEOM_ATOL, rtol=0)
    np.testing.assert_allclose(rim @ gs, 0.0, atol=GEOM_ATOL, rtol=0)


def test_default_hub_size_is_uniform_box():
    a, b, c, m = 1.0, 2.0, 3.0, 600.0
    I = m / 12.0 * np.diag([b**2 + c**2, a**2 + c**2, a**2 + b**2])
    sc = fx.Spacecraft(fx.Hub(m, I))
    sol = {"ts": np.zeros(1), "outputs": {"sigma_BN": np.zeros((1, 3))}}
    g = animation.spacecraft_frames(sol, sc)
    np.testing.assert_allclose(g["hub_size"], [a, b, c], atol=GEOM_ATOL, rtol=0)
    assert "panels" not in g and "wheel_spoke" not in g


# --------------------------------------------------------------------------------------------------
# From a simulated run


def test_panel_com_matches_effector_output(run):
    sc, sol = run
    g = animation.spacecraft_frames(sol, sc)  # default panel length 2 d: CoM at mid-length
    com_drawn = g["panels"][:, 0].mean(axis=1)
    r_SB_N = np.asarray(sol.outputs["panels"]["r_SN_N"])[:, 0] - np.asarray(sol.outputs["r_BN_N"])
    assert np.ptp(np.asarray(sol.outputs["panels"]["theta"])) > 0.1  # the panel does swing
    np.testing.assert_allclose(com_drawn, r_SB_N, atol=COM_ATOL, rtol=0)
    assert g["panels"].shape == (N_STEPS + 1, 1, 4, 3)
    assert g["wheel_spoke"].shape == (N_STEPS + 1, 3, 2, 3)


def _spoke_angles(sc, g):
    """Angle of each drawn spoke about its spin axis, from the B-frame geometry."""
    rw, rw_j = sc.state_effectors[1], sc.state_effectors[2]
    w2 = np.concatenate([np.asarray(rw.w2Hat0_B), np.asarray(rw_j.w2Hat0_B)])
    w3 = np.concatenate([np.asarray(rw.w3Hat0_B), np.asarray(rw_j.w3Hat0_B)])
    v = g["wheel_spoke"][:, :, 1] - g["wheel_spoke"][:, :, 0]
    return np.arctan2(np.sum(v * w3, -1), np.sum(v * w2, -1))


def _wrap(x):
    return (x + np.pi) % (2.0 * np.pi) - np.pi


def test_wheel_spoke_advances_by_omega_dt(run):
    sc, sol = run
    g = animation.spacecraft_frames(sol, sc, frame="B")
    angles = _spoke_angles(sc, g)
    Omega = np.asarray(sol.outputs["rw"]["Omega"])
    advance = _wrap(np.diff(angles[:, :2], axis=0))
    # balanced wheels: the drawn angle advances by the trapezoid of the saved speeds
    np.testing.assert_allclose(advance, 0.5 * (Omega[1:] + Omega[:-1]) * DT, atol=GEOM_ATOL, rtol=0)
    # which is Omega dt to within the (small) speed change over a sample
    dOmega = np.max(np.abs(np.diff(Omega, axis=0)))
    assert np.max(np.abs(advance - Omega[:-1] * DT)) <= 0.5 * dOmega * DT + GEOM_ATOL
    # jitter wheel: the drawn angle is its theta output
    theta_j = np.asarray(sol.outputs["rw_j"]["theta"])[:, 0]
    np.testing.assert_allclose(_wrap(angles[:, 2] - theta_j), 0.0, atol=GEOM_ATOL, rtol=0)
    # and the trapezoid of its speeds reproduces the integrated angle
    trapz = animation.wheel_angles(sol.ts, sol.outputs["rw_j"]["Omega"], 0.3)[:, 0]
    np.testing.assert_allclose(trapz, theta_j, atol=TRAPZ_ATOL, rtol=0)


def test_subsampling_and_directions(run):
    sc, sol = run
    g = animation.spacecraft_frames(sol, sc, every=3, directions={"sun": [0.0, 3.0, 4.0]})
    np.testing.assert_array_equal(g["index"], np.arange(0, N_STEPS + 1, 3))
    np.testing.assert_allclose(g["ts"], np.asarray(sol.ts)[::3], atol=0, rtol=0)
    np.testing.assert_allclose(g["directions"]["sun"], np.tile([0.0, 0.6, 0.8], (7, 1)), atol=1e-15)
    g = animation.spacecraft_frames(sol, sc, max_frames=5, nadir=True, frame="B",
                                    directions={"sun": [0.0, 3.0, 4.0]})  # fmt: skip
    np.testing.assert_array_equal(g["index"], [0, 5, 10, 15, 20])
    sun_B = np.einsum("nij,j->ni", g["dcm_BN"], [0.0, 0.6, 0.8])
    np.testing.assert_allclose(g["directions"]["sun"], sun_B, atol=1e-15)
    r = np.asarray(sol.outputs["r_BN_N"])[g["index"]]
    nadir_B = np.einsum("nij,nj->ni", g["dcm_BN"], -r / np.linalg.norm(r, axis=-1, keepdims=True))
    np.testing.assert_allclose(g["directions"]["nadir"], nadir_B, atol=1e-15)


# --------------------------------------------------------------------------------------------------
# Generic scene (jaxsim.animation): what is drawn at a frame is the primitives' data at that frame


def test_scene_draws_primitives_at_each_frame():
    k = 5
    ts = np.linspace(0.0, 4.0, k)
    phi = 0.3 * ts
    tip = np.stack([2.0 * np.cos(phi), 2.0 * np.sin(phi), np.zeros(k)], axis=-1)  # |tip| = 2 m
    rod = np.stack([np.zeros((k, 3)), tip], axis=1)
    square = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    verts = np.broadcast_to(square + np.array([0.0, 0.0, 0.5]), (k, 1, 4, 3))
    z = np.broadcast_to([0.0, 0.0, 1.0], (k, 3))
    items = [js.animation.Polygons(verts), js.animation.Polyline(rod, color="k"),
             js.animation.Ray(z, length=0.5, label="z")]  # fmt: skip
    anim = js.animation.animate_scene(ts, items, fps=5, figsize=(2, 2))
    # The extent is 1.15 times the farthest drawn point (the rod's tip, 2 m); rays do not count.
    assert anim.extent == pytest.approx(1.15 * 2.0, rel=1e-15)
    ax = anim.fig.axes[0]
    rod_line, ray_line = ax.lines
    for i in (0, 3):
        anim._func(i)
        x, y, zz = rod_line.get_data_3d()
        np.testing.assert_array_equal(np.stack([x, y, zz], axis=-1), rod[i])
        x, y, zz = ray_line.get_data_3d()
        np.testing.assert_allclose(np.stack([x, y, zz], axis=-1)[1], [0.0, 0.0, 0.5 * 2.3],
                                   rtol=1e-15)  # fmt: skip
    assert ax.texts[0].get_text() == "z"
    with pytest.raises(ValueError, match=r"items\[1\].points"):  # one row per frame
        js.animation.animate_scene(ts, [items[0], js.animation.Polyline(rod[:-1])])
    with pytest.raises(ValueError, match=r"items\[0\]"):
        js.animation.animate_scene(ts, [rod])
    with pytest.raises(ValueError, match="extent"):
        js.animation.animate_scene(ts, items, extent=0.0)


def test_spacecraft_scene_is_the_geometry(run):
    sc, sol = run
    g = animation.spacecraft_frames(sol, sc, max_frames=3, directions={"sun": [0.0, 1.0, 0.0]})
    items = animation.spacecraft_scene(g)
    polys = [it for it in items if isinstance(it, js.animation.Polygons)]
    lines = [it for it in items if isinstance(it, js.animation.Polyline)]
    rays = [it for it in items if isinstance(it, js.animation.Ray)]
    np.testing.assert_array_equal(polys[0].verts, g["hub"][:, np.asarray(animation.HUB_FACES)])
    np.testing.assert_array_equal(polys[1].verts, g["panels"])
    assert len(lines) == 2 * g["wheel_center"].shape[1]  # a rim and a spoke per wheel
    np.testing.assert_array_equal(lines[1].points, g["wheel_spoke"][:, 0])
    assert [r.label for r in rays] == ["b1", "b2", "b3", "sun"]
    np.testing.assert_array_equal(rays[2].directions, g["axes"][:, 2])
    np.testing.assert_array_equal(rays[3].directions, g["directions"]["sun"])


# --------------------------------------------------------------------------------------------------
# Export


def test_gif_export(run, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    sc, sol = run
    anim = animation.animate_spacecraft(sol, sc, every=2, fps=10, figsize=(3, 3),
                                        directions={"sun": [1.0, 0.0, 0.0]})  # fmt: skip
    n_frames = len(range(0, N_STEPS + 1, 2))
    assert anim.geometry["ts"].shape == (n_frames,)
    path = animation.save_animation(anim, tmp_path / "sc.gif", dpi=40)
    assert path.exists() and path.stat().st_size > 0
    with PIL.open(path) as im:
        assert im.n_frames == n_frames


def test_mp4_export(run, tmp_path):
    if not matplotlib.animation.writers.is_available("ffmpeg"):
        pytest.skip("ffmpeg is not installed")
    sc, sol = run
    anim = animation.animate_spacecraft(sol, sc, max_frames=4, figsize=(3, 3))
    path = animation.save_animation(anim, tmp_path / "sc.mp4", dpi=40)
    assert path.exists() and path.stat().st_size > 0


def test_mp4_without_ffmpeg_names_the_tool(run, tmp_path, monkeypatch):
    import matplotlib.animation as manimation

    sc, sol = run
    anim = animation.animate_spacecraft(sol, sc, max_frames=2, figsize=(2, 2))
    monkeypatch.setattr(manimation.writers, "is_available", lambda name: False)
    with pytest.raises(RuntimeError, match="ffmpeg"):
        animation.save_animation(anim, tmp_path / "sc.mp4")
    assert not (tmp_path / "sc.mp4").exists()


# --------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        ({"panels": "nope"}, "panels"),
        ({"panels": "rw"}, "panels"),
        ({"wheels": "panels"}, "wheels"),
        ({"wheels": ["rw", "missing"]}, "wheels"),
        ({"every": 0}, "every"),
        ({"max_frames": 0}, "max_frames"),
        ({"hub_size": [1.0, -1.0, 1.0]}, "hub_size"),
        ({"panel_size": [[1.0, 1.0], [1.0, 1.0]]}, "panel_size"),
        ({"wheel_radius": 0.0}, "wheel_radius"),
        ({"frame": "X"}, "frame"),
        ({"directions": {"sun": [1.0, 0.0]}}, "directions"),
        ({"directions": {"sun": [0.0, 0.0, 0.0]}}, "directions"),
        ({"fps": 0.0}, "fps"),
        ({"time_unit": "day"}, "time_unit"),
    ],
)
def test_animate_validation(run, kwargs, arg):
    sc, sol = run
    with pytest.raises(ValueError, match=arg):
        animation.animate_spacecraft(sol, sc, **kwargs)


def test_solution_validation(run):
    sc, sol = run
    with pytest.raises(ValueError, match="sol"):  # no frames
        animation.spacecraft_frames({"ts": np.zeros(0), "outputs": {}}, sc)
    with pytest.raises(ValueError, match="sol"):  # a batch
        animation.spacecraft_frames({"ts": np.zeros((2, 3)), "outputs": {}}, sc)
    with pytest.raises(ValueError, match="sol"):  # no attitude
        animation.spacecraft_frames({"ts": np.zeros(2), "outputs": {"x": 1}}, sc)
    with pytest.raises(ValueError, match="sol"):  # panel angles missing
        animation.spacecraft_frames({"ts": np.zeros(1), "outputs": {"sigma_BN": np.zeros((1, 3))}},
                                    sc)  # fmt: skip
    with pytest.raises(ValueError, match="nadir"):
        animation.spacecraft_frames(
            {"ts": np.zeros(1), "outputs": {"sigma_BN": np.zeros((1, 3))}},
            fx.Spacecraft(fx.Hub(1.0, np.eye(3))),
            nadir=True,
        )
    with pytest.raises(ValueError, match="spacecraft"):
        animation.spacecraft_frames(sol, sc.hub)


def test_geometry_and_save_validation(run, tmp_path):
    with pytest.raises(ValueError, match="sigma_BN"):
        animation.spacecraft_geometry(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="sigma_BN"):
        animation.spacecraft_geometry(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="r_HB_B"):
        animation.spacecraft_geometry(np.zeros(3), panel_theta=[[0.0]], r_HB_B=[[0.0, 0.0]],
                                      dcm_HB=[np.eye(3)], panel_size=[[1.0, 1.0]])  # fmt: skip
    with pytest.raises(ValueError, match="w3Hat0_B"):  # left-handed wheel triad
        animation.spacecraft_geometry(np.zeros(3), wheel_theta=[[0.0]], gsHat_B=[[0.0, 0.0, 1.0]],
                                      w2Hat0_B=[[1.0, 0.0, 0.0]], w3Hat0_B=[[0.0, -1.0, 0.0]],
                                      rWB_B=[[0.0, 0.0, 0.0]])  # fmt: skip
    sc, sol = run
    anim = animation.animate_spacecraft(sol, sc, max_frames=2, figsize=(2, 2))
    with pytest.raises(ValueError, match="path"):
        animation.save_animation(anim, tmp_path / "sc.avi")
    with pytest.raises(ValueError, match="fps"):
        animation.save_animation(anim, tmp_path / "sc.gif", fps=-1.0)


def test_import_jaxsim_does_not_import_matplotlib():
    code = "import sys, jaxsim; assert 'matplotlib' not in sys.modules; jaxsim.animation"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
