"""Result conversion (`jaxsim.results`), the generic plots (`jaxsim.plotting`) and the spacecraft
plots (`effectors.plotting`): structure, data equality with the solution, units from the model,
figure contents (axes, lines, bands; not images), import hygiene."""

import dataclasses
import subprocess
import sys

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors import plotting
from jaxsim import results


matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt


MU = 3.986004415e14  # [m^3/s^2]
R0 = np.array([7000e3, 0.0, 0.0])  # [m]
V0 = np.array([0.0, 7546.05, 1.0])  # [m/s] about circular
OMEGA0 = np.array([1e-3, -2e-3, 1.5e-3])  # [rad/s]
SIGMA0 = np.array([0.1, 0.2, -0.1])
T1, DT, SAMPLE = 200.0, 1.0, 10.0  # [s]
# Plotted data are the solution's data converted to float64 numpy and scaled (km, minutes): equal up
# to one rounding of the scaling.
PLOT_RTOL = 1e-15


def _spacecraft():
    earth = fx.PointMassGravity(MU)
    hub = fx.Hub(750.0, [[900.0, 5.0, 0.0], [5.0, 800.0, 0.0], [0.0, 0.0, 600.0]])
    return fx.Spacecraft(hub, dynamic_effectors=(fx.GravityGradient(earth),), gravity=(earth,))


@pytest.fixture(scope="module")
def sol():
    sc = _spacecraft()
    return js.simulate(sc, sc.init_state(R0, V0, SIGMA0, OMEGA0), T1, dt=DT, sample_dt=SAMPLE)


@pytest.fixture(scope="module")
def batch():
    """Three members with different initial rates (jax.vmap over simulate)."""
    sc = _spacecraft()
    omegas = jnp.asarray(OMEGA0) * jnp.array([[1.0], [0.5], [-1.0]])
    run = lambda w: js.simulate(sc, sc.init_state(R0, V0, SIGMA0, w), T1, dt=DT, sample_dt=SAMPLE)
    return jax.vmap(run)(omegas)


def _wheel_solution(n=21, wheels=3):
    """A hand-made Solution with a wheel state (plots read only the fields, not the model)."""
    ts = np.linspace(0.0, 600.0, n)
    Omega = np.stack([100.0 * np.sin(ts / 100.0 + k) for k in range(wheels)], axis=-1)
    ys = {
        "hub": {"sigma_BN": np.zeros((n, 3)), "omega_BN_B": np.zeros((n, 3))},
        "rw": {"Omega": Omega},
    }
    return js.Solution(
        ts=ts, ys=ys, outputs={}, counts=None, stats={}, result=dfx.RESULTS.successful
    )


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------------------------------
# to_numpy / flatten


def test_to_numpy_structure_and_values(sol):
    res = results.to_numpy(sol)
    assert set(res) == {"ts", "ys", "outputs", "counts", "stats"}
    leaves = jax.tree.leaves({k: res[k] for k in ("ts", "ys", "outputs", "counts")})
    assert leaves and all(type(a) is np.ndarray for a in leaves)
    assert jax.tree.structure(res["ys"]) == jax.tree.structure(sol.ys)
    assert jax.tree.structure(res["outputs"]) == jax.tree.structure(sol.outputs)
    np.testing.assert_array_equal(res["ts"], sol.ts)
    np.testing.assert_array_equal(res["ys"]["hub"]["sigma_BN"], sol.ys["hub"]["sigma_BN"])
    np.testing.assert_array_equal(res["outputs"]["r_CN_N"], sol.outputs["r_CN_N"])
    np.testing.assert_array_equal(
        res["outputs"]["gravity_gradient"]["torque_B"], sol.outputs["gravity_gradient"]["torque_B"]
    )
    np.testing.assert_array_equal(res["counts"]["mrp_switches"], sol.counts["mrp_switches"])
    assert int(res["stats"]["num_steps"]) == round(T1 / DT)


