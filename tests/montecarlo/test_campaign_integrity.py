"""Integrity of Monte Carlo campaigns on disk (`jaxsim.montecarlo.run_campaign`).

Oracles: the exact refusal lines for a changed member function (a closed-over constant, the
horizon) and a foreign key after `manifest.json` was deleted, with no member evaluated (a run-time
counter) and no file touched; a flipped byte and a rewritten chunk (valid Zarr, other values) named
in the warning and recomputed to the uncorrupted campaign bit for bit; stale temporary files
removed; a folder whose manifest names another format refused by name, nothing written; members
raising at run time (`throw=True`) isolated, the others bitwise equal to a batch without them.
"""

import json
import os
import re
import socket
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import jaxsim as js
from jaxsim import montecarlo as mc
from tests._sharding_worker import DISPERSIONS, DT, OSC, SAMPLE_DT, T1, oscillator_member


pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")

KEY, N, SIZE = jr.key(5), 7, 3  # chunks of 3, 3, 1 (+2 padding)


def make_member(v0, t1=T1, counter=None):
    """The oscillator member with initial velocity `v0` (a closed-over array: a constant of the
    traced program, like a hub mass) and horizon `t1`; `counter` counts evaluations at run time."""
    v0 = jnp.asarray(v0, dtype=float)

    def member(p):
        if counter is not None:
            jax.debug.callback(lambda a: counter.append(np.size(a)), p["a"])
        model = eqx.tree_at(lambda m: (m.a, m.x0), OSC, (p["a"], jnp.stack([p["x0"], v0])))
        return js.simulate(model, model.init_state(), t1, dt=DT, sample_dt=SAMPLE_DT, throw=False)

    return member


def run(member, d, **kw):
    return mc.run_campaign(member, DISPERSIONS, d, **{"key": KEY, "n": N, "chunk_size": SIZE, **kw})


def snapshot(d):
    return {p: os.stat(p).st_mtime_ns for p in sorted(d.rglob("*")) if p.is_file()}


