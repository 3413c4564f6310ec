"""Campaigns on disk: `run_campaign` writes every finished chunk of members to a Zarr store
(in the schema of runs and batches: `member`, `time`, `xyz`, `wheel`, ...; xarray opens it
lazily with `open_campaign`) and resumes an interrupted campaign without recomputing verified
chunks; `load_campaign` reads a campaign back into one `BatchResult`.

A campaign runs in four steps, one function each: `_plan` (check the arguments, fingerprint
the member function, lay out the store), `_resume` (refuse a folder that would mix results, set
it up, verify this process's committed chunks), `_run_chunk` (compute one chunk of members)
and `_commit` (write its arrays, then its record). The folder's layout and its readers are in
`_store`, the fingerprint in `_fingerprint`, the member records in `_records`.
"""

import dataclasses
import gzip
import json
import math
import os
import socket
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jaxtyping import PRNGKeyArray, PyTree

from ._fingerprint import _differences, _fingerprint, _outputs_tree
from ._records import _SEP, BatchResult, _flatten
from ._store import (
    _FORMAT,
    _MANIFEST,
    _PROGRAM,
    _RECORDS,
    _STORE,
    _TMP,
    CampaignWarning as CampaignWarning,
    _atomic_write,
    _clean_tmp,
    _create_store,
    _identity,
    _layout,
    _open_store,
    _read_manifest,
    _read_record,
    _record_path,
    _records,
    _require_zarr,
    _sha,
    _store_attrs,
    _verify,
    load_campaign as load_campaign,
    open_campaign as open_campaign,
)
from .batch import _check_chunk_size, _Program, _Progress, _run_members, _setup, _units


__all__ = ["CampaignWarning", "load_campaign", "open_campaign", "run_campaign"]


def _barrier(name: str) -> None:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


# ----------------------------------------------------------------------------------------------
# run_campaign
# ----------------------------------------------------------------------------------------------


