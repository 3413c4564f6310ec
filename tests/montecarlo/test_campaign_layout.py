"""Campaigns survive moves of library code (issue 40 item 6): a campaign's fingerprint does not
depend on the private modules where jaxsim's and effectors' functions live.

Oracles: a store written before the engine's stage folders existed (commit 590c771,
`tests/data/campaign_pre_layout`, see its README) resumes on the current layout, adopting its
computed chunk unchanged, and its values equal a fresh run's; a host callback into a library
function fingerprints the same after that function moves to another module, and differently
after it changes name."""

import json
import shutil
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import effectors.scenarios
import jaxsim as js
from jaxsim import montecarlo as mc
from jaxsim.montecarlo import _fingerprint
from tests.helpers import DATA


pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")

SIZE = 2  # two chunks of two members, as when the store was written
PARAMS = {"mHub_kg": jnp.array([740.0, 750.0, 760.0, 770.0])}
STORE = DATA / "campaign_pre_layout"


def member(p):
    """The member the store was written with (its traced program is what is fingerprinted)."""
    sc, y0, _ = fx.scenarios.combined(mHub_kg=p["mHub_kg"])
    sol = js.simulate(sc, y0, 2.0, dt=0.1, sample_dt=1.0)
    return {"omega": sol.ys["hub"]["omega_BN_B"][-1]}


def test_store_written_before_the_move_resumes(tmp_path):
    folder = tmp_path / "campaign"
    shutil.copytree(STORE, folder)
    first = (folder / "chunks" / "chunk_000000.json").read_bytes()
    assert not (folder / "chunks" / "chunk_000001.json").exists()
    resumed = mc.run_campaign(member, PARAMS, folder, chunk_size=SIZE)
    # The old chunk was adopted as it was, the missing one computed.
    assert (folder / "chunks" / "chunk_000000.json").read_bytes() == first
    assert json.loads((folder / "chunks" / "chunk_000001.json").read_text())
    fresh = mc.run_campaign(member, PARAMS, tmp_path / "fresh", chunk_size=SIZE)
    np.testing.assert_array_equal(resumed.ok, fresh.ok)
    assert bool(np.all(resumed.ok))
    np.testing.assert_array_equal(resumed.outputs["omega"], fresh.outputs["omega"])


def _library_function(x):
    return np.asarray(x) * 2.0


def _member_calling(fn):
    def calling(p):
        out = jax.pure_callback(
            fn, jax.ShapeDtypeStruct((), jnp.float64), p["a"], vmap_method="sequential"
        )
        return {"y": out}

    return calling


def _digest(fn):
    """The fingerprint of a member calling `fn` on the host (two members, no dispersion)."""
    source = types.SimpleNamespace(disp=None, params={"a": jnp.arange(2.0)})
    return _fingerprint._fingerprint(_member_calling(fn), source)[0]


@pytest.mark.parametrize("package", ["jaxsim", "effectors"])
def test_library_callback_fingerprint_ignores_its_module(monkeypatch, package):
    """A library callback counts by package and name: moving it between private modules keeps
    the fingerprint; renaming it changes it (so the rule still tells functions apart)."""
    monkeypatch.setattr(_library_function, "__module__", f"{package}._old_place")
    before = _digest(_library_function)
    monkeypatch.setattr(_library_function, "__module__", f"{package}._stage._new_place")
    assert _digest(_library_function) == before
    monkeypatch.setattr(_library_function, "__qualname__", "_renamed")
    assert _digest(_library_function) != before
