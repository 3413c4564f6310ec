"""The campaign store: a campaign folder on disk, its files and how they are read.

Layout of a campaign folder (format `jaxsim.montecarlo/2`):

- `manifest.json`: `n`, `chunk_size`, a sha256 of the key and dispersions (or parameters), the
  *fingerprint* of what a member computes (`jaxsim.montecarlo._fingerprint`), `config`.
- `program.jaxpr.gz`: the traced program's text, to show what changed when a resume is refused.
- `campaign.zarr/`: one array per parameter/output (`members`, `ok`, `result`, `params.<name>`,
  `outputs.<name>`), leading axis `member` chunked by `chunk_size`: campaign chunk `k` is Zarr
  chunk `k` of every array.
- `chunks/chunk_<k>.json`: the commit record of chunk `k`, written after its data: the campaign's
  identity, a sha256 per array of its members, and the members that raised at run time. A chunk
  without a record (or whose record or data fail verification) is computed again.

Here: the file helpers (atomic writes, temporary files of killed writers), the Zarr layout in the
schema of runs and batches, creating and opening the store, verifying committed chunks, and the
readers `load_campaign` and `open_campaign`. A leaf over the member records (`_records`):
`campaign` writes through it, `summary` reads through it.
"""

import dataclasses
import hashlib
import json
import os
import re
import socket
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._result import _schema
from ._records import _SEP, BatchResult, _batch_from_flat, _empty


__all__ = ["CampaignWarning", "load_campaign", "open_campaign"]

_FORMAT = "jaxsim.montecarlo/2"


_MANIFEST = "manifest.json"


_PROGRAM = "program.jaxpr.gz"


_STORE = "campaign.zarr"


_RECORDS = "chunks"


_EXTRA = "campaign"  # the optional dependencies: pip install "jaxsim-spacecraft[campaign]"


_ZARR_CHUNK_BYTES = 2**22  # uncompressed Zarr chunk size aimed at along the time axis (4 MiB)


_TMP = re.compile(r"\.(?P<name>.+)\.tmp-(?P<host>.+)-(?P<pid>\d+)")


class CampaignWarning(UserWarning):
    """A campaign folder needed repair: a damaged chunk (named) is computed again."""


def _require_zarr(where: str):
    try:
        import zarr
    except ImportError:
        raise ImportError(
            f"{where}: campaigns are stored with Zarr, which is not installed; install the "
            f'optional extra `pip install "jaxsim-spacecraft[{_EXTRA}]"` (xarray, zarr).'
        ) from None
    return zarr


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------


def _record_path(directory: Path, k: int) -> Path:
    return directory / _RECORDS / f"chunk_{k:06d}.json"


def _atomic_write(path: Path, data: bytes) -> None:
    # Unique per process and host (several hosts may share the campaign directory).
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():  # nothing of this process is being written yet
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_tmp(directory: Path) -> list[Path]:
    """Remove the temporary files left by killed writers of this host (a process of another host
    may still be writing its own)."""
    host, removed = socket.gethostname(), []
    for folder in (directory, directory / _RECORDS):
        for tmp in folder.glob(".*.tmp-*") if folder.is_dir() else ():
            found = _TMP.fullmatch(tmp.name)
            if found and found["host"] == host and not _alive(int(found["pid"])):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
    return removed


def _read_manifest(directory: Path, where: str) -> dict | None:
    path = directory / _MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{where}: `directory` has an unreadable {path} ({err}).") from None
    if manifest.get("format") != _FORMAT:
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} is not a jaxsim Monte Carlo campaign "
            f"(format {manifest.get('format')!r}, expected {_FORMAT!r})."
        )
    return manifest


def _sha(data: np.ndarray) -> str:
    data = np.ascontiguousarray(data)
    h = hashlib.sha256(f"{data.dtype.str}{data.shape}".encode())
    h.update(data.tobytes())
    return h.hexdigest()


