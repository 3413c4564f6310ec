"""Campaigns on disk: `run_campaign` writes every finished chunk of members to a directory
(atomically) and resumes an interrupted campaign without recomputing finished chunks;
`load_campaign` reads a campaign back into one `BatchResult`.
"""

import json
import math
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .batch import (
    BatchResult,
    _check_chunk_size,
    _flatten,
    _host_chunk,
    _Program,
    _Progress,
    _setup,
    _unflatten,
)


__all__ = ["load_campaign", "run_campaign"]

_FORMAT = "jaxsim.montecarlo/1"
_MANIFEST = "manifest.json"


def _chunk_path(directory: Path, k: int) -> Path:
    return directory / f"chunk_{k:06d}.npz"


def _atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    # Unique per process and host (several hosts may share the campaign directory).
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _read_manifest(directory: Path, where: str) -> dict | None:
    path = directory / _MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: `directory` has an unreadable {_MANIFEST} ({err}).") from None
    if manifest.get("format") != _FORMAT:
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} is not a jaxsim Monte Carlo campaign "
            f"(format {manifest.get('format')!r}, expected {_FORMAT!r})."
        )
    return manifest


def run_campaign(
    fn: Callable[[Any], Any],
    params,
    directory: str | os.PathLike,
    *,
    chunk_size: int,
    key=None,
    n: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str | None = None,
    progress: bool | Callable[[int, int], None] = False,
    max_chunks: int | None = None,
    process_index: int = 0,
    process_count: int = 1,
    config: dict | None = None,
) -> BatchResult:
    r"""Run a Monte Carlo campaign chunk by chunk into `directory`, resumably.

    Chunk `k` holds members `k * chunk_size .. min((k + 1) * chunk_size, n) - 1` and is written as
    `chunk_<k>.npz` (member indices, `ok`, `result`, parameters under `params/...`, outputs under
    `outputs/...`) to a temporary file that is then renamed over the final name (`os.replace`,
    atomic), so an interrupted campaign never leaves a partial chunk. `manifest.json` records `n`,
    `chunk_size`, a sha256 of the key and dispersions (or of the parameters) and `config`; running
    again in the same directory skips the chunks already on disk and refuses a different
    configuration.

    **Arguments:**

    - `fn`, `params`, `key`, `n`, `devices`, `mesh`, `axis_name`, `progress`: as in `run_batch`
      (`progress` counts the members of this process, finished chunks included).
    - `directory`: the campaign folder (created if missing).
    - `chunk_size`: members per chunk (and per compiled call).
    - `max_chunks`: compute at most this many new chunks in this call, then return (the result
      is then incomplete: `complete=False`); default no limit.
    - `process_index`, `process_count`: this process computes the chunks `k` with
      `k % process_count == process_index` (multi-host: `jax.process_index()`,
      `jax.process_count()`, with `devices=jax.local_devices()`).
    - `config`: JSON-serializable metadata (e.g. a model version) stored in the manifest and
      compared on resume.

    **Returns:** `load_campaign(directory)`: every chunk on disk, from all processes.

    **Raises:** `ValueError` if `directory` holds a campaign with another configuration.

    !!! example

        ```python
        res = mc.run_campaign(member, disp, "runs/mc1", key=jr.key(0), n=10_000, chunk_size=500,
                              progress=True, config={"model": "v3"})
        # killed after 7 chunks? Run the same call again: chunks 0-6 are loaded, not recomputed.
        ```
    """
    where = "run_campaign"
    source, sharding, n_dev = _setup(where, fn, params, key, n, devices, mesh, axis_name)
    size = _check_chunk_size(where, chunk_size, source.n, n_dev, required=True)
    if max_chunks is not None and (not isinstance(max_chunks, int | np.integer) or max_chunks < 0):
        raise ValueError(
            f"{where}: `max_chunks` must be an integer >= 0 or None; got {max_chunks!r}."
        )
    if not isinstance(process_count, int | np.integer) or process_count < 1:
        raise ValueError(
            f"{where}: `process_count` must be an integer >= 1; got {process_count!r}."
        )
    if not isinstance(process_index, int | np.integer) or not 0 <= process_index < process_count:
        raise ValueError(
            f"{where}: `process_index` must be an integer in [0, {process_count}); got "
            f"{process_index!r}."
        )
    config = {} if config is None else config
    try:
        config = json.loads(json.dumps(config))
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{where}: `config` must be JSON-serializable; got {config!r} ({err})."
        ) from None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n_chunks = math.ceil(source.n / size)
    wanted = {
        "format": _FORMAT,
        "n": source.n,
        "chunk_size": size,
        "n_chunks": n_chunks,
        "source": "dispersions" if source.disp is not None else "params",
        "digest": source.digest(),
        "config": config,
    }
    manifest = _read_manifest(directory, where)
    if manifest is None:
        text = json.dumps({**wanted, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2)
        _atomic_write(directory / _MANIFEST, lambda f: f.write(text.encode()))
    else:
        diff = [
            f"{name}: on disk {manifest.get(name)!r}, requested {value!r}"
            for name, value in wanted.items()
            if manifest.get(name) != value
        ]
        if diff:
            raise ValueError(
                f"{where}: `directory` {str(directory)!r} holds a campaign with a different "
                f"configuration ({'; '.join(diff)}); resume with the original arguments, or use "
                "a new directory."
            )
    mine = [k for k in range(n_chunks) if k % process_count == process_index]
    total = sum(min(size, source.n - k * size) for k in mine)
    reporter = _Progress(progress, total, where)
    program, computed, done, failed = None, 0, 0, 0
    try:
        for k in mine:
            chunk = np.arange(k * size, min((k + 1) * size, source.n))
            path = _chunk_path(directory, k)
            if path.exists():
                with np.load(path) as data:
                    if not np.array_equal(data["members"], chunk):
                        raise ValueError(
                            f"{where}: {path.name} holds members {data['members'][:4]}... but "
                            f"chunk {k} should hold {chunk[:4]}...; the directory is corrupt."
                        )
                    failed += int(np.sum(~data["ok"]))
                done += chunk.size
                reporter.update(done, chunk.size, failed)
                continue
            if max_chunks is not None and computed >= max_chunks:
                break
            if program is None:
                program = _Program(fn, source, sharding)
            padded = np.concatenate([chunk, np.full(size - chunk.size, chunk[-1])])
            params_, outputs, code, finite = _host_chunk(program.run(padded), chunk.size)
            ok = (code == 0) & finite
            arrays = {"members": chunk, "ok": ok, "result": code}
            for prefix, tree in (("params", params_), ("outputs", outputs)):
                arrays.update(_flatten(tree, prefix))
            _atomic_write(path, lambda f: np.savez(f, **arrays))
            computed += 1
            done += chunk.size
            failed += int(np.sum(~ok))
            reporter.update(done, chunk.size, failed)
    finally:
        reporter.close()
    return load_campaign(directory)


def load_campaign(directory: str | os.PathLike) -> BatchResult:
    """Read a campaign written by `run_campaign` (complete or not) into one `BatchResult`.

    **Arguments:**

    - `directory`: the campaign folder.

    **Returns:** a `BatchResult` of the chunks on disk, members in increasing order;
    `complete` tells whether every chunk is there, `n_total` is the campaign's `n`.

    !!! example

        ```python
        res = mc.load_campaign("runs/mc1")
        res.complete, res.n_ok, mc.summarize(res)["outputs/totRotEnergy"].mean
        ```
    """
    directory = Path(directory)
    manifest = _read_manifest(directory, "load_campaign")
    if manifest is None:
        raise ValueError(
            f"load_campaign: `directory` {str(directory)!r} has no {_MANIFEST}; not a campaign."
        )
    flats = []
    for k in range(int(manifest["n_chunks"])):
        path = _chunk_path(directory, k)
        if path.exists():
            with np.load(path) as data:
                flats.append({name: data[name] for name in data.files})
    if not flats:
        empty = np.zeros(0, dtype=np.int64)
        return BatchResult(
            members=empty,
            ok=np.zeros(0, bool),
            result=np.zeros(0, np.int32),
            params={},
            outputs={},
            n_total=int(manifest["n"]),
            complete=False,
        )
    flat = {name: np.concatenate([f[name] for f in flats], axis=0) for name in flats[0]}
    return BatchResult(
        members=flat["members"],
        ok=flat["ok"],
        result=flat["result"],
        params=_unflatten(flat, "params"),
        outputs=_unflatten(flat, "outputs"),
        n_total=int(manifest["n"]),
        complete=len(flats) == int(manifest["n_chunks"]),
    )
