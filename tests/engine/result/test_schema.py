"""The one schema of runs, batches and campaigns (`jaxsim._result._schema`): shared per-effector
dimensions, labelled components, units on every variable, run attributes, events as variables,
`Solution.info` through `jit` / `vmap`, `to_xarray(BatchResult)`, Zarr 3 without warnings.

Oracles: the Datasets' values against the Solution's arrays (bitwise), their names, dimensions
and units against the model's declarations, and the same names/dimensions/units for a run, a
vmapped batch, a `run_batch` result and (in `test_campaign_store.py`) a campaign store. Warnings
are errors under the project's pytest settings, so a Zarr write that warns fails here.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim import montecarlo as mc, results
from tests._sharding_worker import OSC, oscillator_member


xr = pytest.importorskip("xarray")

I_B = np.diag([900.0, 800.0, 600.0])  # [kg m^2]
T1, DT, SAMPLE = 1.0, 0.1, 0.5  # [s]
EPOCH = "2026-01-01T00:00:00+00:00"
# Event times: root finder to about event_tol (1e-9), plus RK4's phase error, (omega dt)^5 / 120
# per step: at dt = 0.01 s about 1e-10 relative (1e-6 is loose), at dt = 0.1 s and omega = sqrt(2)
# about 5e-6 rad over the 11 steps to the zero (1e-5 relative).
EVENT_RTOL = 1e-6
EVENT_RTOL_COARSE = 1e-5


def _spacecraft():
    """A hub, three wheels and two hinged panels (two effectors with units along a dimension)."""
    rw = fx.ReactionWheels(gsHat_B=np.eye(3), Js=[0.1] * 3, Omega=[50.0, -30.0, 20.0], name="rw")
    panels = fx.HingedRigidBodies(
        mass=[10.0, 10.0], IPntS_S=[np.diag([1.0, 2.0, 3.0])] * 2, d=[1.0, 1.0], k=[50.0, 50.0],
        r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]], dcm_HB=[np.eye(3), np.diag([-1.0, -1.0, 1.0])],
        c=[1.0, 1.0], theta0=[0.1, 0.0], name="panels",
    )  # fmt: skip
    return fx.Spacecraft(fx.Hub(mass=750.0, IHubPntBc_B=I_B), state_effectors=[rw, panels])


@pytest.fixture(scope="module")
def run():
    sc = _spacecraft()
    y0 = sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])
    return sc, js.simulate(sc, y0, T1, dt=DT, sample_dt=SAMPLE, solver=js.Euler())


def test_shared_element_dimensions_labels_units_and_attributes(run):
    sc, sol = run
    ds = sol.to_xarray(epoch=EPOCH)  # no model: the Solution carries its schema
    assert ds["rw.Omega"].dims == ds["ys.rw.Omega"].dims == ("time", "wheel")
    assert ds["rw.power"].dims == ("time", "wheel")
    assert ds["panels.theta"].dims == ds["ys.panels.thetaDot"].dims == ("time", "panel")
    assert ds["panels.r_SN_N"].dims == ("time", "panel", "xyz")
    assert ds["panels.sigma_SN"].dims == ("time", "panel", "mrp")
    assert ds["ys.hub.sigma_BN"].dims == ("time", "mrp")
    assert ds["ISC_PntB_B"].dims == ("time", "row", "column")
    np.testing.assert_array_equal(ds["wheel"], [0, 1, 2])
    np.testing.assert_array_equal(ds["panel"], [0, 1])
    assert list(ds["xyz"].values) == ["x", "y", "z"]
    assert list(ds["mrp"].values) == ["s1", "s2", "s3"]
    # No anonymous dimensions; every variable has units.
    assert set(ds.dims) == {"time", "wheel", "panel", "xyz", "mrp", "row", "column"}
    assert [v for v in ds.data_vars if not ds[v].attrs.get("units")] == []
    assert ds["rw.Omega"].attrs["units"] == "rad/s" and ds["t_final"].attrs["units"] == "s"
    np.testing.assert_array_equal(ds["rw.Omega"].sel(wheel=1), sol.outputs["rw"]["Omega"][:, 1])
    np.testing.assert_array_equal(ds["panels.r_SN_N"].values, sol.outputs["panels"]["r_SN_N"])
    np.testing.assert_array_equal(ds["time"], sol.ts)
    attrs = ds.attrs
    assert (attrs["solver"], attrs["dt"], attrs["t0"], attrs["t1"]) == ("Euler", DT, 0.0, T1)
    assert attrs["jaxsim_version"] == js.__version__ and attrs["epoch"] == EPOCH
    assert attrs["schema"] == "jaxsim.schema/1" and "rtol" not in attrs


def test_two_effectors_declaring_one_dimension_are_qualified():
    rw = lambda name: fx.ReactionWheels(gsHat_B=np.eye(3)[:2], Js=[0.1, 0.1], name=name)
    sc = fx.Spacecraft(fx.Hub(10.0, np.eye(3)), state_effectors=[rw("rw1"), rw("rw2")])
    info = js._result._schema.run_info(sc)
    assert dict(info.elements)["rw1"] == "rw1.wheel" and dict(info.elements)["rw2"] == "rw2.wheel"
    system = js.System([sc], name="pair")
    assert js._result._schema.model_elements(system)["spacecraft.rw1"] == "spacecraft.rw1.wheel"


def test_info_survives_jit_and_vmap():
    """`Solution.info` is a static field: the same through `jax.jit` and `jax.vmap` (on the
    oscillator; the spacecraft's units through `vmap`: `test_results.test_to_xarray_batched`)."""
    run = lambda a: oscillator_member({"a": a, "x0": jnp.asarray(1.0)})
    sol = run(jnp.asarray(1.0))
    assert sol.info is not None and dict(sol.info.attrs)["solver"] == "RK4"
    assert jax.jit(run)(jnp.asarray(1.0)).info == sol.info
    batch = jax.vmap(run)(jnp.array([0.5, 1.0]))
    assert batch.info == sol.info
    ds = batch.to_xarray()
    assert ds["x"].dims == ("member", "time") and ds["stats.num_steps"].dims == ("member",)
    assert ds["ys"].dims == ("member", "time", "ys_0")  # an array state: numbered axis
    np.testing.assert_array_equal(ds["x"].values, batch.outputs["x"])


def test_events_are_variables():
    """A run with events: firing times, names and indices along `event` (unused rows: NaN, "",
    -1), on a harmonic oscillator x = cos t crossing zero at pi/2 (one firing before t = 2)."""
    down = js.Event(lambda t, y, args: y[0], direction="falling", name="x_zero")
    up = js.Event(lambda t, y, args: y[0] - 2.0, direction="rising", name="x_two")  # never fires
    sol = js.simulate(OSC, OSC.init_state(), 2.0, dt=0.01, events=(down, up), max_events=3)
    ds = sol.to_xarray()
    assert ds["event.time"].dims == ds["event.kind"].dims == ("event",)
    assert ds.sizes["event"] == 3 and int(ds["event.count"]) == 1
    np.testing.assert_allclose(float(ds["event.time"][0]), np.pi / 2, rtol=EVENT_RTOL)
    assert list(ds["event.kind"].values) == ["x_zero", "", ""]
    np.testing.assert_array_equal(ds["event.index"], [0, -1, -1])
    assert ds["event.time"].attrs["units"] == "s"


def test_batch_result_has_the_run_schema(tmp_path):
    """`to_xarray(run_batch(...))`: the names, dimensions and units of a vmapped run, plus
    `member`, `ok`, `result`, `params.<name>`; a Solution under a key is prefixed by it."""
    params = {"a": np.array([0.5, 1.0, 2.0]), "x0": np.array([1.0, 0.9, 1.1])}
    res = mc.run_batch(oscillator_member, params, chunk_size=3, workers=1)
    ds = results.to_xarray(res)
    ref = jax.vmap(oscillator_member)(jax.tree.map(jnp.asarray, params)).to_xarray()
    for name in ref.data_vars:
        assert ds[name].dims == ref[name].dims, name
        assert ds[name].attrs.get("units") == ref[name].attrs.get("units"), name
        np.testing.assert_array_equal(ds[name].values, ref[name].values, err_msg=name)
    np.testing.assert_array_equal(ds["member"], [0, 1, 2])
    np.testing.assert_array_equal(ds["params.a"], params["a"])
    assert ds["ok"].values.all() and ds.attrs["solver"] == "RK4"
    nested = mc.run_batch(
        lambda p: {"sol": oscillator_member(p), "cost": p["a"] ** 2}, params, chunk_size=3,
        workers=1,
    )  # fmt: skip
    ds2 = nested.to_xarray()
    assert ds2["sol.x"].dims == ("member", "time") and ds2["cost"].dims == ("member",)
    np.testing.assert_array_equal(ds2["sol.x"].values, ds["x"].values)


def test_zarr_round_trip_without_warnings(run, tmp_path):
    """Zarr 3 (warnings are errors here): identical on reading back, labels included."""
    pytest.importorskip("zarr")
    _, sol = run
    ds = results.to_zarr(sol, tmp_path / "run.zarr")
    back = xr.open_zarr(tmp_path / "run.zarr", consolidated=False).load()
    xr.testing.assert_identical(back, ds)


def test_bad_epoch_and_bad_input_are_refused(run):
    _, sol = run
    with pytest.raises(ValueError, match="ISO 8601"):
        sol.to_xarray(epoch="yesterday")
    with pytest.raises(TypeError, match="BatchResult"):
        results.to_xarray([1.0])
    with pytest.raises(ValueError, match="`model` and `units` apply to Solutions"):
        results.to_xarray(_batch(), model=1)


def _batch():
    return mc.BatchResult(
        members=np.arange(1), ok=np.ones(1, bool), result=np.zeros(1, np.int32),
        params={}, outputs={}, n_total=1, complete=True,
    )  # fmt: skip


def test_events_in_a_batch_and_a_campaign(tmp_path):
    """Members with events: `to_xarray(run_batch(...))` and `open_campaign` give the same names
    and dimensions (event times, names, indices, states before/after each firing); the first
    zero of x = cos(sqrt(a) t) at pi / (2 sqrt(a))."""
    pytest.importorskip("zarr")
    down = js.Event(lambda t, y, args: y[0], direction="falling", name="x_zero")

    def member(p):
        m = OSC.__class__(a=p["a"])
        return js.simulate(
            m, m.init_state(), 2.0, dt=0.1, sample_dt=0.5, events=(down,), max_events=2,
            throw=False,
        )  # fmt: skip

    params = {"a": np.array([1.0, 2.0])}
    batch = mc.run_batch(member, params, chunk_size=2, workers=1).to_xarray()
    mc.run_campaign(member, params, tmp_path / "c", chunk_size=2)
    store = mc.open_campaign(tmp_path / "c")
    assert set(batch.data_vars) == set(store.data_vars) - {"committed"}
    for name in batch.data_vars:
        assert store[name].dims == batch[name].dims, name
    assert batch["event.time"].dims == ("member", "event")
    np.testing.assert_allclose(
        batch["event.time"][:, 0], np.pi / (2 * np.sqrt(params["a"])), rtol=EVENT_RTOL_COARSE
    )
    assert (store["event.kind"].values == [["x_zero", ""], ["x_zero", ""]]).all()
    assert store["event.y_before"].dims == ("member", "event", "event.y_before_0")


class _Labelled(js.AbstractDynamicObject):
    """x'' = -x with its energy and a command `args["push"]["f"]`, units given by the field
    `declared` (so one class serves every case)."""

    declared: dict | None = eqx.field(static=True, default=None)
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": y["v"], "v": -y["x"] + args["push"]["f"]}

    def outputs(self, t, y, args):
        return {"energy": 0.5 * (y["x"] ** 2 + y["v"] ** 2)}

    def command_spec(self):
        return {"push": {"f": ()}}

    def units(self):
        return self.declared


_FULL = {
    "ys": {"x": "m", "v": "m/s"},
    "outputs": {"energy": "J/kg"},
    "args": {"push": {"f": "N/kg"}},
}
_PUSH = {"push": {"f": 0.0}}


def _labelled_run(declared, **kwargs):
    m = _Labelled(declared=declared)
    return js.simulate(m, m.init_state(), 0.2, dt=0.1, args=_PUSH, **kwargs)


def test_declared_units_reach_the_dataset_and_undeclared_carry_none():
    ds = _labelled_run(_FULL).to_xarray()
    assert ds["ys.x"].attrs["units"] == "m" and ds["energy"].attrs["units"] == "J/kg"
    bare = _labelled_run(None).to_xarray()  # undeclared: nothing checked, no units
    assert "units" not in bare["ys.x"].attrs and "units" not in bare["energy"].attrs
    # A unit string stands for a whole subtree (here the whole state).
    ds = _labelled_run({**_FULL, "ys": "m"}).to_xarray()
    assert ds["ys.x"].attrs["units"] == ds["ys.v"].attrs["units"] == "m"


@pytest.mark.parametrize(
    ("declared", "match"),
    [
        ({**_FULL, "ys": {"x": "m"}}, r"_Labelled\.units\(\)` gives no unit for state leaves \['ys\.v'\]"),
        ({**_FULL, "ys": {"x": "m", "v": "m/s", "a": "m/s^2"}}, r"_Labelled\.units\(\)` names \['ys\.a'\]"),
        ({**_FULL, "outputs": {}}, r"no unit for outputs \['outputs\.energy'\]"),
        ({**_FULL, "outputs": {"energy": "J/kg", "power": "W"}}, r"names \['outputs\.power'\]"),
        ({**_FULL, "args": {}}, r"no unit for commands \['args\.push\.f'\]"),
        ({**_FULL, "ys": {"x": "m", "v": {"w": "m/s"}}}, r"no unit for state leaves \['ys\.v'\].*'ys\.v\.w'"),
    ],
    ids=["state missing", "state unknown", "output missing", "output unknown", "command missing",
         "nested below a leaf"],
)  # fmt: skip
def test_units_that_do_not_fit_the_run_are_refused_by_name(declared, match):
    with pytest.raises(ValueError, match=match):
        _labelled_run(declared)
    with pytest.raises(ValueError, match=match):  # under jit: when the run is traced
        jax.jit(lambda: _labelled_run(declared))()


def test_units_of_the_wrong_form_are_refused():
    with pytest.raises(
        TypeError, match=r"_Labelled\.units\(\): the unit of `ys\.x` must be a string"
    ):
        _labelled_run({**_FULL, "ys": {"x": 1.0, "v": "m/s"}})
    with pytest.raises(
        TypeError, match=r"_Labelled\.units\(\) must return None or a dict with keys"
    ):
        _labelled_run({**_FULL, "state": {}})


def test_units_without_recorded_outputs_and_in_a_system():
    # Outputs not recorded: only the state and commands are checked.
    sol = _labelled_run({**_FULL, "outputs": {"power": "W"}}, outputs=False)
    assert sol.info.unit("ys.x") == "m"
    # A System checks each object against its own part; an undeclared object is not checked.
    a, b = _Labelled(declared=_FULL, name="a"), _Labelled(name="b")
    system = js.System([a, b])
    args = {"a": _PUSH, "b": _PUSH}
    sol = js.simulate(system, system.init_state(), 0.2, dt=0.1, args=args)
    assert sol.info.unit("outputs.a.energy") == "J/kg" and sol.info.unit("ys.b.x") is None
    assert system.units()["args"] == {"a": {"push": {"f": "N/kg"}}}
    bad = js.System([_Labelled(declared={**_FULL, "ys": {"x": "m"}}, name="a"), b])
    with pytest.raises(ValueError, match=r"no unit for state leaves \['ys\.v'\]"):
        js.simulate(bad, bad.init_state(), 0.2, dt=0.1, args=args)
