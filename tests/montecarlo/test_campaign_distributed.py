"""A campaign computed by two real processes under `jax.distributed` (coordinator on 127.0.0.1,
CPU backend) equals the same campaign computed by one process, bit for bit; each process computed
its own chunks (`k % 2 == process_index`)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.random as jr
import numpy as np
import pytest

from jaxsim import montecarlo as mc
from tests._campaign_worker import CHUNK_SIZE, SEED, N
from tests._sharding_worker import DISPERSIONS, oscillator_member


pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")

WORKER_TIMEOUT = 120  # [s] per process; the job takes ~10 s (two jax imports and compilations)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one(tmp_path):
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    port, d = free_port(), tmp_path / "two"
    cmd = [sys.executable, "-m", "tests._campaign_worker"]
    procs = [
        subprocess.Popen(cmd + [str(i), str(port), str(d)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in (0, 1)
    ]  # fmt: skip
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=WORKER_TIMEOUT)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for i, seen in enumerate(outs):
        assert seen == {
            "process_index": i,
            "process_count": 2,
            "local_devices": 1,
            "global_devices": 2,
            "complete": True,  # after the closing barrier, every process sees every chunk
            "members": list(range(N)),
        }
    writers = {
        int(p.stem.split("_")[1]): json.loads(p.read_text())["process"]
        for p in (d / "chunks").glob("chunk_*.json")
    }
    assert writers == {k: k % 2 for k in range(6)}
    one = mc.run_campaign(
        oscillator_member, DISPERSIONS, tmp_path / "one", key=jr.key(SEED), n=N,
        chunk_size=CHUNK_SIZE,
    )  # fmt: skip
    two = mc.load_campaign(d)
    assert two.complete and two.ok.all()
    assert jax.tree.structure(two) == jax.tree.structure(one)
    for x, y in zip(jax.tree.leaves(two), jax.tree.leaves(one)):
        np.testing.assert_array_equal(x, y)
    # The stores themselves: the same bytes per chunk (the records' sha256).
    for k in range(6):
        a = json.loads((d / "chunks" / f"chunk_{k:06d}.json").read_text())["sha256"]
        b = json.loads((tmp_path / "one" / "chunks" / f"chunk_{k:06d}.json").read_text())["sha256"]
        assert a == b, f"chunk {k}"
