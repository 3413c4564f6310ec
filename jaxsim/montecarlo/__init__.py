"""Monte Carlo campaigns: dispersions drawn from one key, chunked `vmap` batches, failure
reporting, sharding over devices and resumable campaigns on disk.

1. **Dispersions** (`Normal`, `Uniform`, `Relative`/`percent`, `PrincipalInertia`, `AttitudeMRP`,
   `UnitVector`, gathered in a `Dispersions` pytree) are sampled per member from one key: member
   `i`'s draw does not depend on the number of members, the chunk size or the device count.
2. **A member function** `fn(params) -> pytree` (typically `js.simulate(..., throw=False)` on a
   model with the parameters written in) is evaluated by `run_batch` with `jax.vmap` over chunks of
   members, optionally sharded over devices.
3. **Results**: a `BatchResult` (member indices, `ok` mask, diffrax result codes, parameters,
   outputs); failed members are reported, not raised (members raising at run time are isolated:
   `RAISED`, `BatchResult.errors`). `summarize` gives statistics over the `ok` members.
4. **Campaigns on disk**: `run_campaign` runs chunk by chunk into a Zarr store (optional extra
   `jaxsim-spacecraft[campaign]`), resumably, refusing a resume that would mix results (a fingerprint of the
   member function's traced program), verifying chunk checksums, and under `jax.distributed`
   across processes; `load_campaign` / `open_campaign` (lazy xarray) read it;
   `summarize_campaign`, `campaign_failures`, `failure_counts`, `plot_campaign` work from the
   store chunk by chunk.

```python
import jax
from jaxsim import montecarlo as mc

disp = mc.Dispersions({"mass": mc.percent(750.0, 5.0), "omega_BN_B": mc.Normal(w0, 5e-4)})
res = mc.run_batch(member, disp, key=jax.random.key(0), n=1000, chunk_size=250)
mc.summarize(res)["outputs/omega_BN_B"].std
```

The Monte Carlo guide (`docs/monte_carlo.md`) covers a full example, sharding, multi-host
campaigns, assumptions and limitations.

Modules, in the direction of their imports: `distributions` (the distribution types),
`dispersions` (`Dispersions`), `_records` (the member records `BatchResult`, `RAISED`; `Summary`,
`summarize`), `_store` (the campaign folder: `load_campaign`, `open_campaign`,
`CampaignWarning`), `_fingerprint` (what a campaign member computes), `batch` (`run_batch`,
`member_range`), `campaign` (`run_campaign`), `summary` (`summarize_campaign`,
`campaign_failures`, `failure_counts`, `plot_campaign`); every public name is re-exported here,
and `batch`, `campaign` and `summary` re-export the names they documented before.
"""

from ._records import (
    RAISED as RAISED,
    BatchResult as BatchResult,
    Summary as Summary,
    summarize as summarize,
)
from ._store import (
    CampaignWarning as CampaignWarning,
    load_campaign as load_campaign,
    open_campaign as open_campaign,
)
from .batch import member_range as member_range, run_batch as run_batch
from .campaign import run_campaign as run_campaign
from .dispersions import Dispersions as Dispersions
from .distributions import (
    AbstractDistribution as AbstractDistribution,
    AttitudeMRP as AttitudeMRP,
    Normal as Normal,
    PrincipalInertia as PrincipalInertia,
    Relative as Relative,
    Uniform as Uniform,
    UnitVector as UnitVector,
    percent as percent,
)
from .summary import (
    campaign_failures as campaign_failures,
    failure_counts as failure_counts,
    plot_campaign as plot_campaign,
    summarize_campaign as summarize_campaign,
)


__all__ = [
    "AbstractDistribution",
    "AttitudeMRP",
    "BatchResult",
    "CampaignWarning",
    "Dispersions",
    "Normal",
    "PrincipalInertia",
    "RAISED",
    "Relative",
    "Summary",
    "Uniform",
    "UnitVector",
    "campaign_failures",
    "failure_counts",
    "load_campaign",
    "member_range",
    "open_campaign",
    "percent",
    "plot_campaign",
    "run_batch",
    "run_campaign",
    "summarize",
    "summarize_campaign",
]
