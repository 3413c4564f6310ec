"""Statistics of a batch's outputs over its `ok` members (`Summary` and `summarize`, defined with
the member records in `_records`); the same from a campaign's store, chunk by chunk
(`summarize_campaign`), its failures (`campaign_failures`, `failure_counts`) and dispersion plots
(`plot_campaign`)."""

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._result import _schema
from ..plotting import pyplot
from ._records import (
    _SEP,
    Summary as Summary,
    _batch_from_flat,
    summarize as summarize,
)
from ._store import (
    _committed,
    _manifest_of,
    _open_store,
    _ranges,
    _verified,
)


__all__ = [
    "Summary",
    "campaign_failures",
    "failure_counts",
    "plot_campaign",
    "summarize",
    "summarize_campaign",
]


# ----------------------------------------------------------------------------------------------
# From a campaign's store, chunk by chunk
# ----------------------------------------------------------------------------------------------

_STORE_BYTES = 2**27  # default memory bound of `summarize_campaign` (128 MiB of float64)


def _campaign(directory, where: str):
    """`(manifest, root, ranges, ok)` of a campaign: its committed member ranges and their `ok`
    mask."""
    directory, manifest = _manifest_of(directory, where)
    n, size = int(manifest["n"]), int(manifest["chunk_size"])
    root = _open_store(where, directory, None, n)
    if root is None:
        raise ValueError(f"{where}: the store of campaign {str(directory)!r} is missing.")
    records = _verified(root, directory, manifest, where)
    ranges = _ranges(sorted(records), size, n)
    ok = np.concatenate([root["ok"][lo:hi] for lo, hi in ranges] or [np.zeros(0, bool)])
    return manifest, root, ranges, ok


def _rows(arr, ranges, ok, cols=None) -> np.ndarray:
    """The `ok` rows of `arr` over the committed `ranges` (columns `cols` of axis 1), read one
    Zarr chunk at a time into one preallocated array."""
    shape = arr.shape[1:]
    if cols is not None:
        shape = (len(range(*cols.indices(shape[0]))), *shape[1:])
    out = np.empty((int(ok.sum()), *shape), dtype=arr.dtype)
    start, row = 0, 0
    for lo, hi in ranges:
        sel = ok[start : start + hi - lo]
        start += hi - lo
        block = np.asarray(arr[lo:hi] if cols is None else arr[lo:hi, cols])[sel]
        out[row : row + block.shape[0]] = block
        row += block.shape[0]
    return out


def _stats(x: np.ndarray, pct, n_ok: int) -> dict:
    x = x.astype(float, copy=False)
    if n_ok == 0:
        nan = np.full(x.shape[1:], np.nan)
        return dict(mean=nan, std=nan, min=nan, max=nan, percentiles={p: nan for p in pct})
    return dict(
        mean=x.mean(axis=0),
        std=x.std(axis=0),
        min=x.min(axis=0),
        max=x.max(axis=0),
        percentiles=dict(zip(pct, np.percentile(x, pct, axis=0))),
    )


