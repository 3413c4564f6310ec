"""Campaigns survive moves of library code (issue 40 item 6): a campaign's fingerprint does not
depend on the private modules where jaxsim's and effectors' functions live, and still tells
programs apart.

Oracles: a store written with every library object named by its module before the move (issue
40's map of moves, `tests/data/layout_moves.txt`) resumes on the current layout, adopting its
computed chunk unchanged, its values equal to a fresh run's; a store
written at 590c771 (`tests/data/campaign_pre_layout`, see its README), whose program has changed
since, is refused and left untouched; a host callback into a library function fingerprints the
same after that function moves to another module, and differently after it changes name."""

import json
import shutil
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import effectors.scenarios
import jaxsim as js
from jaxsim import montecarlo as mc
from jaxsim._model import _validation
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


def test_store_of_an_older_program_is_refused_untouched(tmp_path):
    """The store's program (RK4 before the fixed-step stability check of 9ff8082 read the stage
    clock) is not the program of today's member: the resume is refused, naming the program's
    difference, before anything is computed, and the store's files are left as they were.

    (This store resumed on the new layout when the stage folders landed, c5950b5: the fingerprint
    does not depend on module paths, which `test_library_callback_fingerprint_ignores_its_module`
    keeps checking; the program itself has changed since, so adopting its chunk now would mix
    results of two programs.)"""
    folder = tmp_path / "campaign"
    shutil.copytree(STORE, folder)
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"(?s)different configuration.*program: the member"):
        mc.run_campaign(member, PARAMS, folder, chunk_size=SIZE)
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == before


MOVES = (
    DATA / "layout_moves.txt"
)  # old module -> new module, issue 40's moves (see the data README)


def _moves() -> dict:
    """new module -> old module."""
    pairs = [line.split(" -> ") for line in MOVES.read_text().splitlines() if " -> " in line]
    return {new.strip(): old.strip() for old, new in pairs}


def _as_before_the_move(monkeypatch) -> int:
    """Every function and class defined in a moved module named by its module before the move
    (as the library looked when a store written on the old layout was fingerprinted); the
    number of objects renamed."""
    back = _moves()
    count = 0
    for name, module in list(sys.modules.items()):
        if name not in back or module is None:
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, type | types.FunctionType) and obj.__module__ == name:
                monkeypatch.setattr(obj, "__module__", back[name])
                count += 1
    return count


def layout_member(p):
    """`member` with a host callback into a library function that moved (`is_concrete`,
    `jaxsim._validation` before the move): the callback's function is fingerprinted by name."""
    out = member(p)
    jax.debug.callback(_validation.is_concrete, out["omega"])
    return out


def test_store_written_on_the_old_layout_resumes(tmp_path, monkeypatch):
    """A store written with every library object named by its module before the move (issue 40's
    map, 590c771 -> the stage folders) resumes on the current names: the computed chunk is
    adopted byte-identical and the values equal a fresh run's. (Under the old rule, which hashed
    a library function's module, the callback's `jaxsim._validation` against
    `jaxsim._model._validation` refused the resume.)"""
    folder = tmp_path / "campaign"
    with monkeypatch.context() as old_layout:
        assert _as_before_the_move(old_layout) > 100
        assert _validation.is_concrete.__module__ == "jaxsim._validation"
        mc.run_campaign(layout_member, PARAMS, folder, chunk_size=SIZE, max_chunks=1)
    assert _validation.is_concrete.__module__ == "jaxsim._model._validation"
    first = (folder / "chunks" / "chunk_000000.json").read_bytes()
    assert not (folder / "chunks" / "chunk_000001.json").exists()
    resumed = mc.run_campaign(layout_member, PARAMS, folder, chunk_size=SIZE)
    assert (folder / "chunks" / "chunk_000000.json").read_bytes() == first
    assert json.loads((folder / "chunks" / "chunk_000001.json").read_text())
    fresh = mc.run_campaign(layout_member, PARAMS, tmp_path / "fresh", chunk_size=SIZE)
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