def run_campaign(
    fn: Callable[[Any], Any],
    params: PyTree,
    directory: str | os.PathLike,
    *,
    chunk_size: int,
    key: PRNGKeyArray | None = None,
    n: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str | None = None,
    progress: bool | Callable[[int, int], None] = False,
    max_chunks: int | None = None,
    process_index: int | None = None,
    process_count: int | None = None,
    config: dict | None = None,
    units: dict | None = None,
    load: bool = True,
    setup: str | os.PathLike | dict | None = None,
) -> BatchResult | None:
    r"""Run a Monte Carlo campaign chunk by chunk into `directory`, resumably.

    Chunk `k` holds members `k * chunk_size .. min((k + 1) * chunk_size, n) - 1`. Its results go
    to Zarr chunk `k` of the arrays of `directory/campaign.zarr`, then a record
    `chunks/chunk_<k>.json` (written atomically: temporary file + `os.replace`) commits it with a
    sha256 per array. Running again in the same directory:

    1. refuses, before computing anything, a campaign that would mix results: another `n`,
       `chunk_size`, key, dispersions or parameters, `config`, or another *fingerprint* of the
       member function (its traced program with its constants, e.g. a changed hub mass; the host
       callbacks it calls, e.g. a `jax.pure_callback` whose Python function changed a constant,
       by their code, defaults and the numbers they close over; and the names, shapes and dtypes of its
       outputs, e.g. a changed horizon); the message lists what changed. Chunk records carry the campaign's identity too, so a deleted `manifest.json`
       does not let another campaign adopt them;
    2. verifies the checksums of this process's chunks on disk: a damaged chunk is named in a
       `CampaignWarning` and computed again; temporary files of killed writers are removed;
    3. computes the missing chunks.

    A member that raises at run time (`simulate(..., throw=True)`) does not abort its chunk: see
    `run_batch`.

    **Arguments:**

    - `fn`, `params`, `key`, `n`, `devices`, `mesh`, `axis_name`, `progress`: as in `run_batch`
      (`progress` counts the members of this process, finished chunks included).
    - `directory`: the campaign folder (created if missing).
    - `chunk_size`: members per chunk (and per compiled call, and per Zarr chunk).
    - `max_chunks`: compute at most this many new chunks in this call, then return (the result
      is then incomplete: `complete=False`); default no limit.
    - `process_index`, `process_count`: this process computes the chunks `k` with
      `k % process_count == process_index`; default `jax.process_index()`,
      `jax.process_count()` (after `jax.distributed.initialize()`: every process of the job
      computes its own chunks, and the campaign is set up by process 0 and shared through the
      common directory; pass `devices=jax.local_devices()` to shard over a host's devices).
    - `config`: JSON-serializable metadata (e.g. a model version) stored in the manifest and
      compared on resume.
    - `units`: units of outputs for the store's `units` attributes, nested like the outputs
      (e.g. `{"outputs": model.units()["outputs"]}` for a `Solution`); keys as `summarize` returns
      them (`"outputs/omega_BN_B"`). The dispersions' `unit=` and the times (`ts`, `t_final`:
      s) are recorded without it. Written when the store is created.
    - `load`: read the campaign back at the end (default); `False` returns `None` instead, for
      campaigns larger than memory (then use `open_campaign`, `summarize_campaign`).
    - `setup`: the saved setup the members run (a path to a setup file, e.g. written by
      `effectors.save_setup`, or its JSON-serializable description): recorded in the store's
      attributes (`setup`, and `setup_file` for a path) when the store is created.

    **Returns:** `load_campaign(directory)`: every committed chunk on disk, from all processes
    (under `jax.distributed`, after every process finished its chunks); `None` with
    `load=False`.

    **Raises:** `ValueError` if `directory` holds another campaign (listing the differences);
    `ImportError` without the optional extra `jaxsim-spacecraft[campaign]` (xarray, zarr).

    !!! example

        ```python
        res = mc.run_campaign(member, disp, "runs/mc1", key=jr.key(0), n=10_000, chunk_size=500,
                              progress=True, config={"model": "v3"})
        # killed after 7 chunks? Run the same call again: chunks 0-6 are verified, not recomputed.
        ```
    """
    where = "run_campaign"
    plan = _plan(where, fn, params, directory, chunk_size, key, n, devices, mesh, axis_name,
                 max_chunks, process_index, process_count, config, units, load, setup)  # fmt: skip
    root, done_chunks = _resume(where, plan)
    size, n_members = plan.size, plan.source.n
    total = sum(min(size, n_members - k * size) for k in plan.mine)
    reporter = _Progress(progress, total, where)
    program, computed, done, failed = None, 0, 0, 0
    try:
        # Chunks adopted from disk: counted at once, before the rate is measured (they were
        # not computed by this call).
        for k in done_chunks:
            lo, hi = k * size, min((k + 1) * size, n_members)
            failed += int(np.sum(~np.asarray(root["ok"][lo:hi])))
            done += hi - lo
        if done_chunks:
            reporter.adopted(done, failed)
        for k in plan.mine:
            if k in done_chunks:
                continue
            lo, hi = k * size, min((k + 1) * size, n_members)
            if max_chunks is not None and computed >= max_chunks:
                break
            if program is None:
                program = _Program(fn, plan.source, plan.sharding)
            arrays, errors = _run_chunk(program, lo, hi, size)
            _commit(plan, root, k, lo, hi, arrays, errors)
            computed += 1
            done += hi - lo
            failed += int(np.sum(~arrays["ok"]))
            reporter.update(done, hi - lo, failed)
    except KeyboardInterrupt:
        reporter.close()
        committed = len(done_chunks) + computed
        raise KeyboardInterrupt(
            f"{where}: interrupted; {committed} of {len(plan.mine)} chunks of this process are "
            f"committed in {str(plan.directory)!r} ({len(done_chunks)} adopted, {computed} "
            "computed by this call). Run the same call again to resume: committed chunks are "
            "verified, not computed again."
        ) from None
    finally:
        reporter.close()
    if plan.shared:
        _barrier(f"jaxsim.montecarlo.done.{plan.identity[:16]}")
    return load_campaign(plan.directory) if load else None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a campaign call computes and where: built by `_plan` before anything is written."""

    directory: Path
    source: Any  # batch._Source
    sharding: Any
    size: int
    manifest: dict | None  # on disk, or None
    wanted: dict  # the manifest this call would write
    identity: str
    text: str  # the traced program's text
    layout: dict
    store_attrs: dict
    mine: list  # this process's chunk indices
    process_index: int
    shared: bool  # under jax.distributed: process 0 sets the folder up


def _plan(where, fn, params, directory, chunk_size, key, n, devices, mesh, axis_name,
          max_chunks, process_index, process_count, config, units, load, setup) -> _Plan:  # fmt: skip
    """Check the arguments, fingerprint the member function and lay out the store; reads the
    manifest on disk but writes nothing."""
    _require_zarr(where)
    source, sharding, n_dev = _setup(where, fn, params, key, n, devices, mesh, axis_name)
    size = _check_chunk_size(where, chunk_size, source.n, n_dev, required=True)
    process_index, process_count, config = _check_options(
        where, max_chunks, process_index, process_count, config, units, load
    )
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} is a file; give a folder for the "
            "campaign's store (created when missing, resumed when it holds a campaign)."
        )
    manifest = _read_manifest(directory, where) if directory.exists() else None
    n_chunks = math.ceil(source.n / size)
    fingerprint, text, infos = _fingerprint(fn, source)
    wanted = {
        "format": _FORMAT,
        "n": source.n,
        "chunk_size": size,
        "n_chunks": n_chunks,
        "source": "dispersions" if source.disp is not None else "params",
        "digest": source.digest(),
        "fingerprint": fingerprint,
        "config": config,
    }
    identity = _identity(wanted)
    known = _units(source)
    if units is not None:
        for key, unit in _flatten(units).items():
            path = f"outputs{_SEP}{key}"
            if path not in fingerprint["structure"] or not isinstance(unit, str):
                raise ValueError(
                    f"{where}: `units` must map output keys {sorted(_outputs_tree(fingerprint))} "
                    f"to unit strings; got {key!r}: {unit!r}."
                )
            known[path] = unit
    layout = _layout(fingerprint["structure"], known, infos)
    store_attrs = _store_attrs(fingerprint["structure"], infos, setup, where)
    # Under jax.distributed, every process of the job runs this call: process 0 sets up the
    # folder, the others wait for it (a barrier, not a lock: no other scheduler).
    shared = jax.process_count() > 1 and process_count == jax.process_count()
    mine = [k for k in range(n_chunks) if k % process_count == process_index]
    return _Plan(
        directory=directory, source=source, sharding=sharding, size=size, manifest=manifest,
        wanted=wanted, identity=identity, text=text, layout=layout, store_attrs=store_attrs,
        mine=mine, process_index=int(process_index), shared=shared,
    )  # fmt: skip


def _check_options(where, max_chunks, process_index, process_count, config, units, load):
    """`(process_index, process_count, config)` with their defaults, or a ValueError naming the
    option that is not what `run_campaign` documents."""
    if max_chunks is not None and (not isinstance(max_chunks, int | np.integer) or max_chunks < 0):
        raise ValueError(
            f"{where}: `max_chunks` must be an integer >= 0 or None; got {max_chunks!r}."
        )
    process_count = jax.process_count() if process_count is None else process_count
    process_index = jax.process_index() if process_index is None else process_index
    if not isinstance(process_count, int | np.integer) or process_count < 1:
        raise ValueError(
            f"{where}: `process_count` must be an integer >= 1; got {process_count!r}."
        )
    if not isinstance(process_index, int | np.integer) or not 0 <= process_index < process_count:
        raise ValueError(
            f"{where}: `process_index` must be an integer in [0, {process_count}); got "
            f"{process_index!r}."
        )
    if units is not None and not isinstance(units, dict):
        raise ValueError(
            f"{where}: `units` must be a (nested) dict of unit strings; got {units!r}."
        )
    if not isinstance(load, bool):
        raise ValueError(f"{where}: `load` must be True or False; got {load!r}.")
    config = {} if config is None else config
    try:
        config = json.loads(json.dumps(config))
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{where}: `config` must be JSON-serializable; got {config!r} ({err})."
        ) from None
    return process_index, process_count, config


def _resume(where: str, plan: _Plan) -> tuple[Any, dict]:
    """`(store root, {k: record})`: refuse a folder holding another campaign (before computing
    anything), set the folder up (process 0 under jax.distributed), and verify this process's
    committed chunks (a damaged one is named in a `CampaignWarning` and computed again)."""
    directory, manifest, wanted, identity = (
        plan.directory,
        plan.manifest,
        plan.wanted,
        plan.identity,
    )
    # 1. Refuse a campaign that would mix results (read-only checks, on every process).
    if manifest is not None and any(manifest.get(k) != wanted[k] for k in wanted):
        program_file = directory / _PROGRAM
        disk_text = None
        if program_file.exists():
            try:
                disk_text = gzip.decompress(program_file.read_bytes()).decode()
            except (OSError, EOFError, UnicodeDecodeError):
                disk_text = None
        diff = _differences(manifest, wanted, disk_text, plan.text)
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} holds a campaign with a different "
            f"configuration; resuming would mix results, so nothing was computed:\n  - "
            + "\n  - ".join(diff)
            + "\nResume with the original arguments, or use a new directory."
        )
    records = _records(directory) if directory.exists() else {}
    if manifest is None and directory.exists():
        _refuse_foreign_files(where, directory, records)
    for k, path in sorted(records.items()):
        record, _ = _read_record(path)
        if record is not None and record.get("campaign") not in (None, identity):
            raise ValueError(
                f"{where}: `directory` {str(directory)!r} holds chunks of another campaign "
                f"({path} has identity {record.get('campaign')!r:.20}..., this campaign "
                f"{identity[:16]}...: another key, dispersions, member function or chunking); "
                "nothing was computed. Use a new directory."
            )

    # 2. Set up the folder (process 0 under jax.distributed).
    n = plan.source.n
    if not plan.shared or jax.process_index() == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / _RECORDS).mkdir(exist_ok=True)
        if manifest is None:
            _atomic_write(directory / _PROGRAM, gzip.compress(plan.text.encode(), mtime=0))
            created = {**wanted, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            created["jax"] = jax.__version__
            _atomic_write(directory / _MANIFEST, json.dumps(created, indent=1).encode())
        if _open_store(where, directory, plan.layout, n) is None:
            if records:
                raise ValueError(
                    f"{where}: `directory` {str(directory)!r} has chunk records but its store "
                    f"{directory / _STORE} is missing or does not match them; nothing was "
                    "computed. Use a new directory."
                )
            _create_store(where, directory / _STORE, plan.layout, n, plan.size, plan.store_attrs)
    if plan.shared:
        _barrier(f"jaxsim.montecarlo.setup.{identity[:16]}")
    _clean_tmp(directory)
    root = _open_store(where, directory, plan.layout, n, mode="r+")
    if root is None:
        raise ValueError(
            f"{where}: the store {directory / _STORE} is missing or does not match the campaign "
            "after set-up (another process changed it?); nothing was computed."
        )

    # 3. Verify this process's chunks.
    done_chunks = {}
    for k in plan.mine:
        path = _record_path(directory, k)
        if not path.exists():
            continue
        lo, hi = k * plan.size, min((k + 1) * plan.size, n)
        record, why = _read_record(path)
        if why is not None:
            why = f"{path}: unreadable record ({why})"
        else:
            why = _verify(root, plan.layout, directory, k, lo, hi, record, identity)
        if why is None:
            done_chunks[k] = record
            continue
        warnings.warn(
            f"{where}: chunk {k} (members {lo}..{hi - 1}) is damaged and is computed again: {why}.",
            CampaignWarning,
            stacklevel=3,
        )
        path.unlink()
    return root, done_chunks


def _refuse_foreign_files(where: str, directory: Path, records: dict) -> None:
    """A folder without a manifest is set up as a campaign only if it holds nothing but what a
    campaign writes (an interrupted set-up, or a campaign whose manifest was deleted): a user's
    other files are never written among, and a store that is not a jaxsim campaign's is never
    replaced."""
    names = {_MANIFEST, _PROGRAM, _STORE, _RECORDS}
    foreign = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in directory.iterdir()
        if p.name not in names and not _TMP.fullmatch(p.name)
    )
    store = directory / _STORE
    if not foreign and store.exists() and not records:
        try:
            attrs = json.loads((store / "zarr.json").read_text()).get("attributes", {})
        except (OSError, ValueError, AttributeError):
            attrs = {}
        if not isinstance(attrs, dict) or attrs.get("format") != _FORMAT:
            foreign = [_STORE + "/ (not a jaxsim campaign store)"]
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} is not a campaign (no {_MANIFEST}) and "
            f"holds other files ({shown}); nothing was written. Give a new or empty folder: a "
            "campaign is never written among a user's files."
        )


def _run_chunk(program, lo: int, hi: int, size: int) -> tuple[dict, dict]:
    """`({path: array}, {member: cause})`: members `lo..hi-1` computed by the chunk program, as
    the store's flat named columns, and the members that raised at run time."""
    chunk = np.arange(lo, hi)
    (params_, outputs, code, finite), errors = _run_members(program, chunk, size)
    arrays = {"members": chunk, "ok": (code == 0) & finite, "result": code}
    arrays.update(_flatten(params_, "params"))
    arrays.update(_flatten(outputs, "outputs"))
    return arrays, errors


def _commit(plan: _Plan, root, k: int, lo: int, hi: int, arrays: dict, errors: dict) -> None:
    """Write chunk `k`'s arrays into the store, then its record (atomically): the record, with
    a sha256 per array, is what makes the chunk committed."""
    digests = {}
    for name, v in plan.layout.items():
        data = np.ascontiguousarray(arrays[v["path"]], dtype=v["dtype"])
        root[name][lo:hi] = data
        digests[name] = _sha(data)
    record = {
        "campaign": plan.identity,
        "chunk": k,
        "start": lo,
        "stop": hi,
        "sha256": digests,
        "errors": {str(m): cause for m, cause in sorted(errors.items())},
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "process": plan.process_index,
    }
    _atomic_write(_record_path(plan.directory, k), json.dumps(record, indent=1).encode())
