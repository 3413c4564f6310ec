"""The labelled campaign store and its summaries (`open_campaign`, `summarize_campaign`,
`campaign_failures`, `failure_counts`, `plot_campaign`).

Oracles: the lazily opened xarray Dataset against `load_campaign` (bitwise), store summaries
against `summarize(load_campaign(...))` (bitwise, also when read in blocks of one sample time),
the failure table against `BatchResult.failure_table` and the causes injected, the plotted median
against the summary, and the exact ImportError without the optional extra.
"""

import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib
import numpy as np
import pytest

import jaxsim as js
from jaxsim import montecarlo as mc
from tests._sharding_worker import OSC, oscillator_member


matplotlib.use("Agg")
pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")
xr = pytest.importorskip(
    "xarray", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]"
)

DISP = mc.Dispersions(
    {"a": mc.Uniform(0.5, 2.0, unit="1/s^2"), "x0": mc.Normal(1.0, 0.1, unit="m")}
)
NONFINITE = (
    "simulate: the state became non-finite (NaN/inf); check the model's parameters and the step "
    "size."
)


def raising_or_not(p):
    """The oscillator; a member with `a > 10` raises at run time (`eqx.error_if`)."""
    sol = oscillator_member(p)
    return eqx.tree_at(lambda s: s.ts, sol, eqx.error_if(sol.ts, p["a"] > 10.0, "a too large"))


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    d = tmp_path_factory.mktemp("store") / "c"
    # Member 2 is NaN (non-finite state), members 5 and 7 raise.
    a = np.array([0.5, 1.0, np.nan, 1.5, 2.0, 1e12, 0.7, 20.0, 1.2, 0.9])
    params = {"a": a, "x0": np.linspace(0.9, 1.1, a.size)}
    return d, mc.run_campaign(raising_or_not, params, d, chunk_size=3)


def test_open_campaign_is_lazy_and_labelled(campaign, tmp_path):
    d, res = campaign
    ds = mc.open_campaign(d)
    x = ds["x"]
    assert not x.variable._in_memory, "opened eagerly"
    # The schema of runs and batches: outputs by name, the array state `ys` with a numbered axis.
    assert x.dims == ("member", "time") and ds["ys"].dims == ("member", "time", "ys_0")
    assert ds["stats.num_steps"].dims == ("member",)
    assert x.attrs["path"] == "outputs/outputs/x" and ds["time"].attrs["units"] == "s"
    assert ds.sizes == {"member": 10, "time": 5, "ys_0": 2}
    np.testing.assert_array_equal(ds["member"], np.arange(10))
    assert ds["committed"].values.all()
    loaded = mc.load_campaign(d)
    np.testing.assert_array_equal(ds["time"], loaded.outputs["ts"][0])
    np.testing.assert_array_equal(x.values, loaded.outputs["outputs"]["x"])
    np.testing.assert_array_equal(ds["ok"].values, res.ok)
    # The same names, dimensions and units as the in-memory batch's Dataset.
    mem = loaded.to_xarray()
    assert set(mem.data_vars) == set(ds.data_vars) - {"committed"}
    for name in mem.data_vars:
        assert ds[name].dims == mem[name].dims, name
        assert ds[name].attrs.get("units") == mem[name].attrs.get("units"), name
    assert ds.attrs["solver"] == mem.attrs["solver"] == "RK4" and ds.attrs["dt"] == 0.1
    # Dispersion units; an incomplete campaign: committed chunks only.
    run = lambda **kw: mc.run_campaign(
        oscillator_member, DISP, tmp_path / "p", key=jr.key(1), n=5, chunk_size=2, **kw
    )
    with pytest.raises(ValueError) as err:
        run(units={"outputs": {"y": "m"}})
    assert str(err.value).startswith(
        "run_campaign: `units` must map output keys ['outputs/E', 'outputs/x', 'stats/"
    )
    assert str(err.value).endswith("to unit strings; got 'outputs/y': 'm'.")
    part = run(max_chunks=2, units={"outputs": {"x": "m", "E": "J"}})
    ds = mc.open_campaign(tmp_path / "p")
    assert ds["params.a"].attrs["units"] == "1/s^2" and ds["params.x0"].attrs["units"] == "m"
    assert ds["x"].attrs["units"] == "m"
    assert ds["E"].attrs["units"] == "J"
    assert "units" not in ds["ys"].attrs
    np.testing.assert_array_equal(ds["committed"], [True] * 4 + [False])
    np.testing.assert_array_equal(ds["params.a"].values[:4], part.params["a"])


