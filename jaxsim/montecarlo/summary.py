"""Statistics of a batch's outputs over its `ok` members: `Summary` and `summarize`."""

import equinox as eqx
import numpy as np

from .batch import BatchResult, _flatten


__all__ = ["Summary", "summarize"]


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
    result: BatchResult, percentiles=(5.0, 50.0, 95.0), *, include_params: bool = False
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
