"""Monte Carlo campaigns (being split into modules; see `batch`)."""

from .batch import (
    AbstractDistribution as AbstractDistribution,
    AttitudeMRP as AttitudeMRP,
    BatchResult as BatchResult,
    Dispersions as Dispersions,
    Normal as Normal,
    PrincipalInertia as PrincipalInertia,
    Relative as Relative,
    Summary as Summary,
    Uniform as Uniform,
    UnitVector as UnitVector,
    load_campaign as load_campaign,
    member_range as member_range,
    percent as percent,
    run_batch as run_batch,
    run_campaign as run_campaign,
    summarize as summarize,
)