def test_to_numpy_missing_fields_and_bad_input():
    res = results.to_numpy(_wheel_solution())
    assert res["counts"] == {} and res["outputs"] == {}
    # A to_numpy dict round-trips.
    again = results.to_numpy(res)
    np.testing.assert_array_equal(again["ys"]["rw"]["Omega"], res["ys"]["rw"]["Omega"])
    with pytest.raises(TypeError, match="Solution"):
        results.to_numpy([1.0, 2.0])


def test_flatten_keys(sol):
    flat = results.flatten(results.to_numpy(sol))
    for key in ["ts", "ys.hub.sigma_BN", "outputs.r_CN_N", "outputs.gravity_gradient.torque_B",
                "counts.mrp_switches", "stats.num_steps"]:  # fmt: skip
        assert key in flat, key
    np.testing.assert_array_equal(flat["ys.hub.omega_BN_B"], sol.ys["hub"]["omega_BN_B"])


# --------------------------------------------------------------------------------------------------
# to_xarray


def test_to_xarray_dataset(sol):
    pytest.importorskip("xarray")
    ds = results.to_xarray(sol, model=_spacecraft())
    np.testing.assert_array_equal(ds["time"].values, sol.ts)
    assert ds["time"].attrs["units"] == "s"
    np.testing.assert_array_equal(ds["r_CN_N"].values, sol.outputs["r_CN_N"])
    assert ds["r_CN_N"].dims == ("time", "xyz")
    assert ds["r_CN_N"].attrs["units"] == "m"
    assert ds["ISC_PntB_B"].dims == ("time", "row", "column")
    # Frame components are labelled x, y, z (vectors and the rows/columns of matrices), MRP
    # components s1, s2, s3.
    for dim in ("xyz", "row", "column"):
        assert list(ds[dim].values) == ["x", "y", "z"]
    assert list(ds["mrp"].values) == ["s1", "s2", "s3"]
    np.testing.assert_array_equal(
        ds["omega_BN_B"].sel(xyz="z").values, sol.outputs["omega_BN_B"][:, 2]
    )
    np.testing.assert_array_equal(
        ds["ISC_PntB_B"].sel(row="x", column="y").values, sol.outputs["ISC_PntB_B"][:, 0, 1]
    )
    assert ds["ys.hub.sigma_BN"].dims == ("time", "mrp")
    assert ds["gravity_gradient.torque_B"].dims == ("time", "xyz")
    np.testing.assert_array_equal(ds["ys.hub.sigma_BN"].values, sol.ys["hub"]["sigma_BN"])
    np.testing.assert_array_equal(
        ds["gravity_gradient.torque_B"].values, sol.outputs["gravity_gradient"]["torque_B"]
    )
    np.testing.assert_array_equal(ds["counts.mrp_switches"].values, sol.counts["mrp_switches"])
    assert int(ds["stats.num_steps"]) == round(T1 / DT)
    assert ds["stats.num_steps"].attrs["units"] == "count"
    assert float(ds["t_final"]) == T1 and int(ds["result"]) == 0
    # Units come from the model: hub outputs, energies, states, nested effector outputs, counters.
    assert ds["totRotAngMomPntC_N"].attrs["units"] == "kg m^2/s"
    assert ds["ys.hub.omega_BN_B"].attrs["units"] == "rad/s"
    assert ds["gravity_gradient.torque_B"].attrs["units"] == "N m"
    assert ds["counts.mrp_switches"].attrs["units"] == "count"
    # The Solution carries its units (`Solution.info`): the model is not needed.
    xr = pytest.importorskip("xarray")
    xr.testing.assert_identical(sol.to_xarray(), ds)
    # A hand-made Solution has no info: the engine knows no units but the counters'.
    bare = results.to_xarray(dataclasses.replace(sol, info=None))
    assert "units" not in bare["r_CN_N"].attrs
    assert bare["counts.mrp_switches"].attrs["units"] == "count"
    # Selection by time works on the coordinate.
    np.testing.assert_array_equal(ds["v_CN_N"].sel(time=100.0).values, sol.outputs["v_CN_N"][10])