def assert_same(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted campaign of `make_member(0.0)`."""
    return run(make_member(0.0), tmp_path_factory.mktemp("ref") / "c")


def test_changed_member_function_refused_before_computing(tmp_path, reference):
    d = tmp_path / "c"
    run(make_member(0.0), d, max_chunks=1)
    before, counter = snapshot(d), []
    # A changed constant of the model (as a hub mass +100 kg): the same program, another value.
    with pytest.raises(ValueError) as err:
        run(make_member(0.5, counter=counter), d)
    jax.effects_barrier()
    text = str(err.value)
    assert text.startswith(
        f"run_campaign: `directory` {str(d)!r} holds a campaign with a different configuration; "
        "resuming would mix results, so nothing was computed:\n"
    )
    assert re.search(
        r"\n  - program constant #\d+ float64\(\): on disk 0\.0, requested 0\.5\n", text
    )
    assert text.endswith("\nResume with the original arguments, or use a new directory.")
    # A changed horizon: the output shapes and the sample grid (a constant) differ.
    with pytest.raises(ValueError) as err:
        run(make_member(0.0, t1=4.0, counter=counter), d)
    jax.effects_barrier()
    lines = str(err.value).splitlines()
    for path in ("outputs/outputs/E", "outputs/outputs/x", "outputs/ts"):
        assert f"  - {path}: on disk float64(5,), requested float64(9,)" in lines
    assert "  - outputs/ys: on disk float64(5, 2), requested float64(9, 2)" in lines
    assert any(
        line.startswith("  - program: the member function's traced program") for line in lines
    )
    assert counter == [], "a member was evaluated before the refusal"
    assert snapshot(d) == before, "the refused call touched the folder"
    # The folder still loads and resumes with the original member function.
    np.testing.assert_array_equal(mc.load_campaign(d).members, [0, 1, 2])
    assert_same(run(make_member(0.0), d), reference)


def test_deleted_manifest_does_not_adopt_foreign_chunks(tmp_path, reference):
    d = tmp_path / "c"
    run(make_member(0.0), d, max_chunks=2)
    (d / "manifest.json").unlink()
    before, counter = snapshot(d), []
    with pytest.raises(
        ValueError, match=r"holds chunks of another campaign \(.*chunk_000000\.json"
    ):
        run(make_member(0.0, counter=counter), d, key=jr.key(6))
    with pytest.raises(ValueError, match="holds chunks of another campaign"):
        run(make_member(0.5, counter=counter), d)
    jax.effects_barrier()
    assert counter == [] and snapshot(d) == before
    # The same campaign adopts its chunks (their records and data are not rewritten; only chunk
    # 2 is computed) and writes the manifest again. (A counter would change the program.)
    resumed = run(make_member(0.0), d)
    after = snapshot(d)
    assert {p: after[p] for p in before if p.name != "program.jaxpr.gz"} == {
        p: t for p, t in before.items() if p.name != "program.jaxpr.gz"
    }
    assert (d / "chunks" / "chunk_000002.json") in after and (d / "manifest.json") in after
    assert_same(resumed, reference)


@pytest.mark.parametrize("damage", ["flip", "rewrite", "record"])
def test_damaged_chunk_named_and_recomputed(tmp_path, reference, damage):
    d = tmp_path / "c"
    run(make_member(0.0), d)
    if damage == "flip":  # one byte of chunk 1 of an output, on disk
        target = d / "campaign.zarr" / "outputs.outputs.x" / "c" / "1" / "0"
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        target.write_bytes(bytes(raw))
    elif damage == "rewrite":  # valid Zarr data with other values: only the checksum sees it
        import zarr

        target = d / "campaign.zarr" / "params.a" / "c" / "1"
        zarr.open_group(str(d / "campaign.zarr"), mode="r+")["params.a"][3:6] = 1.0
    else:  # a truncated chunk record
        target = d / "chunks" / "chunk_000001.json"
        target.write_text(target.read_text()[:40])
    # Detected at the start (with max_chunks=0 nothing is computed), named, left out.
    with pytest.warns(mc.CampaignWarning) as caught:
        part = run(make_member(0.0), d, max_chunks=0)
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(
        "run_campaign: chunk 1 (members 3..5) is damaged and is computed again: " + str(target)
    )
    np.testing.assert_array_equal(part.members, [0, 1, 2, 6])
    kept = {
        p: t for p, t in snapshot(d).items() if p.name in ("chunk_000000.json", "chunk_000002.json")
    }
    assert_same(run(make_member(0.0), d), reference)
    assert {p: os.stat(p).st_mtime_ns for p in kept} == kept, "only the damaged chunk is computed"
    assert (d / "chunks" / "chunk_000001.json").exists()


def test_stale_temporary_files_removed(tmp_path):
    d = tmp_path / "c"
    run(oscillator_member, d, max_chunks=1)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    dead = int(done.stdout)  # a finished process of this host: a killed writer
    host = socket.gethostname()
    stale = [
        d / "chunks" / f".chunk_000001.json.tmp-{host}-{dead}",
        d / f".manifest.json.tmp-{host}-{dead}",
    ]
    other = d / "chunks" / f".chunk_000002.json.tmp-{host}x-other-{dead}"  # another host's
    for path in stale + [other]:
        path.write_bytes(b"partial")
    run(oscillator_member, d)
    assert not any(p.exists() for p in stale)
    assert other.exists(), "a temporary file of another host may still be being written"


def test_manifest_of_another_format_is_refused(tmp_path):
    """A folder whose manifest names another format is refused by every reader and by
    `run_campaign`, naming the format found and the one expected; nothing is written."""
    d = tmp_path / "other"
    d.mkdir()
    manifest = {"format": "jaxsim.montecarlo/1", "n": N, "chunk_size": SIZE, "n_chunks": 1}
    (d / "manifest.json").write_text(json.dumps(manifest))
    before = sorted(p.name for p in d.rglob("*"))
    message = re.escape(
        f"`directory` {str(d)!r} is not a jaxsim Monte Carlo campaign (format "
        "'jaxsim.montecarlo/1', expected 'jaxsim.montecarlo/2')."
    )
    for where, read in (("load_campaign", mc.load_campaign), ("open_campaign", mc.open_campaign),
                        ("summarize_campaign", mc.summarize_campaign)):  # fmt: skip
        with pytest.raises(ValueError, match=f"{where}: {message}"):
            read(d)
    with pytest.raises(ValueError, match=f"run_campaign: {message}"):
        run(oscillator_member, d)
    assert sorted(p.name for p in d.rglob("*")) == before


def raising_member(p):
    """An adaptive solve with `throw=True`: a stiff member (large `a`) exhausts `max_steps` and
    raises inside the compiled chunk program."""
    model = eqx.tree_at(lambda m: m.a, OSC, p)
    return js.simulate(model, model.init_state(), 2.0, solver=js.Tsit5(), rtol=1e-8, atol=1e-8,
                       max_steps=64, throw=True)  # fmt: skip


# Where an adaptive solve gave up, batched (vmap) vs single program: a few ulps of difference in
# the error estimate, amplified by 64 accepted/rejected step-size updates (seen: 1.1e-10).
T_FINAL_RTOL = 1e-9
MAX_STEPS_CAUSE = "The maximum number of solver steps was reached. Try increasing `max_steps`."


def test_member_raising_does_not_abort_its_chunk(tmp_path):
    a = np.array([1.0, 1e6, 2.0, 1.5, 3.0, 1e6, 0.5])
    res = mc.run_batch(raising_member, a, chunk_size=4)
    np.testing.assert_array_equal(res.ok, [True, False, True, True, True, False, True])
    np.testing.assert_array_equal(res.result, [0, mc.RAISED, 0, 0, 0, mc.RAISED, 0])
    assert res.errors == ((1, MAX_STEPS_CAUSE), (5, MAX_STEPS_CAUSE))
    assert res.failure_table() == [(1, f"raised: {MAX_STEPS_CAUSE}", None)] + [
        (5, f"raised: {MAX_STEPS_CAUSE}", None)
    ]
    assert np.isnan(res.outputs["ys"][[1, 5]]).all()
    np.testing.assert_array_equal(res.params[[1, 5]], [1e6, 1e6])
    # The other members: bitwise those of a batch without the raising ones.
    good = res.ok
    clean = mc.run_batch(raising_member, a[good], chunk_size=4)
    for x, y in zip(jax.tree.leaves(res.outputs), jax.tree.leaves(clean.outputs)):
        np.testing.assert_array_equal(np.asarray(x)[good], y)
    # A campaign records them in its chunk records: loaded back the same.
    camp = mc.run_campaign(raising_member, a, tmp_path / "c", chunk_size=4)
    assert_same(camp, res)
    record = json.loads((tmp_path / "c" / "chunks" / "chunk_000001.json").read_text())
    assert record["errors"] == {"5": MAX_STEPS_CAUSE}
    # A bug in the member function (at trace time) is raised, not reported per member.
    with pytest.raises(KeyError, match="nope"):
        mc.run_batch(lambda p: p["nope"], {"a": np.ones(2)})


def test_failure_table_times_without_throw():
    def member(p):  # throw=False: the failure is a result code, with the time it stopped
        model = eqx.tree_at(lambda m: m.a, OSC, p)
        return js.simulate(model, model.init_state(), 2.0, solver=js.Tsit5(), rtol=1e-8,
                           atol=1e-8, max_steps=64, throw=False)  # fmt: skip

    res = mc.run_batch(member, np.array([1.0, 1e6]))
    single = eqx.filter_jit(member)(jnp.asarray(1e6))
    assert float(single.t_final) < 2.0
    assert res.failure_table() == [(1, single.message, float(res.outputs["t_final"][1]))]
    np.testing.assert_allclose(res.outputs["t_final"][1], single.t_final, rtol=T_FINAL_RTOL)


def test_ctrl_c_says_how_many_chunks_are_committed_and_how_to_resume(tmp_path, monkeypatch):
    """Ctrl-C on a campaign dumped a 20-line traceback from inside a chunk with no line saying
    what was kept; now a KeyboardInterrupt (still raised) whose message says how many chunks are
    committed and that the same call resumes, without the chunk's traceback chained."""
    from jaxsim.montecarlo import campaign

    d = tmp_path / "c"
    real, calls = campaign._run_chunk, []

    def interrupted_at_the_second(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(campaign, "_run_chunk", interrupted_at_the_second)
    with pytest.raises(KeyboardInterrupt) as info:
        run(oscillator_member, d)
    message = str(info.value)
    assert message == (
        f"run_campaign: interrupted; 1 of 3 chunks of this process are committed in {str(d)!r} "
        "(0 adopted, 1 computed by this call). Run the same call again to resume: committed "
        "chunks are verified, not computed again."
    )
    assert info.value.__cause__ is None and info.value.__suppress_context__
    monkeypatch.setattr(campaign, "_run_chunk", real)
    assert mc.load_campaign(d).members.tolist() == [0, 1, 2]


def test_resumed_progress_counts_adopted_chunks_apart(tmp_path, monkeypatch):
    """On resume the bar counted adopted chunks as computed: its rate (and so its estimate of
    the time left) started from the first adopted chunk. Now the adopted members are shown at
    once (`start_at`) and the rate is measured from the first computed chunk on."""
    from jaxsim.montecarlo import batch

    d = tmp_path / "c"
    run(oscillator_member, d, max_chunks=1)
    seen = []

    class Recorder:
        def __init__(self, where, total, unit, **kw):
            seen.append(("open", total))

        def status(self, text):
            pass

        def start_at(self, n, extra=""):
            seen.append(("start_at", n))

        def update(self, n, extra=""):
            seen.append(("update", n))

        def close(self):
            pass

    monkeypatch.setattr(batch, "Bar", Recorder)
    counted = []
    run(oscillator_member, d, progress=True)
    run(oscillator_member, tmp_path / "d", max_chunks=1)
    run(oscillator_member, tmp_path / "d", progress=lambda done, total: counted.append(done))
    assert seen[:4] == [("open", N), ("start_at", 3), ("update", 6), ("update", 7)]
    assert counted == [3, 6, 7]
