"""Tests of `run_batch(..., workers=...)`: chunks run concurrently from a thread pool.

Oracle: the sequential run (`workers=1`), which the threaded one must equal bit for bit (same
compiled program, same inputs), members failing (NaN parameter) and raising at run time
(`eqx.error_if`) included; plus the argument checks, the default, the compile count, the order of
progress reports and the propagation of an error that is not a member's failure.
"""

import logging
import os
import threading
import warnings

import equinox as eqx
import jax
import jax.random as jr
import numpy as np
import pytest

import jaxsim as js
from jaxsim import montecarlo as mc
from jaxsim.montecarlo import batch
from tests._sharding_worker import DISPERSIONS, oscillator_member


# Member 2 is NaN (non-finite state), member 7 raises (a > 10); 11 members in 4 chunks of 3.
A = np.array([0.5, 1.0, np.nan, 1.5, 2.0, 0.8, 0.7, 20.0, 1.2, 0.9, 1.1])
PARAMS = {"a": A, "x0": np.linspace(0.9, 1.1, A.size)}
CHUNK = 3


def raising_or_not(p):
    """The oscillator; a member with `a > 10` raises at run time (`eqx.error_if`)."""
    sol = oscillator_member(p)
    return eqx.tree_at(lambda s: s.ts, sol, eqx.error_if(sol.ts, p["a"] > 10.0, "a too large"))


class _SpyPool(batch.ThreadPoolExecutor):
    """A thread pool that records the pools `run_batch` creates (their `max_workers`)."""

    created: list = []

    def __init__(self, max_workers=None, **kwargs):
        _SpyPool.created.append(max_workers)
        super().__init__(max_workers=max_workers, **kwargs)


@pytest.fixture
def spy_pool(monkeypatch):
    _SpyPool.created = []
    monkeypatch.setattr(batch, "ThreadPoolExecutor", _SpyPool)
    return _SpyPool.created


def _assert_same(a: mc.BatchResult, b: mc.BatchResult):
    np.testing.assert_array_equal(a.members, b.members)
    assert a.errors == b.errors and a.messages == b.messages
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _pool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("run_batch")]


def test_workers_equal_sequential_bitwise(spy_pool):
    seq = mc.run_batch(raising_or_not, PARAMS, chunk_size=CHUNK, workers=1)
    assert spy_pool == []
    reports = []

    def progress(done, total):
        reports.append((done, total, threading.current_thread() is threading.main_thread()))

    par = mc.run_batch(raising_or_not, PARAMS, chunk_size=CHUNK, workers=2, progress=progress)
    assert spy_pool == [2]
    nonfinite = int(js.RESULTS.nonfinite_state._value)
    expected = [0, 0, nonfinite, 0, 0, 0, 0, mc.RAISED, 0, 0, 0]
    np.testing.assert_array_equal(par.result, expected)
    assert par.errors == ((7, "a too large"),) and par.n_failed == 2
    _assert_same(par, seq)
    # Progress: from the calling thread, in chunk order.
    assert reports == [(3, 11, True), (6, 11, True), (9, 11, True), (11, 11, True)]
    # Device arrays (`to_host=False`): the same values.
    dev = mc.run_batch(raising_or_not, PARAMS, chunk_size=CHUNK, workers=2, to_host=False)
    assert isinstance(dev.outputs["ys"], jax.Array)
    _assert_same(dev, seq)
    # Dispersions (sampled on the worker threads) and a subset of members.
    kw = dict(key=jr.key(5), n=9, chunk_size=2, members=[8, 0, 3, 4, 6])
    _assert_same(
        mc.run_batch(oscillator_member, DISPERSIONS, workers=3, **kw),
        mc.run_batch(oscillator_member, DISPERSIONS, workers=1, **kw),
    )
    assert _pool_threads() == []


def test_workers_compile_once():
    traces = []

    def member(p):
        traces.append(1)  # runs at trace time only
        return oscillator_member(p)

    compiles = []

    class Record(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            if msg.startswith("Compiling jit(member)"):
                compiles.append(threading.current_thread().name)

    handler, logger = Record(), logging.getLogger("jax")
    logger.addHandler(handler)
    before = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    try:
        res = mc.run_batch(member, DISPERSIONS, key=jr.key(0), n=10, chunk_size=2, workers=2)
    finally:
        jax.config.update("jax_log_compiles", before)
        logger.removeHandler(handler)
    assert len(traces) == 1 and compiles == [threading.main_thread().name]
    assert res.n_ok == 10
    # The sequential run of the same member function reuses that compilation.
    mc.run_batch(member, DISPERSIONS, key=jr.key(1), n=10, chunk_size=2, workers=1)
    assert len(traces) == 1


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2", True])
def test_workers_validation(workers):
    with pytest.raises(ValueError, match=rf"run_batch: `workers` .*got {workers!r}"):
        mc.run_batch(oscillator_member, PARAMS, chunk_size=CHUNK, workers=workers)


def test_workers_default(spy_pool):
    # One chunk (the default chunk_size): one worker, no pool.
    assert batch._resolve_workers(None, None, 1) == 1
    mc.run_batch(oscillator_member, PARAMS)
    mc.run_batch(oscillator_member, PARAMS, workers=4)  # never more workers than chunks
    assert spy_pool == []
    # Several chunks on the CPU: one per core (at most one per chunk); sharded: 1.
    assert jax.default_backend() == "cpu"
    cores = batch.usable_cores()
    assert 1 <= cores <= os.cpu_count()
    assert batch._resolve_workers(None, None, 64) == min(cores, 64)
    assert batch._resolve_workers(None, None, 2) == min(cores, 2)
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    assert batch._resolve_workers(None, sharding, 64) == 1
    assert batch._resolve_workers(4, None, 3) == 3
    mc.run_batch(oscillator_member, PARAMS, chunk_size=CHUNK)
    assert spy_pool == ([min(cores, 4)] if cores > 1 else [])


def test_workers_thread_local_x64(spy_pool):
    # JAX's configuration contexts are thread-local: under `jax.enable_x64(False)` new threads
    # would run in float64 mode, so the chunks run on the calling thread.
    kw = dict(key=jr.key(2), n=8, chunk_size=4)
    with warnings.catch_warnings(), jax.enable_x64(False):
        warnings.simplefilter("ignore")  # float64 parameters truncated to float32
        res = mc.run_batch(oscillator_member, DISPERSIONS, workers=2, **kw)
    assert spy_pool == [] and res.outputs["ys"].dtype == np.float32 and res.n_ok == 8


def test_workers_other_errors_propagate(monkeypatch):
    run_members = batch._run_members

    def failing(program, members, size):  # not a member's run-time failure: propagates
        if 6 in members:
            raise RuntimeError("boom")
        return run_members(program, members, size)

    monkeypatch.setattr(batch, "_run_members", failing)
    with pytest.raises(RuntimeError, match="boom"):
        mc.run_batch(oscillator_member, PARAMS, chunk_size=CHUNK, workers=2)
    assert _pool_threads() == []  # the pool is shut down
    # A bug in the member function raises at trace time, on the calling thread.
    with pytest.raises(KeyError, match="nope"):
        mc.run_batch(lambda p: p["nope"], PARAMS, chunk_size=CHUNK, workers=2)
    assert _pool_threads() == []