def test_model_units_follow_the_solution_structure(sol):
    """Every unit the model gives names a recorded leaf (no stale names), and a System nests its
    objects' units under their names, as its outputs."""
    sc = _spacecraft()
    u = results.model_units(sc)
    assert u["outputs"]["r_CN_N"] == "m" and u["ys"]["hub"]["sigma_BN"] == "-"
    flat_out = dict(results.flatten({"outputs": sol.outputs}))
    for path in results.flatten({"outputs": u["outputs"]}):
        assert path in flat_out, path
    rw = fx.ReactionWheels(np.eye(3), 0.05, name="rw")
    sc_rw = fx.Spacecraft(fx.Hub(10.0, np.eye(3)), state_effectors=(rw,), name="craft")
    assert sc_rw.units()["ys"]["rw"] == {"Omega": "rad/s"}  # balanced wheels: no angle state
    system = js.System([sc_rw])
    su = results.model_units(system)
    assert su["outputs"]["craft"]["rw"]["Omega"] == "rad/s"
    assert su["ys"]["craft"]["hub"]["omega_BN_B"] == "rad/s"
    with pytest.raises(TypeError, match="model"):
        results.model_units(object())


def test_to_xarray_batched(batch):
    pytest.importorskip("xarray")
    ds = results.to_xarray(batch, member_dim="run")
    assert ds["omega_BN_B"].dims == ("run", "time", "xyz")
    assert ds["omega_BN_B"].attrs["units"] == "rad/s"  # from the batched Solution's info
    assert ds.sizes["run"] == 3 and ds.sizes["time"] == len(batch.ts[0])
    np.testing.assert_array_equal(ds["omega_BN_B"].values, batch.outputs["omega_BN_B"])
    np.testing.assert_array_equal(ds["time"].values, batch.ts[0])
    bad = results.to_numpy(batch)
    bad["ts"] = bad["ts"] + np.arange(3.0)[:, None]
    with pytest.raises(ValueError, match="share"):
        results.to_xarray(bad)


def test_to_xarray_component_dims_only_for_frame_vectors():
    """Arrays not named by the frame-suffix convention (the wheels of `Omega`) keep numbered
    dimensions without a model that names them: three wheels are not x, y, z."""
    pytest.importorskip("xarray")
    s = _wheel_solution(n=5)
    ds = results.to_xarray(s)
    assert ds["ys.rw.Omega"].dims == ("time", "ys.rw.Omega_0")
    assert ds["ys.hub.omega_BN_B"].dims == ("time", "xyz")