def _identity(wanted: dict) -> str:
    """The campaign's identity, written into every chunk record: chunks of another campaign (other
    key, dispersions, program, outputs, `n` or `chunk_size`) are never adopted, manifest or not."""
    keys = ("n", "chunk_size", "source", "digest")
    fp = wanted["fingerprint"]
    blob = json.dumps([[wanted[k] for k in keys], fp["program"], fp["structure"]], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


# ----------------------------------------------------------------------------------------------
# The store
# ----------------------------------------------------------------------------------------------


def _var_name(path: str) -> str:
    return path.replace(_SEP, ".")


def _solution_infos(structure: dict, infos) -> dict:
    """`{solution path in the outputs: RunInfo}`: the traced `Solution.info`s, and an empty one
    for each output subtree with a `ts` and `ys` or `stats` (a Solution without `info`)."""
    out = {path: info for path, info in (infos or ())}
    for name in structure:
        parts = name.split(_SEP)
        if parts[0] == "outputs" and parts[-1] == "ts":
            sol = _SEP.join(parts[1:-1])
            siblings = {p.split(_SEP)[len(parts) - 1] for p in structure if p.startswith(
                _SEP.join(parts[:-1]) + _SEP)}  # fmt: skip
            if sol not in out and siblings & {"ys", "stats"}:
                out[sol] = _schema.RunInfo(units=(("counts", _schema.COUNT_UNIT),))
    return out


def _layout(structure: dict, units: dict, infos) -> dict:
    """`{array name: {"path", "shape", "dtype", "dims", "units", "name"}}` (shapes without the
    member axis), dimensions and `name` (the variable's name in `open_campaign`) by the schema
    of runs, batches and campaigns (`jaxsim._result._schema.store_layout`) given the `Solution.info`s
    `infos` (`[(path, RunInfo)]`)."""
    ts = structure.get("outputs/ts") or structure.get("outputs/outputs/ts")
    n_time = ts[0][0] if ts is not None and len(ts[0]) == 1 else None
    sols = _solution_infos(structure, infos)
    for sol in sols:
        ts = structure.get(_SEP.join(["outputs", sol, "ts"]) if sol else "outputs/ts")
        if ts is not None and len(ts[0]) == 1:
            n_time = ts[0][0]
            break
    schema = _schema.store_layout(structure, sols, n_time)
    layout = {
        name: {"path": name, "shape": [], "dtype": dtype, "dims": ["member"], "name": name,
               "units": _schema.CODE_UNIT if name == "result" else ""}
        for name, dtype in (("members", "int64"), ("ok", "bool"), ("result", "int32"))
    }  # fmt: skip
    for path, (shape, dtype) in structure.items():
        new, dims, known = schema[path]
        unit = "s" if path.endswith((_SEP + "ts", _SEP + "t_final")) else units.get(path, "")
        if path.startswith("params" + _SEP):
            dims = _schema.param_dims(new, tuple(shape), unit)
        layout[_var_name(path)] = {"path": path, "shape": shape, "dtype": dtype, "name": new,
                                   "dims": ["member", *dims], "units": unit or known or ""}  # fmt: skip
    if len(layout) != 3 + len(structure):
        raise ValueError("montecarlo: two parameter or output paths map to one array name.")
    return dict(sorted(layout.items()))


def _store_attrs(structure: dict, infos, setup, where: str) -> dict:
    """The store's attributes: the schema (`{"version", "solutions": {path: RunInfo json}}`),
    the run settings of the (first) Solution, and the saved `setup` when given."""
    sols = _solution_infos(structure, infos)
    attrs = {
        "schema": {
            "version": _schema.SCHEMA,
            "solutions": {path: info.to_json() for path, info in sols.items()},
        }
    }
    if setup is not None:
        if isinstance(setup, str | os.PathLike):
            path = Path(setup)
            try:
                text = path.read_text()
            except OSError as err:
                raise ValueError(
                    f"{where}: `setup` file {str(path)!r} is unreadable: {err}."
                ) from None
            attrs["setup_file"] = str(path)
            try:
                attrs["setup"] = json.loads(text)
            except ValueError:
                attrs["setup"] = text  # another format (TOML): recorded as written
        else:
            try:
                attrs["setup"] = json.loads(json.dumps(setup))
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"{where}: `setup` must be a path or a JSON-serializable description; "
                    f"got {type(setup).__name__} ({err})."
                ) from None
    return attrs


def _fill_value(dtype: str):
    kind = np.dtype(dtype).kind
    return np.nan if kind in "fc" else (False if kind == "b" else (-1 if dtype == "int64" else 0))


