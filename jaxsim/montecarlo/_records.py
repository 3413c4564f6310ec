"""Member records: what a batch or campaign holds of each member, as `BatchResult` (members,
`ok`, result codes, parameters and outputs as nested dicts of arrays), the normalization of member
outputs into that form, the per-member failure codes and messages, and the statistics of a
record's outputs over its `ok` members (`Summary`, `summarize`).

A leaf of the Monte Carlo package: `batch` and `campaign` (which write records) and `summary`
and the store (which read them) import it; it imports none of them.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._result._codes import RESULTS
from .._result._schema import RunInfo


_SEP = "/"  # separator of the flattened output paths ("outputs/omega_BN_B")


_RESULT_ITEM = type(dfx.RESULTS.successful)


# `BatchResult.result` of a member whose program raised at run time (e.g. `throw=True`): not a
# `jaxsim.RESULTS` code (those are >= 0); the cause is in `BatchResult.errors`.
RAISED = -1


# ----------------------------------------------------------------------------------------------
# Normalized outputs: nested dicts of arrays, RESULTS separated
# ----------------------------------------------------------------------------------------------


def _normalize(tree, results: list, infos: list | None = None, path: str = ""):
    """Nested dicts of arrays (str keys) from any output pytree; RESULTS items go to `results`.

    Equinox modules (e.g. `Solution`) become dicts of their fields, sequences dicts keyed "0", "1",
    ...; `None` and empty containers are dropped. The schema metadata of each `Solution`
    (`Solution.info`) goes to `infos` as `(path, info)`, `path` its `/`-joined keys.
    """
    if isinstance(tree, _RESULT_ITEM):
        results.append(tree)
        return None

    def sub(value, key):
        return _normalize(value, results, infos, f"{path}{_SEP}{key}" if path else str(key))

    if isinstance(tree, dict):
        items = {str(k): sub(v, k) for k, v in tree.items()}
    elif isinstance(tree, eqx.Module):
        info = getattr(tree, "info", None)
        if infos is not None and isinstance(info, RunInfo):
            infos.append((path, info))
        fields = [f for f in dataclasses.fields(tree) if not f.metadata.get("static", False)]
        items = {f.name: sub(getattr(tree, f.name), f.name) for f in fields}
    elif isinstance(tree, list | tuple):
        items = {str(i): sub(v, i) for i, v in enumerate(tree)}
    elif tree is None or isinstance(tree, str):
        return None
    else:
        return jnp.asarray(tree)
    items = {k: v for k, v in items.items() if v is not None}
    return items or None


def _flatten(tree, prefix: str = "") -> dict:
    """`{"a/b/c": leaf}` of nested dicts (`prefix` joined in front; a bare leaf is `{prefix: leaf}`,
    or `{"value": leaf}` without a prefix)."""
    if isinstance(tree, dict):
        flat = {}
        for key, value in tree.items():
            if _SEP in key:
                raise ValueError(
                    f"montecarlo: output and parameter keys must not contain {_SEP!r} (it joins "
                    f"the keys of nested outputs); got {key!r}."
                )
            flat.update(_flatten(value, f"{prefix}{_SEP}{key}" if prefix else key))
        return flat
    if tree is None:
        return {}
    return {prefix or "value": tree}


def _unflatten(flat: dict, prefix: str):
    if prefix in flat:
        return flat[prefix]
    out: dict = {}
    start = prefix + _SEP
    for name, value in flat.items():
        if not name.startswith(start):
            continue
        parts = name[len(start) :].split(_SEP)
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _batch_from_flat(flat: dict, n_total: int, complete: bool, errors=()) -> "BatchResult":
    """A `BatchResult` from flat named columns (`members`, `ok`, `result`, `params/...`,
    `outputs/...`), as campaign chunks and stores hold them."""
    return BatchResult(
        members=flat["members"],
        ok=flat["ok"],
        result=flat["result"],
        params=_unflatten(flat, "params"),
        outputs=_unflatten(flat, "outputs"),
        n_total=int(n_total),
        complete=bool(complete),
        errors=tuple(errors),
    )


def _finite(tree):
    ok = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok


def _result_code(items) -> jax.Array:
    """The first non-successful code among RESULTS items (0 when all succeeded)."""
    code = jnp.asarray(0, jnp.int32)
    for item in items:
        value = jnp.asarray(item._value, jnp.int32)
        code = jnp.where(code != 0, code, value)
    return code


def _message(code: int) -> str:
    # jaxsim.RESULTS extends diffrax's codes (same numbers for diffrax's causes).
    if code == RAISED:
        return "raised at run time"
    table = RESULTS._index_to_message
    if 0 <= code < len(table):
        return table[code]
    return f"result code {code}"


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


class BatchResult(eqx.Module):
    """What `run_batch`, `run_campaign` and `load_campaign` return.

    **Fields** (leading axis: members, in increasing member index):

    - `members`: member indices, shape `(m,)` int64.
    - `ok`: `True` where the member's solve succeeded and all its outputs are finite, shape `(m,)`.
    - `result`: the first non-successful `jaxsim.RESULTS` code among the member's outputs (0 when
      successful), shape `(m,)` int32; see `messages`.
    - `params`: the member's parameters (sampled ones for `Dispersions`), nested dicts of arrays.
    - `outputs`: the member function's outputs as nested dicts of arrays (a `Solution` becomes
      `{"ts", "ys", "outputs", "counts", "stats"}`, like `jaxsim.results.to_numpy`).
    - `n_total`: members in the whole batch or campaign; `complete`: all of them are present.
    - `errors`: `((member, cause), ...)` of the members whose program raised at run time (e.g.
      `simulate(..., throw=True)` failing): their `result` is `RAISED` (-1), their outputs NaN
      (integers 0, booleans False) and `ok` False; the other members of their chunk are kept.
    - `schema`: `((output path, RunInfo), ...)`: the schema metadata of the `Solution`s in the
      outputs (units, element dimensions, run settings), read by `jaxsim.results.to_xarray`;
      `units`: `(("params/<name>", unit), ...)`, the dispersions' units.

    Arrays are numpy arrays, except with `run_batch(..., to_host=False)` (device arrays).
    """

    members: np.ndarray
    ok: Any
    result: Any
    params: Any
    outputs: Any
    n_total: int = eqx.field(static=True)
    complete: bool = eqx.field(static=True)
    errors: tuple = eqx.field(static=True, default=())
    schema: tuple = eqx.field(static=True, default=())
    units: tuple = eqx.field(static=True, default=())

    def to_xarray(self, **kwargs):
        """`jaxsim.results.to_xarray(self, **kwargs)`: the batch as an `xarray.Dataset` of the
        schema of runs, batches and campaigns (dimension `member`)."""
        # Local: the public `jaxsim.results` module is built on this one (it imports the result
        # stage), so a module-level import would climb back up the flow.
        from ..results import to_xarray

        return to_xarray(self, **kwargs)

    @property
    def n_ok(self) -> int:
        return int(np.sum(np.asarray(self.ok)))

    @property
    def n_failed(self) -> int:
        return int(np.size(self.ok)) - self.n_ok

    @property
    def messages(self) -> tuple[str, ...]:
        """Per member: `""` when ok, else why it failed (the diffrax message, or which outputs
        are non-finite)."""
        ok, result = np.asarray(self.ok), np.asarray(self.result)
        flat = _flatten(self.outputs)
        raised = dict(self.errors)
        members = np.asarray(self.members)
        msgs = []
        for j in range(ok.shape[0]):
            if ok[j]:
                msgs.append("")
            elif result[j] == RAISED:
                msgs.append(f"raised: {raised.get(int(members[j]), 'at run time')}")
            elif result[j] != 0:
                msgs.append(_message(int(result[j])))
            else:
                bad = [
                    name
                    for name, leaf in flat.items()
                    if np.issubdtype(np.asarray(leaf).dtype, np.inexact)
                    and not np.all(np.isfinite(np.asarray(leaf[j])))
                ]
                msgs.append(f"non-finite outputs: {', '.join(bad)}")
        return tuple(msgs)

    def failures(self) -> list[tuple[int, str]]:
        """`[(member index, message)]` of the failed members."""
        ok = np.asarray(self.ok)
        msgs = self.messages
        return [(int(m), msgs[j]) for j, m in enumerate(np.asarray(self.members)) if not ok[j]]

    def failure_table(self) -> list[tuple[int, str, float | None]]:
        """`[(member index, cause, t_final)]` of the failed members: `t_final` is the time the
        member's run ended [s] (the output `t_final` of a `Solution`, e.g. where the solver gave
        up), `None` where unknown (no such output, or the member raised)."""
        flat = _flatten(self.outputs)
        t_final = np.asarray(flat["t_final"]) if "t_final" in flat else None
        ok, msgs = np.asarray(self.ok), self.messages
        rows = []
        for j, m in enumerate(np.asarray(self.members)):
            if ok[j]:
                continue
            t = None
            if t_final is not None and t_final.ndim == 1 and np.isfinite(t_final[j]):
                t = float(t_final[j])
            rows.append((int(m), msgs[j], t))
        return rows

    def summary(self, percentiles=(5.0, 50.0, 95.0)) -> "dict[str, Summary]":
        """`summarize(self, percentiles)`."""
        return summarize(self, percentiles)


def _empty(n: int) -> BatchResult:
    return BatchResult(
        members=np.zeros(0, dtype=np.int64),
        ok=np.zeros(0, bool),
        result=np.zeros(0, np.int32),
        params={},
        outputs={},
        n_total=n,
        complete=False,
    )


# ----------------------------------------------------------------------------------------------
# Statistics over the ok members
# ----------------------------------------------------------------------------------------------


class Summary(eqx.Module):
    """Statistics of one output over the `ok` members (elementwise over its trailing axes).

    **Fields:** `mean`, `std` (population, `ddof=0`), `min`, `max`, `percentiles` (dict
    `{p: array}`), `n_ok` (members used), `n_failed` (members excluded).
    """

    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    percentiles: dict
    n_ok: int = eqx.field(static=True)
    n_failed: int = eqx.field(static=True)


def summarize(
    result: BatchResult,
    percentiles: Sequence[float] = (5.0, 50.0, 95.0),
    *,
    include_params: bool = False,
) -> dict[str, Summary]:
    r"""Mean, standard deviation, extremes and percentiles of every output over the `ok` members.

    **Arguments:**

    - `result`: a `BatchResult`.
    - `percentiles`: percentiles in `[0, 100]` (numpy's linear interpolation).
    - `include_params`: also summarize the parameters, under `"params/<name>"`.

    **Returns:** `{path: Summary}` with `path` the output's `/`-joined keys (for a `Solution`:
    `"outputs/omega_BN_B"`, `"ys/hub/sigma_BN"`, `"stats/num_steps"`) and each statistic of shape
    `leaf.shape[1:]` (per sample time, per component). Outputs with no `ok` member get NaN
    statistics.

    !!! example

        ```python
        stats = mc.summarize(res, percentiles=(1.0, 99.0))
        stats["outputs/omega_BN_B"].std[-1]                 # final-time 1-sigma per axis [rad/s]
        ```
    """
    if not isinstance(result, BatchResult):
        raise ValueError(f"summarize: `result` must be a BatchResult; got {type(result).__name__}.")
    pct = tuple(float(p) for p in np.atleast_1d(percentiles))
    if any(not 0.0 <= p <= 100.0 for p in pct):
        raise ValueError(f"summarize: `percentiles` must lie in [0, 100]; got {pct}.")
    ok = np.asarray(result.ok, dtype=bool)
    n_ok = int(ok.sum())
    flat = _flatten(result.outputs)
    if include_params:
        flat.update(_flatten(result.params, "params"))
    out = {}
    for name, leaf in flat.items():
        x = np.asarray(leaf)[ok].astype(float)
        if n_ok == 0:
            nan = np.full(x.shape[1:], np.nan)
            stats = dict(mean=nan, std=nan, min=nan, max=nan, percentiles={p: nan for p in pct})
        else:
            stats = dict(
                mean=x.mean(axis=0),
                std=x.std(axis=0),
                min=x.min(axis=0),
                max=x.max(axis=0),
                percentiles=dict(zip(pct, np.percentile(x, pct, axis=0))),
            )
        out[name] = Summary(**stats, n_ok=n_ok, n_failed=int(ok.size) - n_ok)
    return out