def summarize_campaign(
    directory: str | os.PathLike,
    percentiles: Sequence[float] = (5.0, 50.0, 95.0),
    *,
    include_params: bool = False,
    names: Sequence[str] | None = None,
    max_bytes: int = _STORE_BYTES,
) -> dict[str, Summary]:
    r"""`summarize` of a campaign on disk, read from its store without loading it.

    Every output is read one Zarr chunk (campaign chunk) at a time, keeping the `ok` members of
    the committed chunks, over blocks of sample times (its second axis) small enough that a block
    of all members fits in `max_bytes`: memory stays bounded for any number of members, and the
    statistics are those of `summarize(load_campaign(directory))` (each time and component is
    reduced over the members alone).

    **Arguments:**

    - `directory`: a campaign folder written by `run_campaign`.
    - `percentiles`, `include_params`: as in `summarize`.
    - `names`: summarize only these keys (as returned, e.g. `["outputs/omega_BN_B"]`).
    - `max_bytes`: size of one block of float64 values (default 128 MiB; at least one sample
      time of all members); the statistics take about 4 blocks of memory (the block, the sorted
      copy of the percentiles, the deviations of the standard deviation).

    **Returns:** `{path: Summary}` as `summarize`; `n_failed` counts the failed members of the
    committed chunks.

    !!! example

        ```python
        stats = mc.summarize_campaign("runs/mc1", percentiles=(1.0, 50.0, 99.0))
        stats["outputs/omega_BN_B"].percentiles[99.0][-1]       # final time, per axis [rad/s]
        ```
    """
    where = "summarize_campaign"
    pct = tuple(float(p) for p in np.atleast_1d(percentiles))
    if any(not 0.0 <= p <= 100.0 for p in pct):
        raise ValueError(f"{where}: `percentiles` must lie in [0, 100]; got {pct}.")
    if not isinstance(max_bytes, int | np.integer) or max_bytes < 8:
        raise ValueError(f"{where}: `max_bytes` must be an integer >= 8; got {max_bytes!r}.")
    _, root, ranges, ok = _campaign(directory, where)
    n_ok, n_failed = int(ok.sum()), int(ok.size - ok.sum())
    wanted = {}
    for name in sorted(root.array_keys()):
        path = root[name].attrs["path"]
        if path.startswith("outputs" + _SEP):
            wanted[path[len("outputs") + 1 :]] = name
        elif path == "outputs":
            wanted["value"] = name
        elif include_params and path.startswith("params" + _SEP):
            wanted[path] = name
    if names is not None:
        unknown = [k for k in names if k not in wanted]
        if unknown:
            raise ValueError(
                f"{where}: `names` must be keys of the campaign's outputs {sorted(wanted)}; got "
                f"{unknown}."
            )
        wanted = {k: wanted[k] for k in names}
    out = {}
    for key, name in wanted.items():
        arr = root[name]
        shape = arr.shape[1:]
        if len(shape) == 0 or max(n_ok, 1) * 8 * int(np.prod(shape)) <= max_bytes:
            stats = _stats(_rows(arr, ranges, ok), pct, n_ok)
        else:
            per_col = max(n_ok, 1) * 8 * int(np.prod(shape[1:]))
            step, t_chunk = max(1, max_bytes // per_col), arr.chunks[1]
            if step >= t_chunk:  # whole Zarr chunks along time: each decompressed once
                step = step // t_chunk * t_chunk
            blocks = [
                _stats(_rows(arr, ranges, ok, slice(t0, t0 + step)), pct, n_ok)
                for t0 in range(0, shape[0], step)
            ]
            cat = lambda xs: np.concatenate(xs, axis=0)
            stats = {s: cat([b[s] for b in blocks]) for s in ("mean", "std", "min", "max")}
            stats["percentiles"] = {p: cat([b["percentiles"][p] for b in blocks]) for p in pct}
        out[key] = Summary(**stats, n_ok=n_ok, n_failed=n_failed)
    return out


def campaign_failures(directory: str | os.PathLike) -> list[tuple[int, str, float | None]]:
    """The failure table of a campaign on disk: `[(member, cause, t_final)]` of the failed
    members of its committed chunks (as `BatchResult.failure_table`), reading only the rows of
    the failed members.

    !!! example

        ```python
        for member, cause, t in mc.campaign_failures("runs/mc1")[:10]:
            print(member, cause, t)
        ```
    """
    where = "campaign_failures"
    manifest, root, ranges, ok = _campaign(directory, where)
    committed = np.concatenate([np.arange(lo, hi) for lo, hi in ranges] or [np.zeros(0, int)])
    bad = committed[~ok]
    if bad.size == 0:
        return []
    d, _ = _manifest_of(directory, where)
    errors = sorted(
        (int(m), c) for r in _committed(d, manifest, where).values() for m, c in r["errors"].items()
    )
    flat = {root[name].attrs["path"]: root[name].oindex[bad] for name in root.array_keys()}
    return _batch_from_flat(flat, manifest["n"], False, errors).failure_table()


def failure_counts(directory: str | os.PathLike) -> dict[str, int]:
    """`{cause: number of members}` of a campaign on disk, most frequent first."""
    counts: dict[str, int] = {}
    for _, cause, _ in campaign_failures(directory):
        counts[cause] = counts.get(cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def plot_campaign(
    directory: str | os.PathLike,
    name: str,
    *,
    percentiles: Sequence[float] = (5.0, 25.0),
    labels: Sequence[str] | None = None,
    ylabel: str = "",
    title: str = "",
    max_bytes: int = _STORE_BYTES,
) -> Any:
    """Dispersion plot of one output of a campaign on disk: the median and the bands between the
    `p`-th and `(100 - p)`-th percentiles over the `ok` members, per sample time, from
    `summarize_campaign` (memory bounded by `max_bytes`, whatever the number of members).

    **Arguments:**

    - `directory`: the campaign folder.
    - `name`: the output's key as `summarize_campaign` returns it (e.g. `"outputs/omega_BN_B"`),
      shape `(time,)` or `(time, k)` per member.
    - `percentiles`: lower percentiles of the bands, each in `[0, 50)`.
    - `labels`, `ylabel`, `title`: component names and axis texts. Default labels: the
      store's component coordinate (`x`, `y`, `z` along `xyz`; `s1`.. along `mrp`), else
      `"[i]"`; each axis shows the output's name and its unit from the store (`omega_BN_B x
      [rad/s]`).

    **Returns:** a matplotlib Figure with one axis per component; the time axis is the sample
    times `ts` of the first committed member [s] (the sample index without a `ts` output).
    """

    where = "plot_campaign"
    pct = tuple(float(p) for p in np.atleast_1d(percentiles))
    if any(not 0.0 <= p < 50.0 for p in pct):
        raise ValueError(f"{where}: `percentiles` must lie in [0, 50); got {pct}.")
    levels = sorted({*pct, 50.0, *(100.0 - p for p in pct)})
    stats = summarize_campaign(directory, levels, names=[name], max_bytes=max_bytes)[name]
    med = np.asarray(stats.percentiles[50.0])
    if med.ndim not in (1, 2):
        raise ValueError(
            f"{where}: `name` must be an output of shape (time,) or (time, k) per member; "
            f"{name!r} has shape {med.shape}."
        )
    components = med.shape[1:]
    med = med.reshape(med.shape[0], -1)
    k = med.shape[1]
    _, root, ranges, _ = _campaign(directory, where)
    unit, dims = "", ()
    for array in root.array_keys():  # the store's array of `name` (keys as summarize_campaign's)
        path = root[array].attrs["path"]
        key = "value" if path == "outputs" else path.removeprefix("outputs" + _SEP)
        if key == name:
            unit = str(root[array].attrs.get("units", "") or "")
            dims = tuple(getattr(root[array].metadata, "dimension_names", None) or ())
            break
    default = labels is None
    if default:
        known = [_schema.COMPONENTS.get(d) for d in dims[2:]]
        if len(components) == 1 and known and known[0] is not None and len(known[0]) == k:
            labels = list(known[0])
        else:
            labels = [f"[{i}]" for i in range(k)]
    labels = list(labels)
    if len(labels) != k:
        raise ValueError(f"{where}: `labels` needs {k} entries; got {len(labels)}.")
    if ylabel:
        quantity = ylabel
    else:  # the output's name with default labels; the given labels alone otherwise
        quantity = name.rsplit(_SEP, 1)[-1] if default else ""
    suffix = f" [{unit}]" if unit and unit != _schema.CODE_UNIT else ""
    t = np.arange(med.shape[0], dtype=float)
    xlabel = "sample"
    if ranges:
        lo = ranges[0][0]
        for ts_name in ("outputs.ts", "outputs.outputs.ts"):
            if ts_name in root.array_keys() and root[ts_name].shape[1:] == (med.shape[0],):
                t, xlabel = np.asarray(root[ts_name][lo], dtype=float), "t [s]"
                break
    plt = pyplot()
    fig, axes = plt.subplots(
        k, 1, figsize=(8, 2.2 + 2.0 * k), sharex=True, squeeze=False, constrained_layout=True
    )
    for i, ax in enumerate(axes[:, 0]):
        ax.plot(t, med[:, i], color="C0", lw=1.8, label="median")
        for j, p in enumerate(sorted(pct)):
            lo_ = np.asarray(stats.percentiles[p]).reshape(med.shape)[:, i]
            hi_ = np.asarray(stats.percentiles[100.0 - p]).reshape(med.shape)[:, i]
            ax.fill_between(t, lo_, hi_, color="C0", alpha=0.15 + 0.15 * j,
                            label=f"{p:g}-{100.0 - p:g} %")  # fmt: skip
        ax.set_ylabel(f"{quantity} {labels[i] if k > 1 else ''}".strip() + suffix)
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(loc="best", fontsize="small")
    axes[0, 0].set_title(title or f"{name}: {stats.n_ok} members ok, {stats.n_failed} failed")
    axes[-1, 0].set_xlabel(xlabel)
    return fig