def _chunks(shape: list, dtype: str, size: int) -> tuple:
    """Zarr chunk shape: `size` members, and along the second axis (time) as many samples as fit
    in `_ZARR_CHUNK_BYTES`, so that a summary reading blocks of sample times decompresses only
    those (all of the further axes)."""
    rest = [max(1, s) for s in shape]
    if not rest:
        return (size,)
    per_sample = size * np.dtype(dtype).itemsize * int(np.prod(rest[1:]))
    return (size, int(min(rest[0], max(1, _ZARR_CHUNK_BYTES // per_sample))), *rest[1:])


def _create_store(where: str, path: Path, layout: dict, n: int, size: int, attrs=None) -> None:
    zarr = _require_zarr(where)
    attributes = {"format": _FORMAT, **(attrs or {})}
    root = zarr.open_group(str(path), mode="w", attributes=attributes)
    for name, v in layout.items():
        root.create_array(
            name,
            shape=(n, *v["shape"]),
            chunks=_chunks(v["shape"], v["dtype"], size),
            dtype=v["dtype"],
            fill_value=_fill_value(v["dtype"]),
            dimension_names=v["dims"],
            attributes={
                "path": v["path"],
                **({"units": v["units"]} if v["units"] else {}),
                **({"name": v["name"]} if "name" in v else {}),
            },
        )


def _open_store(where: str, directory: Path, layout: dict | None, n: int, mode: str = "r"):
    """The store's root group; with `layout`, `None` when an array is missing or mismatched."""
    zarr = _require_zarr(where)
    try:
        root = zarr.open_group(str(directory / _STORE), mode=mode)
        if layout is None:
            return root
        for name, v in layout.items():
            arr = root[name]
            if arr.shape != (n, *v["shape"]) or arr.dtype != np.dtype(v["dtype"]):
                return None
    except (FileNotFoundError, KeyError, ValueError, zarr.errors.BaseZarrError):
        return None
    return root


def _chunk_file(directory: Path, arr, name: str, k: int) -> Path:
    """The file of campaign chunk `k` of array `name` (Zarr 3's default chunk key
    `c/<k>/0/...`), or its folder `c/<k>` when it spans several Zarr chunks along time."""
    base = directory / _STORE / name / "c" / str(k)
    if any(c < s for c, s in zip(arr.chunks[1:], arr.shape[1:])):
        return base
    return base / Path(*(["0"] * (len(arr.shape) - 1)))


def _read_record(path: Path) -> tuple[dict | None, str | None]:
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, f"{type(err).__name__}: {err}"
    if not isinstance(record, dict):
        return None, f"not a JSON object: {type(record).__name__}"
    return record, None


def _records(directory: Path) -> dict[int, Path]:
    found = {}
    for path in (directory / _RECORDS).glob("chunk_*.json"):
        try:
            found[int(path.stem.split("_")[1])] = path
        except ValueError:
            continue
    return found


def _verify(root, layout, directory, k, lo, hi, record, identity) -> str | None:
    """Why chunk `k` is damaged, naming the file; `None` when its data match its checksums."""
    digests = record.get("sha256")
    where = (record.get("campaign"), record.get("chunk"), record.get("start"), record.get("stop"))
    if where != (identity, k, lo, hi) or not isinstance(digests, dict):
        return f"{_record_path(directory, k)}: record of another chunk or incomplete"
    for name in layout:
        where = _chunk_file(directory, root[name], name, k)
        try:
            data = np.asarray(root[name][lo:hi])
        except Exception as err:  # any decoding failure of a damaged file
            return f"{where}: unreadable ({type(err).__name__}: {err})"
        if _sha(data) != digests.get(name):
            return f"{where}: checksum mismatch (sha256 in {_record_path(directory, k)})"
    return None


# ----------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------


def _committed(directory: Path, manifest: dict, where: str) -> dict[int, dict]:
    """The chunk records of the campaign (`{k: record}`); unreadable or foreign ones are left out
    with a `CampaignWarning` naming them (`run_campaign` recomputes them)."""
    identity = _identity(manifest)
    out = {}
    for k, path in sorted(_records(directory).items()):
        record, why = _read_record(path)
        if why is None and record.get("campaign") != identity:
            why = "record of another campaign"
        if why is not None or not 0 <= k < int(manifest["n_chunks"]):
            warnings.warn(
                f"{where}: {path} is left out ({why or 'chunk index out of range'}).",
                CampaignWarning,
                stacklevel=3,
            )
            continue
        out[k] = record
    return out


def _verified(root, directory: Path, manifest: dict, where: str) -> dict[int, dict]:
    """The committed chunks that every campaign reader serves (`load_campaign`, `open_campaign`,
    `summarize_campaign`, `campaign_failures`, `plot_campaign`): `{k: record}`, each chunk's data
    checked against its record's checksums, one chunk in memory at a time. A damaged chunk (a
    flipped byte, data of another chunk swapped in, a deleted Zarr chunk file that would read as
    its fill value: NaN rows marked `ok`) raises a `ValueError` naming the file; `run_campaign`
    on the same directory recomputes it. Unreadable or foreign records are left out with a
    `CampaignWarning` (`_committed`)."""
    records = _committed(directory, manifest, where)
    identity = _identity(manifest)
    n, size = int(manifest["n"]), int(manifest["chunk_size"])
    names = sorted(root.array_keys())
    for k, record in sorted(records.items()):
        lo, hi = k * size, min((k + 1) * size, n)
        why = _verify(root, names, directory, k, lo, hi, record, identity)
        if why is not None:
            raise ValueError(
                f"{where}: chunk {k} (members {lo}..{hi - 1}) of campaign {str(directory)!r} is "
                f"damaged: {why}; run `run_campaign` on the same directory to recompute it."
            )
    return records


def _ranges(chunks, size: int, n: int) -> list[tuple[int, int]]:
    """Member ranges `[lo, hi)` of the sorted chunk indices, adjacent chunks merged."""
    out: list[list[int]] = []
    for k in chunks:
        lo, hi = k * size, min((k + 1) * size, n)
        if out and out[-1][1] == lo:
            out[-1][1] = hi
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _manifest_of(directory, where: str) -> tuple[Path, dict]:
    directory = Path(directory)
    manifest = _read_manifest(directory, where)
    if manifest is None:
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} has no {_MANIFEST}; not a campaign."
        )
    return directory, manifest


def load_campaign(directory: str | os.PathLike) -> BatchResult:
    """Read a campaign written by `run_campaign` (complete or not) into one `BatchResult`.

    Reads the committed chunks (those with a chunk record) of the campaign's Zarr store. Loads
    everything into memory: for large campaigns, `open_campaign` (lazy, xarray) and
    `summarize_campaign` (chunk by chunk) read the store without loading it.

    **Arguments:**

    - `directory`: the campaign folder.

    **Returns:** a `BatchResult` of the chunks on disk, members in increasing order;
    `complete` tells whether every chunk is there, `n_total` is the campaign's `n`, `errors` the
    members that raised at run time.

    !!! example

        ```python
        res = mc.load_campaign("runs/mc1")
        res.complete, res.n_ok, mc.summarize(res)["outputs/totRotEnergy"].mean
        ```
    """
    where = "load_campaign"
    directory, manifest = _manifest_of(directory, where)
    n, size = int(manifest["n"]), int(manifest["chunk_size"])
    if not _records(directory):
        return _empty(n)
    root = _open_store(where, directory, None, n)
    if root is None:
        raise ValueError(f"{where}: {directory / _STORE} is missing or unreadable.")
    records = _verified(root, directory, manifest, where)
    if not records:
        return _empty(n)
    ranges = _ranges(sorted(records), size, n)
    flat = {}
    for name in sorted(root.array_keys()):
        arr = root[name]
        try:
            flat[arr.attrs["path"]] = np.concatenate([arr[lo:hi] for lo, hi in ranges], axis=0)
        except Exception as err:  # a damaged chunk file
            raise ValueError(
                f"{where}: array {name!r} of {directory / _STORE} is damaged "
                f"({type(err).__name__}: {err}); run_campaign verifies and recomputes it."
            ) from None
    errors = sorted((int(m), c) for r in records.values() for m, c in r.get("errors", {}).items())
    res = _batch_from_flat(flat, n, len(records) == int(manifest["n_chunks"]), errors)
    units = tuple(
        (root[k].attrs["path"], root[k].attrs["units"])
        for k in sorted(root.array_keys())
        if root[k].attrs["path"].startswith("params" + _SEP) and root[k].attrs.get("units")
    )
    return dataclasses.replace(res, schema=_store_schema(root), units=units)


def _store_schema(root) -> tuple:
    """`((solution path, RunInfo), ...)` recorded in a store's attributes."""
    sols = dict(root.attrs)["schema"].get("solutions", {})
    return tuple((path, _schema.RunInfo.from_json(info)) for path, info in sols.items())


def open_campaign(directory: str | os.PathLike) -> Any:
    """The campaign's store as a lazily loaded `xarray.Dataset` (nothing is read until used).

    The schema of runs and batches (`jaxsim.results.to_xarray`): the names of
    a run (`omega_BN_B`, `rw.Omega`, `ys.hub.sigma_BN`, `stats.num_steps`, `t_final`; a
    `Solution` under a key of the member outputs prefixed by it), `params.<name>`, `ok`,
    `result`; dimensions `member` (coordinate: member index), `time` (coordinate: the sample
    times of the first committed member that succeeded), the labelled components `xyz`, `mrp`,
    `row`, `column` and the effectors' element dimensions (`wheel`, `panel`, ...); `units` and
    `path` (the `/`-joined keys of `BatchResult`) attributes; the run settings, the schema and
    the saved setup (`run_campaign(..., setup=...)`) as Dataset attributes. `committed` marks
    the members of committed chunks: the others have not been computed (their values are the
    fill values: NaN, 0).

    Opening verifies every committed chunk against its record's checksums, as `load_campaign`
    and `summarize_campaign` do (one chunk in memory at a time): a damaged chunk, or data of
    another chunk swapped in, raises a `ValueError` naming the file.

    !!! example

        ```python
        ds = mc.open_campaign("runs/mc1")
        ds["omega_BN_B"].where(ds.ok & ds.committed).isel(time=-1).std("member")
        ```
    """
    where = "open_campaign"
    directory, manifest = _manifest_of(directory, where)
    _require_zarr(where)
    try:
        import xarray as xr
    except ImportError:
        raise ImportError(
            f'{where}: needs xarray; install the optional extra `pip install "jaxsim-spacecraft[{_EXTRA}]"` '
            "(xarray, zarr)."
        ) from None
    n, size = int(manifest["n"]), int(manifest["chunk_size"])
    root = _open_store(where, directory, None, n)
    if root is None:
        raise ValueError(f"{where}: {directory / _STORE} is missing or unreadable.")
    committed = np.zeros(n, bool)
    for lo, hi in _ranges(sorted(_verified(root, directory, manifest, where)), size, n):
        committed[lo:hi] = True
    ds = xr.open_zarr(
        str(directory / _STORE), consolidated=False, mask_and_scale=False, zarr_format=3
    )
    ds = ds.assign_coords(member=np.arange(n)).assign(committed=("member", committed))
    return _schema_dataset(ds, dict(ds.attrs), committed, xr)


def _schema_dataset(ds, attrs: dict, committed, xr):
    """A store opened by xarray, in the schema of runs, batches and campaigns: variables renamed
    to their `name` attribute, the sample times of the first committed member as the `time`
    coordinate, labels of the component dimensions and indices of the element ones."""
    names = {v: ds[v].attrs["name"] for v in ds.data_vars if "name" in ds[v].attrs}
    ds = ds.rename_vars({k: v for k, v in names.items() if k != v})
    schema = attrs.pop("schema")
    sols = {p: _schema.RunInfo.from_json(i) for p, i in schema.get("solutions", {}).items()}
    times = [p.replace(_SEP, ".") + ".ts" if p else "ts" for p in sols]
    times = [t for t in times if t in ds.data_vars and ds[t].dims == ("member", "time")]
    usable = committed & np.asarray(ds["ok"].values) if "ok" in ds.data_vars else committed
    usable = usable if usable.any() else committed  # ok members' times are finite
    if times and usable.any():
        first = int(np.argmax(usable))
        ds = ds.assign_coords(
            time=xr.Variable(("time",), ds[times[0]][first].values, {"units": "s"})
        )
        ds = ds.drop_vars(times)
    ds = ds.drop_vars([v for v in ("members",) if v in ds.data_vars])
    for path, info in sols.items():  # event names from the indices (small integer arrays)
        prefix = path.replace(_SEP, ".") + "." if path else ""
        index = f"{prefix}event.index"
        if index in ds.data_vars:
            names = np.asarray([*info.events, ""], dtype=object)
            idx = np.asarray(ds[index].values)
            kind = names[np.where((idx >= 0) & (idx < len(info.events)), idx, -1)]
            ds = ds.assign({f"{prefix}event.kind": (ds[index].dims, kind)})
    elements = {d for info in sols.values() for _, d in info.elements}
    ds = _schema.label_coords(ds, xr, elements)
    info = next(iter(sols.values()), None)
    out = _schema.run_attrs(info)
    out.update({k: v for k, v in attrs.items() if k != "format"})
    out["format"] = attrs.get("format", _FORMAT)
    ds.attrs = out
    return ds
