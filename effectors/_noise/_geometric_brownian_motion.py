r"""Inhomogeneous geometric Brownian motion noise states (Basilisk `igbmNoiseStateEffector`)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, check_name, check_nonnegative, check_positive

from .._spacecraft._contract import TwoMethodStateEffector
from .._spacecraft._types import BackSub, HubContext
from ._mean_reverting_noise import broadcast_params


class GeometricBrownianMotion(TwoMethodStateEffector):
    r"""$n$ independent inhomogeneous geometric Brownian motion (IGBM) correction states $\delta_i$,
    with multiplicative factor $X_i = 1 + \delta_i$ (Ito):

    $$d\delta = \frac{\mu - (1+\delta)}{\tau}\,dt + s\,(1+\delta)\,dW,\qquad
    s^2 = \frac{2}{\tau}\,\frac{\sigma_{st}^2}{\mu^2 + \sigma_{st}^2},$$

    so that $X$ has stationary mean $\mu$ and standard deviation $\sigma_{st}$, and $X$ stays positive.
    The mean obeys $E[X_t] = \mu + (X_0 - \mu)e^{-t/\tau}$ exactly.

    **Arguments:**

    - `mu`: stationary mean $\mu$ of $X$ [-], > 0 (default 1); scalar or `(n,)`.
    - `tau`: time constant $\tau$ [s], > 0 (default 1 s).
    - `sigma_st`: stationary standard deviation $\sigma_{st}$ of $X$ [-], >= 0 (default 0).
    - `delta0`: initial $\delta$ [-] (default $\mu - 1$).
    - `name`: unique effector name (the state key).

    State: array `(n,)`; `noise_dim = n`, diagonal multiplicative noise (commutative): use an Ito
    solver (`EulerMaruyama`, `Milstein`); `Heun` would give the Stratonovich solution (a different
    process); `SRA1`/`ShARK` are rejected (not additive).

    **Reference:** Basilisk `igbmNoiseStateEffector` module documentation; Kloeden & Platen,
    *Numerical Solution of Stochastic Differential Equations*, Springer 1992, §4.4 (linear SDEs).
    """

    mu: Float[Array, " n"]
    tau: Float[Array, " n"]
    sigma_st: Float[Array, " n"]
    delta0: Float[Array, " n"]
    n: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mu: Float[ArrayLike, "*n"] = 1.0,
        tau: Float[ArrayLike, "*n"] = 1.0,
        sigma_st: Float[ArrayLike, "*n"] = 0.0,
        delta0: Float[ArrayLike, "*n"] | None = None,
        *,
        name: str = "geometric_brownian_motion",
    ):
        cls = "GeometricBrownianMotion"
        params = {"mu": (mu, "-"), "tau": (tau, "s"), "sigma_st": (sigma_st, "-")}
        if delta0 is not None:
            params["delta0"] = (delta0, "-")
        self.n, p = broadcast_params(cls, params)
        self.mu = check_positive(cls, "mu", p["mu"], "-")
        self.tau = check_positive(cls, "tau", p["tau"], "s")
        self.sigma_st = check_nonnegative(cls, "sigma_st", p["sigma_st"], "-")
        self.delta0 = p["delta0"] if delta0 is not None else self.mu - 1.0
        self.name = check_name(cls, "name", name)

    @property
    def s(self):
        r"""Volatility $s$ [1/sqrt(s)]."""
        ss = self.sigma_st**2
        return jnp.sqrt(2.0 / self.tau * ss / (self.mu**2 + ss))

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def init_state(self, delta=None) -> Float[Array, " n"]:
        if delta is None:
            return self.delta0
        return as_array("GeometricBrownianMotion.init_state", "delta", delta, "-", (self.n,))

    def back_substitution(self, x, ctx: HubContext) -> BackSub:
        return BackSub.zeros()

    def derivative(self, x, ctx: HubContext, rDDot_BN_B, omegaDot_BN_B):
        return (self.mu - (1.0 + x)) / self.tau

    @property
    def noise_dim(self) -> int:
        return self.n

    def diffusion(self, x, ctx: HubContext):
        return jnp.diag(self.s * (1.0 + x))

    def units(self) -> dict:
        """The relative deviation is dimensionless: state `"-"`, outputs `delta`, `factor` [-]."""
        return {"ys": "-", "outputs": {"delta": "-", "factor": "-"}, "args": {}}

    def outputs(self, x, ctx: HubContext) -> dict:
        return {"delta": x, "factor": 1.0 + x}
