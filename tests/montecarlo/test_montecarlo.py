"""Tests of `jaxsim.montecarlo`: dispersions, chunked/sharded batches, failures, campaigns.

Oracles: a Python loop of single runs (batched = unbatched), draws compared across batch sizes and
chunk sizes (reproducibility), sample statistics against the distributions' moments, failure
injection (NaN parameter, divergent step size, exhausted step budget), a subprocess with forced
host devices (sharded = unsharded), and an interrupted campaign against an uninterrupted one.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim import montecarlo as mc
from tests._sharding_worker import DISPERSIONS, OSC, oscillator_member


# Batched (vmap) and single programs may order a few floating-point operations differently: a
# few ulps of the largest value, amplified mildly by 30 RK4 steps of rigid-body dynamics.
BATCH_VS_LOOP_RTOL = 1e-12
# Sample-moment checks with M draws: the estimator's standard error is ~ sigma / sqrt(M); 5
# standard errors make a spurious failure practically impossible (p ~ 6e-7) yet catch a wrong
# scale (e.g. variance for std) by far.
N_STAT = 4000
STAT_SIGMAS = 5.0
# Rotations built from DCMs and MRPs: round-off of a few float64 operations.
ROTATION_ATOL = 1e-12

MU_EARTH = 3.986004415e14  # [m^3/s^2]
R_ORBIT = 6778.0e3  # [m]
I_NOMINAL = np.array([[900.0, 20.0, -10.0], [20.0, 800.0, 15.0], [-10.0, 15.0, 600.0]])  # [kg m^2]
M_NOMINAL = 750.0  # [kg]
OMEGA_NOMINAL = np.array([1e-3, -2e-3, 1.5e-3])  # [rad/s]
SC = fx.Spacecraft(fx.Hub(M_NOMINAL, I_NOMINAL), gravity=(fx.PointMassGravity(MU_EARTH),))
R_CN_N = np.array([R_ORBIT, 0.0, 0.0])  # [m]
V_CN_N = np.array([0.0, np.sqrt(MU_EARTH / R_ORBIT), 0.0])  # [m/s]
SIGMA0 = np.array([0.1, 0.2, -0.1])
SC_DISPERSIONS = mc.Dispersions(
    {
        "omega_BN_B": mc.Normal(OMEGA_NOMINAL, 5e-4, unit="rad/s"),
        "mass": mc.percent(M_NOMINAL, 5.0, unit="kg"),
        "inertia": mc.PrincipalInertia(I_NOMINAL, 0.03, angle_std=np.deg2rad(2.0)),
    }
)


def spacecraft_member(p):
    model = eqx.tree_at(lambda s: (s.hub.mass, s.hub.IHubPntBc_B), SC, (p["mass"], p["inertia"]))
    y0 = model.init_state(R_CN_N, V_CN_N, SIGMA0, p["omega_BN_B"])
    sol = js.simulate(model, y0, 30.0, dt=1.0, sample_dt=10.0, throw=False)
    keys = ("r_CN_N", "sigma_BN", "omega_BN_B", "totRotEnergy")
    return {"ts": sol.ts, "out": {k: sol.outputs[k] for k in keys}, "result": sol.result}


@pytest.fixture(scope="module")
def sc_batch():
    # 6 members in chunks of 4: two calls of one program, the second padded with 2 copies.
    return mc.run_batch(spacecraft_member, SC_DISPERSIONS, key=jr.key(3), n=6, chunk_size=4)


def test_batch_equals_loop_of_single_runs(sc_batch):
    assert sc_batch.ok.all() and sc_batch.complete
    np.testing.assert_array_equal(sc_batch.members, np.arange(6))
    single = eqx.filter_jit(spacecraft_member)
    for i in range(6):
        ref = single(jax.tree.map(jnp.asarray, {k: v[i] for k, v in sc_batch.params.items()}))
        for key, value in ref["out"].items():
            got = sc_batch.outputs["out"][key][i]
            scale = np.abs(np.asarray(value)).max()
            np.testing.assert_allclose(
                got, value, rtol=0, atol=BATCH_VS_LOOP_RTOL * scale, err_msg=f"member {i} {key}"
            )


def test_one_compiled_program_for_all_chunks():
    traces = []

    def member(p):
        traces.append(1)  # runs at trace time only
        return oscillator_member(p)

    res = mc.run_batch(member, DISPERSIONS, key=jr.key(0), n=10, chunk_size=4)
    assert len(traces) == 1, "every chunk (the padded last one included) must reuse one program"
    assert res.outputs["outputs"]["x"].shape == (10, 5)
    # Same member function, other key and another n of full chunks: the compilation is reused.
    mc.run_batch(member, DISPERSIONS, key=jr.key(1), n=8, chunk_size=4)
    assert len(traces) == 1


def test_progress_reports(capsys):
    seen = []
    mc.run_batch(
        oscillator_member, DISPERSIONS, key=jr.key(0), n=10, chunk_size=4,
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert seen == [(4, 10), (8, 10), (10, 10)]
    mc.run_batch(oscillator_member, DISPERSIONS, key=jr.key(0), n=10, chunk_size=4, progress=True)
    err = capsys.readouterr().err
    # The bar shared with simulate (jaxsim._drivers._progress.Bar): "compiling" first, then members done,
    # members per second and failures.
    assert "run_batch:" in err and "compiling" in err and "10/10 members" in err
    assert "members/s, 0 failed" in err


def test_progress_without_tqdm_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # `import tqdm.auto` now raises
    with pytest.raises(
        ImportError, match=r"run_batch: `progress=True`.*jaxsim-spacecraft\[progress\]"
    ):
        mc.run_batch(
            oscillator_member, DISPERSIONS, key=jr.key(0), n=10, chunk_size=4, progress=True
        )


DRAWS_KEY = jr.key(3)  # the key of `sc_batch`: `draws` holds its parameters too


@pytest.fixture(scope="module")
def draws():
    # One sampling program for every distribution. The spacecraft's three parameters sit under
    # the same paths as in SC_DISPERSIONS, so their draws must equal `sc_batch.params`.
    disp = mc.Dispersions(
        {
            **SC_DISPERSIONS.tree,
            "normal": mc.Normal(jnp.array([1.0, -2.0]), jnp.array([0.5, 2.0])),
            "truncated": mc.Normal(0.0, 1.0, low=-0.5, high=1.5),
            "uniform": mc.Uniform(-1.0, 3.0),
            "relative": mc.Relative(10.0, 0.1, kind="uniform"),
            "percent": mc.percent(200.0, 5.0),
            "principal": mc.PrincipalInertia(I_NOMINAL, jnp.array([0.02, 0.05, 0.0])),
            "flat": mc.PrincipalInertia(np.diag([1.0, 1.0, 1.9]), 0.3, max_tries=2),
            "attitude": mc.AttitudeMRP(SIGMA0, 0.01),
            "axes": mc.UnitVector(np.eye(3), 0.01),
            "constant": 4.0,
        }
    )
    return jax.tree.map(np.asarray, disp.sample(DRAWS_KEY, N_STAT))


def test_member_draw_independent_of_n_and_chunk_size(sc_batch, draws):
    # N_STAT members sampled alone, in a tree with 12 more parameters, vs 6 members in chunks of
    # 4 in the simulation batch: bitwise the same draws.
    for name in SC_DISPERSIONS.tree:
        np.testing.assert_array_equal(draws[name][:6], sc_batch.params[name], err_msg=name)
    key = jr.key(11)
    by_chunk = [
        mc.run_batch(oscillator_member, DISPERSIONS, key=key, n=7, chunk_size=c) for c in (3, 4)
    ]
    for name in ("a", "x0"):
        np.testing.assert_array_equal(by_chunk[1].params[name], by_chunk[0].params[name])
        one = eqx.filter_jit(DISPERSIONS.sample_member)(key, 4)[name]
        np.testing.assert_array_equal(one, by_chunk[0].params[name][4])
    np.testing.assert_array_equal(
        by_chunk[1].outputs["outputs"]["x"], by_chunk[0].outputs["outputs"]["x"]
    )
    # Only some members: the same draws.
    part = mc.run_batch(oscillator_member, DISPERSIONS, key=key, n=7, members=[5, 2, 6])
    np.testing.assert_array_equal(part.members, [2, 5, 6])
    np.testing.assert_array_equal(part.params["a"], by_chunk[0].params["a"][[2, 5, 6]])
    assert not part.complete and part.n_total == 7
    # Distinct members and distinct parameters get distinct draws.
    assert np.unique(draws["mass"]).size == N_STAT
    assert abs(np.corrcoef(draws["normal"][:, 0], draws["percent"])[0, 1]) < STAT_SIGMAS / np.sqrt(
        N_STAT
    )


def _assert_moments(x, mean, std, name):
    x = np.asarray(x)
    err_mean = STAT_SIGMAS * std / np.sqrt(x.shape[0])
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), err_mean + ROTATION_ATOL, err_msg=name)
    # Standard error of the sample std of a (near-)normal sample: sigma / sqrt(2 M).
    err_std = STAT_SIGMAS * std / np.sqrt(2.0 * x.shape[0]) * 1.5  # 1.5: non-normal kurtosis
    np.testing.assert_array_less(np.abs(x.std(0) - std), err_std + ROTATION_ATOL, err_msg=name)


def test_distribution_moments(draws):
    _assert_moments(draws["normal"], [1.0, -2.0], np.array([0.5, 2.0]), "normal")
    _assert_moments(draws["omega_BN_B"], OMEGA_NOMINAL, np.full(3, 5e-4), "omega_BN_B")
    t = draws["truncated"]
    assert t.min() >= -0.5 and t.max() <= 1.5
    assert np.all((draws["uniform"] >= -1.0) & (draws["uniform"] < 3.0))
    _assert_moments(draws["uniform"], 1.0, 4.0 / np.sqrt(12.0), "uniform")
    assert np.all(np.abs(draws["relative"] - 10.0) <= 1.0)
    _assert_moments(draws["relative"], 10.0, 1.0 / np.sqrt(3.0), "relative uniform")
    _assert_moments(draws["percent"], 200.0, 10.0, "percent")
    np.testing.assert_array_equal(draws["constant"], np.full(N_STAT, 4.0))


def _physical(inertia):
    p = np.sort(np.linalg.eigvalsh(inertia), axis=-1)
    return (p[:, 0] > 0) & (p[:, 0] + p[:, 1] > p[:, 2])


def test_principal_inertia(draws):
    moments, axes = np.linalg.eigh(I_NOMINAL)
    for name in ("inertia", "principal"):
        inertia = draws[name]
        np.testing.assert_array_equal(inertia, np.swapaxes(inertia, -1, -2), err_msg=name)
        assert _physical(inertia).all(), name
    # Without axis rotation the principal axes are the nominal ones: V^T I V is diagonal.
    local = np.einsum("ji,njk,kl->nil", axes, draws["principal"], axes)
    diag = np.diagonal(local, axis1=1, axis2=2)
    off = local - diag[:, :, None] * np.eye(3)
    assert np.abs(off).max() <= ROTATION_ATOL * moments.max()
    _assert_moments(diag / moments, [1.0, 1.0, 1.0], np.array([0.02, 0.05, 0.0]), "moments")
    # With rotated axes (2 deg 1-sigma) the principal moments keep their 3 % dispersion (the
    # moments are 4 sigma apart, so sorting rarely swaps them), and the axes do move.
    eig = np.linalg.eigvalsh(draws["inertia"])
    _assert_moments(eig / moments, [1.0, 1.0, 1.0], np.full(3, 0.03), "rotated moments")
    local = np.einsum("ji,njk,kl->nil", axes, draws["inertia"], axes)
    assert np.median(np.abs(local[:, 0, 1])) > 1.0  # [kg m^2]
    # A wide dispersion of a nearly flat body, two candidates per member: about a third of the
    # candidates are not physical. A member whose first candidate fails gets its second one, if
    # physical (never a non-physical body), else NaN (a failed member): about (1/3)^2 of them.
    flat = np.all(np.isnan(draws["flat"]), axis=(1, 2))
    assert 0.03 < flat.mean() < 0.3, flat.mean()
    assert _physical(draws["flat"][~flat]).all()


def _np_mrp_to_dcm(s):
    s2 = np.sum(s * s, axis=-1)[:, None, None]
    t = np.zeros(s.shape[:-1] + (3, 3))
    t[:, 0, 1], t[:, 0, 2], t[:, 1, 2] = -s[:, 2], s[:, 1], -s[:, 0]
    t = t - np.swapaxes(t, 1, 2)
    return np.eye(3) + (8.0 * t @ t - 4.0 * (1.0 - s2) * t) / (1.0 + s2) ** 2


def test_rotation_dispersions(draws):
    sigma = draws["attitude"]
    assert np.all(np.linalg.norm(sigma, axis=-1) <= 1.0)
    rel = _np_mrp_to_dcm(sigma) @ _np_mrp_to_dcm(SIGMA0[None])[0].T  # [B'B]
    angle = np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0))
    # |theta|^2 of a 3-D normal rotation vector: mean 3 sigma^2, relative std sqrt(2/3).
    np.testing.assert_allclose(
        np.mean(angle**2), 3.0 * 0.01**2, rtol=STAT_SIGMAS * np.sqrt(2 / 3 / N_STAT)
    )
    axes = draws["axes"]
    np.testing.assert_allclose(np.linalg.norm(axes, axis=-1), 1.0, atol=ROTATION_ATOL)
    # Pointing error of a unit vector: two perpendicular components, mean square 2 sigma^2
    # (relative std 1).
    err = np.arccos(np.clip(np.einsum("nij,ij->ni", axes, np.eye(3)), -1.0, 1.0))
    np.testing.assert_allclose(
        np.mean(err**2, axis=0), 2.0 * 0.01**2, rtol=STAT_SIGMAS * np.sqrt(1.0 / N_STAT)
    )


def test_failed_members_are_reported_not_raised():
    a = np.array([1.0, 1e12, np.nan, 2.0])  # [1/s^2] member 1 diverges (h*sqrt(a) = 1e5), 2 is NaN
    params = {"a": a, "x0": np.ones(4)}
    res = mc.run_batch(oscillator_member, params, chunk_size=3)
    np.testing.assert_array_equal(res.ok, [True, False, False, True])
    nonfinite = int(js.RESULTS.nonfinite_state._value)
    np.testing.assert_array_equal(res.result, [0, nonfinite, nonfinite, 0])
    assert res.messages[0] == "" and "non-finite" in res.messages[1]
    assert [m for m, _ in res.failures()] == [1, 2]
    # The good members are untouched by the failed ones in their chunk.
    single = eqx.filter_jit(oscillator_member)
    for i in (0, 3):
        ref = single({"a": jnp.asarray(a[i]), "x0": jnp.asarray(1.0)})
        np.testing.assert_array_equal(res.outputs["outputs"]["x"][i], ref.outputs["x"])

    # An exhausted step budget of an adaptive solve (stiff member): diffrax's result code.
    def adaptive(p):
        model = eqx.tree_at(lambda m: m.a, OSC, p)
        return js.simulate(
            model, model.init_state(), 2.0, solver=js.Tsit5(), rtol=1e-8, atol=1e-8,
            max_steps=64, throw=False,
        )  # fmt: skip

    res = mc.run_batch(adaptive, np.array([1.0, 1e6]))
    np.testing.assert_array_equal(res.ok, [True, False])
    assert res.result[1] == int(js.RESULTS.max_steps_reached._value)
    assert "max_steps" in res.messages[1]
    # Outputs without a diffrax result: non-finite leaves are named.
    res = mc.run_batch(lambda p: {"y": jnp.log(p), "k": p.astype(int)}, np.array([1.0, -1.0]))
    np.testing.assert_array_equal(res.ok, [True, False])
    assert res.messages[1] == "non-finite outputs: y"


def test_summarize_over_ok_members():
    a = np.array([0.5, 1.0, np.nan, 1.5, 2.0, 1e12])
    res = mc.run_batch(oscillator_member, {"a": a, "x0": np.ones(6)}, chunk_size=3)
    stats = mc.summarize(res, percentiles=(10.0, 50.0), include_params=True)
    x = res.outputs["outputs"]["x"][[0, 1, 3, 4]]
    s = stats["outputs/x"]
    assert (s.n_ok, s.n_failed) == (4, 2)
    np.testing.assert_array_equal(s.mean, x.mean(0))
    np.testing.assert_array_equal(s.std, x.std(0))
    np.testing.assert_array_equal(s.max, x.max(0))
    np.testing.assert_array_equal(s.percentiles[10.0], np.percentile(x, 10.0, axis=0))
    np.testing.assert_array_equal(stats["params/a"].min, 0.5)
    assert res.summary()["outputs/x"].percentiles.keys() == {5.0, 50.0, 95.0}


def test_sharded_equals_unsharded(tmp_path):
    n_dev = 8
    out = tmp_path / "sharded.npz"
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={n_dev}",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    cmd = [sys.executable, "-m", "tests._sharding_worker", str(n_dev), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = np.load(out)
    assert int(d["n_devices"]) == n_dev and str(d["platform"]) == "cpu"
    for tag, k in (("two", 2), ("all", n_dev)):
        assert int(d[f"{tag}_sharding_devices"]) == k, "output not sharded over the devices"
        np.testing.assert_array_equal(d[f"{tag}_shard_rows"], np.full(k, 16 // k))
        assert d[f"{tag}_ok"].all()
        # Each device runs the same per-member program: results are bitwise equal.
        np.testing.assert_array_equal(d[f"{tag}_a"], d["plain_a"][:16])
        np.testing.assert_array_equal(d[f"{tag}_x"], d["plain_x"][:16])
        np.testing.assert_array_equal(d[f"{tag}_chunked_x"], d["plain_x"])


def test_member_range_partitions_members():
    for n, count, chunk in ((10, 3, 1), (10, 3, 4), (7, 4, 2), (3, 5, 1)):
        ranges = [mc.member_range(n, p, count, chunk) for p in range(count)]
        assert [i for r in ranges for i in r] == list(range(n))
        assert all(r.start % chunk == 0 for r in ranges if len(r))


def _stat(path):
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def test_campaign_resume_does_not_recompute(tmp_path):
    evaluated = []

    def member(p):
        # Counts member evaluations (padding included) at run time.
        jax.debug.callback(lambda a: evaluated.append(np.size(a)), p["a"])
        return oscillator_member(p)

    key, n, size = jr.key(9), 10, 3  # chunks of 3, 3, 3, 1 (+2 padding)
    run = lambda d, **kw: mc.run_campaign(
        member, DISPERSIONS, d, key=key, n=n, chunk_size=size, **kw
    )
    part = run(tmp_path / "c", max_chunks=1)
    jax.effects_barrier()
    assert not part.complete and part.n_total == n
    np.testing.assert_array_equal(part.members, [0, 1, 2])

    def interrupt(done, total):
        if done >= 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "c", progress=interrupt)
    jax.effects_barrier()
    assert sum(evaluated) == 6, "chunk 0 was recomputed"
    records = sorted((tmp_path / "c" / "chunks").glob("chunk_*.json"))
    assert [c.name for c in records] == ["chunk_000000.json", "chunk_000001.json"]
    # The committed chunks' records and data files are not rewritten by the resume.
    store = tmp_path / "c" / "campaign.zarr"
    data = [
        f
        for f in sorted(store.rglob("*"))
        if f.is_file() and f.relative_to(store).parts[1:3] in (("c", "0"), ("c", "1"))
    ]
    # (Zarr skips chunks equal to the fill value, e.g. `num_events`, all 0.)
    arrays = {f.relative_to(store).parts[0] for f in data}
    assert {"members", "params.a", "outputs.outputs.x", "outputs.ys"} <= arrays
    before = {c: _stat(c) for c in records + data}
    evaluated.clear()
    resumed = run(tmp_path / "c")
    jax.effects_barrier()
    assert sum(evaluated) == 2 * size, "only chunks 2 and 3 are computed on resume"
    assert {c: _stat(c) for c in records + data} == before
    assert not list((tmp_path / "c").glob(".*tmp*")), "temporary files left behind"
    assert resumed.complete and resumed.ok.all()
    # Equal to an uninterrupted campaign and to an in-memory batch, exactly.
    evaluated.clear()
    full = run(tmp_path / "d")
    batch = mc.run_batch(oscillator_member, DISPERSIONS, key=key, n=n, chunk_size=size)
    loaded = mc.load_campaign(tmp_path / "c")
    for other in (full, batch, loaded):
        leaves, ref = jax.tree.leaves(other), jax.tree.leaves(resumed)
        assert jax.tree.structure(other) == jax.tree.structure(resumed)
        for x, y in zip(leaves, ref):
            np.testing.assert_array_equal(x, y)
    # A second run of a complete campaign computes nothing.
    evaluated.clear()
    run(tmp_path / "c")
    jax.effects_barrier()
    assert sum(evaluated) == 0


def test_campaign_split_over_processes(tmp_path):
    # Two "hosts" (run one after the other here) share a directory: each computes every other
    # chunk, and either one's result holds the whole campaign once both are done.
    run = lambda d, **kw: mc.run_campaign(
        oscillator_member, DISPERSIONS, d, key=jr.key(4), n=8, chunk_size=3, **kw
    )
    first = run(tmp_path / "c", process_index=0, process_count=2)
    np.testing.assert_array_equal(first.members, [0, 1, 2, 6, 7])  # chunks 0 and 2
    assert not first.complete
    both = run(tmp_path / "c", process_index=1, process_count=2)
    alone = run(tmp_path / "d")
    assert both.complete
    for x, y in zip(jax.tree.leaves(both), jax.tree.leaves(alone)):
        np.testing.assert_array_equal(x, y)
    # A resume with another number of processes: chunks are owned by index, nothing is rewritten.
    files = [f for f in sorted((tmp_path / "c").rglob("*")) if f.is_file()]
    before = {f: _stat(f) for f in files}
    again = run(tmp_path / "c", process_index=2, process_count=3)
    assert {f: _stat(f) for f in before} == before
    for x, y in zip(jax.tree.leaves(again), jax.tree.leaves(alone)):
        np.testing.assert_array_equal(x, y)


def test_campaign_configuration_mismatch_refused(tmp_path):
    d = tmp_path / "c"
    args = dict(n=5, chunk_size=3, max_chunks=1)
    mc.run_campaign(oscillator_member, DISPERSIONS, d, key=jr.key(0), config={"v": 1}, **args)
    manifest = json.loads((d / "manifest.json").read_text())
    assert (manifest["n"], manifest["chunk_size"], manifest["n_chunks"]) == (5, 3, 2)
    changes = [
        ("chunk_size", dict(args, chunk_size=2), jr.key(0), DISPERSIONS, {"v": 1}),
        ("n:", dict(args, n=6), jr.key(0), DISPERSIONS, {"v": 1}),
        ("digest", args, jr.key(1), DISPERSIONS, {"v": 1}),
        (
            "digest",
            args,
            jr.key(0),
            mc.Dispersions({"a": mc.Uniform(0.5, 2.1), "x0": 1.0}),
            {"v": 1},
        ),
        ("config", args, jr.key(0), DISPERSIONS, {"v": 2}),
    ]
    for what, kw, key, disp, config in changes:
        with pytest.raises(ValueError, match=what):
            mc.run_campaign(oscillator_member, disp, d, key=key, config=config, **kw)
    # Explicit parameters: their hash is recorded too.
    p = {"a": np.ones(6), "x0": np.ones(6)}
    mc.run_campaign(oscillator_member, p, tmp_path / "p", chunk_size=3)
    with pytest.raises(ValueError, match="digest"):
        mc.run_campaign(oscillator_member, {**p, "a": 2 * p["a"]}, tmp_path / "p", chunk_size=3)
    with pytest.raises(ValueError, match="directory"):
        mc.load_campaign(tmp_path / "nothing")


def test_validation_errors():
    cases = [
        ("std", lambda: mc.Normal(0.0, -1.0)),
        ("std", lambda: mc.Normal(np.zeros(3), np.ones(2))),
        ("mean", lambda: mc.Normal(np.nan, 1.0)),
        ("std", lambda: mc.Normal(0.0, 0.0, low=-1.0)),
        ("high", lambda: mc.Normal(0.0, 1.0, low=1.0, high=0.0)),
        ("high", lambda: mc.Uniform(1.0, 0.0)),
        ("kind", lambda: mc.Relative(1.0, 0.1, kind="lognormal")),
        ("scale", lambda: mc.Relative(1.0, -0.1)),
        ("pct", lambda: mc.percent(1.0, -5.0)),
        ("inertia", lambda: mc.PrincipalInertia(np.diag([1.0, -1.0, 1.0]), 0.1)),
        ("inertia", lambda: mc.PrincipalInertia(np.diag([1.0, 1.0, 3.0]), 0.1)),
        ("inertia", lambda: mc.PrincipalInertia(np.eye(2), 0.1)),
        ("rel_std", lambda: mc.PrincipalInertia(I_NOMINAL, 1.0)),
        ("angle_std", lambda: mc.PrincipalInertia(I_NOMINAL, 0.1, angle_std=-1.0)),
        ("max_tries", lambda: mc.PrincipalInertia(I_NOMINAL, 0.1, max_tries=0)),
        ("sigma_BN", lambda: mc.AttitudeMRP(np.zeros(4), 0.1)),
        ("angle_std", lambda: mc.AttitudeMRP(np.zeros(3), -0.1)),
        ("nominal", lambda: mc.UnitVector([1.0, 1.0, 0.0], 0.1)),
        ("nominal", lambda: mc.UnitVector(np.ones((2, 2)), 0.1)),
        ("tree", lambda: mc.Dispersions({})),
        ("tree", lambda: mc.Dispersions({"a": mc.Normal(0.0, 1.0), "b": "x"})),
        ("n", lambda: DISPERSIONS.sample(jr.key(0), 0)),
        ("key", lambda: DISPERSIONS.sample(np.zeros(3), 2)),
        ("fn", lambda: mc.run_batch(None, DISPERSIONS, key=jr.key(0), n=2)),
        ("key", lambda: mc.run_batch(oscillator_member, DISPERSIONS, n=2)),
        ("n", lambda: mc.run_batch(oscillator_member, DISPERSIONS, key=jr.key(0))),
        ("key", lambda: mc.run_batch(oscillator_member, np.ones(2), key=jr.key(0))),
        ("params", lambda: mc.run_batch(oscillator_member, {"a": np.ones(2), "x0": np.ones(3)})),
        ("params", lambda: mc.run_batch(oscillator_member, {})),
        ("n", lambda: mc.run_batch(oscillator_member, {"a": np.ones(2)}, n=3)),
        ("chunk_size", lambda: mc.run_batch(oscillator_member, np.ones(2), chunk_size=0)),
        ("members", lambda: mc.run_batch(oscillator_member, np.ones(2), members=[2])),
        ("mesh", lambda: mc.run_batch(oscillator_member, np.ones(2), devices=jax.devices(), mesh=1)),
        ("mesh", lambda: mc.run_batch(oscillator_member, np.ones(2), mesh="cpu")),
        ("devices", lambda: mc.run_batch(oscillator_member, np.ones(2), devices=[])),
        ("axis_name", lambda: mc.run_batch(
            oscillator_member, np.ones(2), mesh=jax.make_mesh((1,), ("m",)), axis_name="x")),
        ("progress", lambda: mc.run_batch(oscillator_member, np.ones(2), progress="yes")),
        ("percentiles", lambda: mc.summarize(mc.run_batch(jnp.sin, np.ones(2)), percentiles=(101,))),
        ("result", lambda: mc.summarize({"ok": True})),
        ("process_index", lambda: mc.member_range(10, 3, 3)),
        ("chunk_size", lambda: mc.member_range(10, 0, 3, 0)),
    ]  # fmt: skip
    for arg, make in cases:
        with pytest.raises(ValueError, match=f"`{arg}"):
            make()


def test_campaign_validation_errors(tmp_path):
    run = lambda **kw: mc.run_campaign(
        oscillator_member, np.ones(2), tmp_path / "c", **{"chunk_size": 2, **kw}
    )
    for arg, kw in [
        ("chunk_size", {"chunk_size": None}),
        ("max_chunks", {"max_chunks": -1}),
        ("process_count", {"process_count": 0}),
        ("process_index", {"process_index": 2, "process_count": 2}),
        ("config", {"config": {"f": print}}),
        ("load", {"load": "no"}),
        ("units", {"units": "m"}),
    ]:
        with pytest.raises(ValueError, match=f"`{arg}"):
            run(**kw)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="`directory`"):
        mc.run_campaign(oscillator_member, np.ones(2), tmp_path / "x", chunk_size=2)


def test_dispersed_inertia_has_the_outputs_dims_and_unit(tmp_path):
    """`params.inertia` (a `PrincipalInertia`) came back with anonymous dimensions
    (`params.inertia_0`, `_1`) and no unit, while the outputs' tensors use `row`/`column`: now
    the same dimensions and `kg m^2`, in a batch's Dataset and in a campaign's store."""
    disp = mc.Dispersions({"inertia": mc.PrincipalInertia(I_NOMINAL, 0.03)})

    def member(p):
        return {"trace": p["inertia"][0, 0] + p["inertia"][1, 1] + p["inertia"][2, 2]}

    ds = mc.run_batch(member, disp, key=jr.key(0), n=4).to_xarray()
    assert ds["params.inertia"].dims == ("member", "row", "column")
    assert ds["params.inertia"].attrs["units"] == "kg m^2"
    pytest.importorskip("zarr")
    mc.run_campaign(member, disp, tmp_path / "c", key=jr.key(0), n=4, chunk_size=2, load=False)
    ds = mc.open_campaign(tmp_path / "c")
    assert ds["params.inertia"].dims == ("member", "row", "column")
    assert ds["params.inertia"].attrs["units"] == "kg m^2"
    assert list(ds["row"].values) == ["x", "y", "z"]