def test_summaries_from_the_store_equal_in_memory(campaign):
    d, res = campaign
    assert res.n_failed == 3 and res.n_ok == 7
    ref = mc.summarize(mc.load_campaign(d), (5.0, 50.0, 95.0), include_params=True)
    # All at once, and one sample time per block (8 bytes x 7 ok members).
    for max_bytes in (2**27, 8 * 7):
        got = mc.summarize_campaign(d, (5.0, 50.0, 95.0), include_params=True, max_bytes=max_bytes)
        assert got.keys() == ref.keys()
        for key in ref:
            assert jax.tree.structure(got[key]) == jax.tree.structure(ref[key]), key
            for x, y in zip(jax.tree.leaves(got[key]), jax.tree.leaves(ref[key])):
                np.testing.assert_array_equal(x, y, err_msg=f"{key} max_bytes={max_bytes}")
    only = mc.summarize_campaign(d, names=["outputs/x"])
    assert list(only) == ["outputs/x"]
    with pytest.raises(ValueError, match=r"summarize_campaign: `names` must be keys .* \['nope'\]"):
        mc.summarize_campaign(d, names=["nope"])
    with pytest.raises(ValueError, match=r"summarize_campaign: `max_bytes` must be .* got 0"):
        mc.summarize_campaign(d, max_bytes=0)


def test_failure_table_and_counts(campaign):
    d, res = campaign
    table = mc.campaign_failures(d)
    assert table == res.failure_table()
    assert table == [
        (2, NONFINITE, float(res.outputs["t_final"][2])),  # where it stopped [s]
        (5, "raised: a too large", None),
        (7, "raised: a too large", None),
    ]
    assert mc.failure_counts(d) == {"raised: a too large": 2, NONFINITE: 1}


def test_plot_campaign(campaign):
    d, _ = campaign
    fig = mc.plot_campaign(d, "outputs/x", percentiles=(5.0, 25.0), ylabel="x [m]")
    stats = mc.summarize_campaign(d, (5.0, 25.0, 50.0, 75.0, 95.0), names=["outputs/x"])
    (ax,) = fig.axes
    median = ax.lines[0]
    np.testing.assert_array_equal(median.get_ydata(), stats["outputs/x"].percentiles[50.0])
    np.testing.assert_array_equal(median.get_xdata(), [0.0, 0.5, 1.0, 1.5, 2.0])
    assert len(ax.collections) == 2 and ax.get_title() == "outputs/x: 7 members ok, 3 failed"
    fig = mc.plot_campaign(d, "ys", labels=["x", "xdot"])
    assert [a.get_ylabel() for a in fig.axes] == ["x", "xdot"]
    with pytest.raises(ValueError, match=r"plot_campaign: `percentiles` must lie in \[0, 50\)"):
        mc.plot_campaign(d, "outputs/x", percentiles=(60.0,))
    import matplotlib.pyplot as plt

    plt.close("all")


def test_without_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zarr", None)  # `import zarr` now raises ImportError
    with pytest.raises(ImportError) as err:
        mc.run_campaign(oscillator_member, DISP, tmp_path / "c", key=jr.key(0), n=2, chunk_size=2)
    assert str(err.value) == (
        "run_campaign: campaigns are stored with Zarr, which is not installed; install the "
        'optional extra `pip install "jaxsim-spacecraft[campaign]"` (xarray, zarr).'
    )
    assert not (tmp_path / "c").exists()
    # The runtime core imports (and runs batches) without xarray and zarr.
    code = (
        "import sys; sys.modules['zarr'] = None; sys.modules['xarray'] = None\n"
        "import numpy as np; from jaxsim import montecarlo as mc\n"
        "print(mc.run_batch(lambda p: 2 * p, np.ones(3)).outputs)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[2. 2. 2.]"


def test_nonfinite_member_time(campaign):
    # The oracle of `t_final` in the table: a single run of the NaN member stops at t0.
    _, res = campaign
    model = eqx.tree_at(lambda m: (m.a, m.x0), OSC, (jnp.asarray(np.nan), jnp.array([0.9, 0.0])))
    sol = js.simulate(model, model.init_state(), 2.0, dt=0.1, sample_dt=0.5, throw=False)
    assert float(res.outputs["t_final"][2]) == float(sol.t_final)


def test_plot_campaign_labels_components_and_units_from_the_store(tmp_path):
    """Panels were labelled `[0] [1] [2]` with no unit although the store carries the units and
    the `xyz` coordinate of `omega_BN_B`: now `omega_BN_B x [rad/s]`, ..."""
    import equinox as eqx
    import jax.random as jr

    import effectors as fx

    sc = fx.Spacecraft(fx.Hub(100.0, np.diag([10.0, 20.0, 30.0])), name="sc")

    def member(p):
        model = eqx.tree_at(lambda s: s.hub.mass, sc, p["m"])
        y0 = model.init_state(omega_BN_B=[0.01, 0.02, 0.03])
        return js.simulate(model, y0, 0.4, dt=0.1, sample_dt=0.2)

    disp = mc.Dispersions({"m": mc.Normal(100.0, 1.0, unit="kg")})
    d = tmp_path / "c"
    mc.run_campaign(member, disp, d, key=jr.key(0), n=4, chunk_size=2, load=False)
    fig = mc.plot_campaign(d, "outputs/omega_BN_B")
    assert [a.get_ylabel() for a in fig.axes] == [
        "omega_BN_B x [rad/s]",
        "omega_BN_B y [rad/s]",
        "omega_BN_B z [rad/s]",
    ]
    fig = mc.plot_campaign(d, "outputs/sigma_BN", ylabel="attitude")
    assert [a.get_ylabel() for a in fig.axes] == ["attitude s1", "attitude s2", "attitude s3"]
    import matplotlib.pyplot as plt

    plt.close("all")
