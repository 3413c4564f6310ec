"""A campaign member's host callbacks are part of its fingerprint (issue 33 item 6): a resumed
campaign whose member calls a changed Python callback (`jax.pure_callback`, `io_callback`,
`jax.debug.callback`) is refused, naming the callback, instead of mixing results; the same
callback (rebuilt) resumes, and state a callback accumulates (a list) does not count.

Oracle: the rule of `jaxsim.montecarlo._fingerprint` (code, defaults, closed-over and global
numbers, strings, tuples and arrays by value; mutable containers by type), and the campaign's
values (each member's output is `scale * a`, exact in float64)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim  # noqa: F401  (float64)
from jaxsim import montecarlo as mc


pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")

N, SIZE = 4, 2  # two chunks
PARAMS = {"a": jnp.arange(1.0, N + 1.0)}
OFFSET = 0.0  # a module global read by `shifted`: part of the fingerprint by value


def make_member(scale, log=None):
    """A member whose output `scale * a` comes from a host callback closing over `scale`."""

    def host(a):
        if log is not None:
            log.append(float(a))
        return np.asarray(a * scale + OFFSET)

    def member(p):
        out = jax.pure_callback(
            host, jax.ShapeDtypeStruct((), jnp.float64), p["a"], vmap_method="sequential"
        )
        return {"y": out}

    return member


def run(member, d, **kw):
    return mc.run_campaign(member, PARAMS, d, chunk_size=SIZE, **kw)


def test_changed_callback_constant_refused_on_resume(tmp_path):
    d = tmp_path / "c"
    run(make_member(2.0), d, max_chunks=1)
    records = sorted((d / "chunks").glob("*.json"))
    with pytest.raises(ValueError) as err:
        run(make_member(3.0), d)
    text = str(err.value)
    assert "resuming would mix results" in text
    assert "host callback #0" in text and "make_member.<locals>.host" in text
    assert sorted((d / "chunks").glob("*.json")) == records  # nothing computed


def test_same_callback_rebuilt_resumes(tmp_path):
    d = tmp_path / "c"
    run(make_member(2.0, log=[]), d, max_chunks=1)
    log = ["another list, other contents"]  # accumulated state: counts by type only
    res = run(make_member(2.0, log=log), d)
    assert res.complete and res.n_ok == N
    np.testing.assert_array_equal(res.outputs["y"], 2.0 * np.arange(1.0, N + 1.0))
    assert len(log) == 1 + SIZE  # only the second chunk was computed


def test_changed_global_read_by_callback_refused(tmp_path, monkeypatch):
    d = tmp_path / "c"
    run(make_member(2.0), d, max_chunks=1)
    monkeypatch.setitem(globals(), "OFFSET", 1.0)
    with pytest.raises(ValueError, match="host callback #0"):
        run(make_member(2.0), d)


def test_fingerprint_without_callbacks_unchanged(tmp_path):
    """A member without host callbacks has no `callbacks` entry: campaigns written before the
    callbacks entered the fingerprint resume as before."""
    d = tmp_path / "c"
    run(lambda p: {"y": 2.0 * p["a"]}, d, max_chunks=1)
    manifest = json.loads((d / "manifest.json").read_text())
    assert "callbacks" not in manifest["fingerprint"]
    run(make_member(2.0), tmp_path / "e", max_chunks=1)
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert [c["names"][0] for c in manifest["fingerprint"]["callbacks"]] == [
        f"{__name__}.make_member.<locals>.host"
    ]


def test_callback_holding_a_traced_value_is_fingerprinted(tmp_path):
    """A callback whose default argument is a value of the member's trace counts by its shape and
    dtype (its value changes with every member); the campaign runs and resumes."""

    def member(p):
        def host(a, scale=p["a"] * 0 + 2.0):  # a traced default: not a constant of the member
            return np.asarray(a * 2.0)

        out = jax.pure_callback(
            host, jax.ShapeDtypeStruct((), jnp.float64), p["a"], vmap_method="sequential"
        )
        return {"y": out}

    d = tmp_path / "c"
    run(member, d, max_chunks=1)
    res = run(member, d)
    np.testing.assert_array_equal(res.outputs["y"], 2.0 * np.arange(1.0, N + 1.0))
