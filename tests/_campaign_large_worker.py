"""Worker of `tests/montecarlo/test_campaign_large.py`: `python -m tests._campaign_large_worker write DIR N` writes
a campaign of `N` members of a cheap member function; `... summarize DIR MAX_BYTES` summarizes it
from the store and prints one JSON line: peak RSS before and after [bytes] and the statistics."""

import json
import resource
import sys

import jax.numpy as jnp
import jax.random as jr
import numpy as np

from jaxsim import montecarlo as mc


CHUNK_SIZE = 20_000
DISP = mc.Dispersions(
    {"w": mc.Normal(np.array([1e-3, -2e-3, 1.5e-3]), 5e-4, unit="rad/s"), "k": mc.percent(1.0, 5.0)}
)
TS = jnp.linspace(0.0, 600.0, 61)  # [s]


def member(p):
    """A cheap stand-in for a simulation: a 61-sample, 3-component decaying rate."""
    return {"ts": TS, "w": p["w"] * jnp.exp(-p["k"] * TS / 600.0)[:, None]}


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def main(what: str, directory: str, arg: int) -> None:
    if what == "write":
        mc.run_campaign(member, DISP, directory, key=jr.key(0), n=arg, chunk_size=CHUNK_SIZE,
                        load=False)  # fmt: skip
        return
    mc.open_campaign(directory)  # imports xarray and zarr before the baseline
    before = peak_rss()
    stats = mc.summarize_campaign(directory, (1.0, 50.0, 99.0), max_bytes=arg)["w"]
    out = {
        "before": before,
        "after": peak_rss(),
        "n_ok": stats.n_ok,
        "std": stats.std.tolist(),
        "p99": stats.percentiles[99.0].tolist(),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