def test_to_xarray_to_netcdf_round_trip(sol, tmp_path):
    """The Dataset writes to netCDF (scipy's netCDF3 engine) and reads back identical: values,
    dimensions, x/y/z coordinates, units and the stats attributes."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("scipy")
    ds = results.to_xarray(sol, model=_spacecraft())
    path = tmp_path / "run.nc"
    ds.to_netcdf(path, engine="scipy")
    back = xr.load_dataset(path, engine="scipy")
    xr.testing.assert_identical(back, ds)
    assert back["omega_BN_B"].attrs["units"] == "rad/s"
    assert int(back["stats.num_steps"]) == round(T1 / DT)
    assert back.attrs["solver"] == "RK4" and back.attrs["dt"] == DT


def test_to_xarray_without_xarray_names_the_extra(sol, monkeypatch):
    monkeypatch.setitem(sys.modules, "xarray", None)  # makes `import xarray` raise ImportError
    with pytest.raises(ImportError, match="notebooks"):
        results.to_xarray(sol)


def test_plotting_without_matplotlib_names_it(sol, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="matplotlib"):
        plotting.plot_orbit(sol)


def test_import_jaxsim_does_not_import_matplotlib_or_xarray():
    code = "import sys, jaxsim; print('matplotlib' in sys.modules, 'xarray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out


# --------------------------------------------------------------------------------------------------
# Plots


def _legend_texts(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend is not None else []


def test_plot_orbit(sol):
    """The orbit in 3D (km, labelled N axes, the Earth, the start, a legend) and the radius change."""
    fig = plotting.plot_orbit(sol)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax3, ax = fig.get_axes()
    assert ax3.name == "3d"
    r_km = np.asarray(sol.outputs["r_CN_N"]) / 1e3
    x, y, z = ax3.lines[0].get_data_3d()
    np.testing.assert_allclose(np.stack([x, y, z], axis=-1), r_km, rtol=PLOT_RTOL)
    assert len(ax3.collections) == 1  # the Earth
    assert _legend_texts(ax3) == ["Earth", "r_CN_N", "t0"]
    assert (ax3.get_xlabel(), ax3.get_ylabel(), ax3.get_zlabel()) == (
        "x_N [km]", "y_N [km]", "z_N [km]",
    )  # fmt: skip
    # The Earth's radius fits in the equal-scale box.
    assert ax3.get_xlim()[1] - ax3.get_xlim()[0] >= 2 * plotting.EARTH_RADIUS / 1e3
    t, change = ax.lines[0].get_data()
    np.testing.assert_allclose(t, np.asarray(sol.ts) / 60.0, rtol=PLOT_RTOL)
    radius = np.linalg.norm(r_km, axis=-1)
    np.testing.assert_allclose(change, (radius - radius[0]) * 1e3, rtol=0, atol=1e-9 * radius[0])
    assert ax.get_ylabel() == "radius change [m]" and f"{radius[0]:.3f} km" in ax.get_title()
    # The body-origin position is available too; no body drawn on request.
    fig = plotting.plot_orbit(sol, key="r_BN_N", body_radius=None)
    ax3 = fig.get_axes()[0]
    np.testing.assert_allclose(ax3.lines[0].get_data_3d()[0],
                               np.asarray(sol.outputs["r_BN_N"])[:, 0] / 1e3, rtol=PLOT_RTOL)  # fmt: skip
    assert len(ax3.collections) == 0 and _legend_texts(ax3) == ["r_BN_N", "t0"]
    with pytest.raises(ValueError, match="body_radius.*-1"):
        plotting.plot_orbit(sol, body_radius=-1.0)


def test_plots_have_no_offset_tick_labels():
    """A small change of a large value (a near-circular orbit's radius in km) is labelled without
    an offset such as "1e-8+6.878e3"."""
    ts = np.linspace(0.0, 600.0, 61)
    r = 6878.137e3 + 1e-5 * np.sin(ts / 100.0)
    s = {"ts": ts, "outputs": {"radius": r}, "ys": {}}
    fig = js.plotting.plot_series(s, "radius", time_unit="s")
    fig.canvas.draw()
    (ax,) = fig.get_axes()
    assert ax.yaxis.get_major_formatter().offset == 0  # (a power-of-ten multiplier may remain)
    # matplotlib's default would have drawn an offset: the oracle can fail.
    plain = plt.figure().add_subplot()
    plain.plot(ts, r)
    plain.figure.canvas.draw()
    assert plain.yaxis.get_major_formatter().offset != 0


def test_plot_series_legend_names_components(sol):
    fig = js.plotting.plot_series(sol, ["omega_BN_B", "massSC"], units=_spacecraft())
    ax0, ax1 = fig.get_axes()
    assert _legend_texts(ax0) == ["x", "y", "z"]
    assert _legend_texts(ax1) == ["[0]"]
    assert ax0.get_ylabel() == "omega_BN_B [rad/s]" and ax1.get_ylabel() == "massSC [kg]"


def test_plot_attitude(sol):
    fig = plotting.plot_attitude(sol, time_unit="s")
    axes = fig.get_axes()
    assert len(axes) == 2
    for ax, key, unit in zip(axes, ("sigma_BN", "omega_BN_B"), ("-", "rad/s")):
        assert len(ax.lines) == 3
        assert _legend_texts(ax) == ["x", "y", "z"]
        assert ax.get_ylabel() == f"{key} [{unit}]"
        for i, line in enumerate(ax.lines):
            np.testing.assert_array_equal(line.get_xdata(), sol.ts)
            np.testing.assert_array_equal(line.get_ydata(), np.asarray(sol.outputs[key])[:, i])


def test_plot_attitude_from_states_only():
    """Without outputs the hub state is plotted."""
    s = _wheel_solution()
    fig = plotting.plot_attitude(s)
    np.testing.assert_array_equal(
        fig.get_axes()[1].lines[2].get_ydata(), s.ys["hub"]["omega_BN_B"][:, 2]
    )


def test_plot_energy_drift(sol):
    keys = ("totOrbEnergy", "totRotEnergy", "totRotAngMomPntC_N")
    fig = plotting.plot_energy_drift(sol, keys=keys)
    (ax,) = fig.get_axes()
    assert [line.get_label() for line in ax.lines] == list(keys)
    assert _legend_texts(ax) == list(keys) and ax.get_ylabel() == "relative drift [-]"
    assert ax.get_yscale() == "log"
    E = np.asarray(sol.outputs["totRotEnergy"])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), np.abs(E - E[0]) / abs(E[0]), rtol=1e-12)
    H = np.asarray(sol.outputs["totRotAngMomPntC_N"])
    expected = np.linalg.norm(H - H[0], axis=-1) / np.linalg.norm(H[0])
    np.testing.assert_allclose(ax.lines[2].get_ydata(), expected, rtol=1e-12)
    # The gravity-gradient torque changes the rotational quantities: a real, non-zero drift.
    assert ax.lines[1].get_ydata()[-1] > 0.0
    # Default keys: the four quantities Basilisk logs.
    assert len(plotting.plot_energy_drift(sol).get_axes()[0].lines) == 4


def test_plot_energy_drift_missing_key(sol):
    with pytest.raises(ValueError, match="totEnergy"):
        plotting.plot_energy_drift(sol, keys=("totOrbEnergy", "totEnergy"))


def test_generic_plots_name_quantities_and_take_units_from_the_model(sol):
    """The engine's plots know no spacecraft: keys are given, units come from the model."""
    fig = js.plotting.plot_series(sol, ["omega_BN_B", "gravity_gradient.torque_B"],
                                  units=_spacecraft(), time_unit="s")  # fmt: skip
    ax0, ax1 = fig.get_axes()
    assert ax0.get_ylabel() == "omega_BN_B [rad/s]" and ax1.get_ylabel().endswith("[N m]")
    # A state path takes its unit from the model's state units.
    fig = js.plotting.plot_series(sol, "hub.sigma_BN", units=_spacecraft(), time_unit="s")
    assert fig.get_axes()[0].get_ylabel() == "hub.sigma_BN [-]"
    np.testing.assert_array_equal(
        ax1.lines[2].get_ydata(), np.asarray(sol.outputs["gravity_gradient"]["torque_B"])[:, 2]
    )
    fig = js.plotting.plot_trajectory(sol, "hub.r_BN_N", scale=2.0, unit="half-m")  # a state path
    np.testing.assert_allclose(fig.get_axes()[0].lines[0].get_ydata(),
                               2.0 * np.asarray(sol.ys["hub"]["r_BN_N"])[:, 1], rtol=PLOT_RTOL)  # fmt: skip
    with pytest.raises(ValueError, match="nope"):
        js.plotting.plot_series(sol, "nope")
    for name in ("plot_orbit", "plot_attitude", "plot_wheel_speeds"):  # in effectors.plotting
        assert not hasattr(js.plotting, name)
    with pytest.raises(TypeError):  # no spacecraft default keys in the engine
        js.plotting.plot_energy_drift(sol)


def test_relative_drift_zero_initial_value_is_absolute():
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_array_equal(plotting.relative_drift(x), [0.0, 5.0])
    np.testing.assert_allclose(plotting.relative_drift(np.array([2.0, 3.0, 1.0])), [0.0, 0.5, 0.5])


def test_plot_wheel_speeds():
    s = _wheel_solution()
    fig = plotting.plot_wheel_speeds(s, name="rw")
    (ax,) = fig.get_axes()
    assert len(ax.lines) == 3
    assert _legend_texts(ax) == ["wheel 1", "wheel 2", "wheel 3"]
    assert ax.get_ylabel() == "Omega [rad/s]" and ax.get_xlabel() == "t [min]"
    for i, line in enumerate(ax.lines):
        np.testing.assert_allclose(line.get_xdata(), s.ts / 60.0, rtol=PLOT_RTOL)
        np.testing.assert_array_equal(line.get_ydata(), s.ys["rw"]["Omega"][:, i])
    fig = plotting.plot_wheel_speeds(s, rpm=True)
    np.testing.assert_allclose(fig.get_axes()[0].lines[0].get_ydata(),
                               s.ys["rw"]["Omega"][:, 0] * 60 / (2 * np.pi), rtol=PLOT_RTOL)  # fmt: skip
    with pytest.raises(ValueError, match="wheels"):
        plotting.plot_wheel_speeds(s, name="wheels")


def test_plot_dispersion_bands_and_median():
    rng = np.random.default_rng(0)
    ts = np.linspace(0.0, 10.0, 11)
    x = rng.standard_normal((64, 11, 3)).cumsum(axis=1)
    fig = plotting.plot_dispersion(ts, x, percentiles=(5, 25), members=4, reference=x[0],
                                   labels=["x", "y", "z"], ylabel="omega")  # fmt: skip
    axes = fig.get_axes()
    assert len(axes) == 3
    for i, ax in enumerate(axes):
        assert len(ax.lines) == 1 + 4 + 1  # median, members, reference
        np.testing.assert_array_equal(ax.lines[0].get_ydata(), np.median(x[..., i], axis=0))
        np.testing.assert_array_equal(ax.lines[1].get_ydata(), x[0, :, i])
        assert len(ax.collections) == 2  # one band per percentile
        # The outer band spans the 5th..95th percentiles.
        verts = ax.collections[0].get_paths()[0].vertices
        lo, hi = np.percentile(x[..., i], [5, 95], axis=0)
        assert np.isclose(verts[:, 1].min(), lo.min()) and np.isclose(verts[:, 1].max(), hi.max())
        assert ax.get_ylabel() == f"omega {'xyz'[i]}"


def test_plot_dispersion_single_quantity_from_vmapped_solution(batch):
    E = np.asarray(batch.outputs["totRotEnergy"])
    fig = plotting.plot_dispersion(batch.ts, E, percentiles=10.0, time_unit="min")
    (ax,) = fig.get_axes()
    np.testing.assert_allclose(
        ax.lines[0].get_xdata(), np.asarray(batch.ts[0]) / 60.0, rtol=PLOT_RTOL
    )
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), np.median(E, axis=0))
    assert len(ax.collections) == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [({"samples": np.zeros((4, 5))}, "samples"), ({"percentiles": (60.0,)}, "percentiles"),
     ({"labels": ["a"]}, "labels"), ({"time_unit": "days"}, "time_unit")],
)  # fmt: skip
def test_plot_dispersion_validation(kwargs, match):
    args = {"ts": np.arange(11.0), "samples": np.zeros((4, 11, 2)), **kwargs}
    with pytest.raises(ValueError, match=match):
        plotting.plot_dispersion(**args)


def test_single_run_plots_reject_batches(batch):
    with pytest.raises(ValueError, match="plot_dispersion"):
        plotting.plot_attitude(batch)


def test_plots_accept_to_numpy_dict(sol):
    fig = plotting.plot_attitude(results.to_numpy(sol))
    np.testing.assert_array_equal(
        fig.get_axes()[0].lines[0].get_ydata(), sol.outputs["sigma_BN"][:, 0]
    )
