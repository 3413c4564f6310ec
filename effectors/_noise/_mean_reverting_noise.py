r"""Mean-reverting (Ornstein-Uhlenbeck) noise states (Basilisk `meanRevertingNoiseStateEffector`)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, check_name, check_nonnegative, check_positive

from .._spacecraft._contract import TwoMethodStateEffector
from .._spacecraft._types import BackSub, HubContext


def broadcast_params(cls: str, params: dict) -> tuple[int, dict]:
    """Broadcast scalar-or-`(n,)` parameters `{arg: (value, unit)}` to a common shape `(n,)`."""
    arrs = {}
    for arg, (value, unit) in params.items():
        a = as_array(cls, arg, value, unit)
        if a.ndim > 1:
            raise ValueError(
                f"{cls}: `{arg}` must be a scalar or shape (n,) [{unit}]; got shape {a.shape}."
            )
        arrs[arg] = jnp.atleast_1d(a)
    try:
        (n,) = np.broadcast_shapes(*(a.shape for a in arrs.values()))
    except ValueError as err:
        shapes = {k: tuple(a.shape) for k, a in arrs.items()}
        raise ValueError(
            f"{cls}: parameters must share one length n; got shapes {shapes}."
        ) from err
    return n, {k: jnp.broadcast_to(a, (n,)) for k, a in arrs.items()}


class MeanRevertingNoise(TwoMethodStateEffector):
    r"""$n$ independent Ornstein-Uhlenbeck noise states (no mass, no load of their own):

    $$dx_i = -\frac{x_i}{\tau_i}\,dt + \sigma_i\sqrt{\frac{2}{\tau_i}}\,dW_i .$$

    Stationary: $E[x] = 0$, $\mathrm{Var}[x] = \sigma^2$, $\mathrm{Corr}(x_t, x_{t+\Delta}) = e^{-\Delta/\tau}$;
    from $x_0$: $E[x_t] = x_0e^{-t/\tau}$, $\mathrm{Var}[x_t] = \sigma^2(1 - e^{-2t/\tau})$. Other
    effectors read the state by this effector's `name` through `ctx.states` (e.g. `Drag`'s density
    correction $\rho(1+x)$, `StochasticTorque`).

    **Arguments:**

    - `tau`: correlation time constants $\tau$ [s], > 0; scalar or shape `(n,)` (default 1 s).
    - `sigma`: stationary standard deviations $\sigma$ [state units], >= 0; scalar or `(n,)` (default 0).
    - `x0`: initial states [state units] (default 0).
    - `unit`: the state units, what the effectors reading the state take it in (default `"-"`:
      a relative correction such as `Drag`'s; `"N m"` for a `StochasticTorque` of scale 1);
      recorded with the results.
    - `name`: unique effector name (the state key).

    State: array `(n,)`; `noise_dim = n` (source $i$ drives state $i$: diagonal, additive noise, so
    Ito = Stratonovich and `SRA1`/`ShARK` apply).

    **Assumptions and limitations:** Gaussian, stationary parameters; the states do not feed back on
    the hub unless another effector reads them.

    **Reference:** Uhlenbeck & Ornstein, "On the theory of the Brownian motion", Phys. Rev. 36, 823
    (1930), doi:10.1103/PhysRev.36.823; Basilisk `meanRevertingNoiseStateEffector`.
    """

    tau: Float[Array, " n"]
    sigma: Float[Array, " n"]
    x0: Float[Array, " n"]
    n: int = eqx.field(static=True)
    unit: str = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        tau: Float[ArrayLike, "*n"] = 1.0,
        sigma: Float[ArrayLike, "*n"] = 0.0,
        x0: Float[ArrayLike, "*n"] = 0.0,
        *,
        unit: str = "-",
        name: str = "mean_reverting_noise",
    ):
        cls = "MeanRevertingNoise"
        self.n, p = broadcast_params(
            cls, {"tau": (tau, "s"), "sigma": (sigma, "state units"), "x0": (x0, "state units")}
        )
        self.tau = check_positive(cls, "tau", p["tau"], "s")
        self.sigma = check_nonnegative(cls, "sigma", p["sigma"], "state units")
        self.x0 = p["x0"]
        if not isinstance(unit, str):
            raise TypeError(f"{cls}: `unit` must be a string (e.g. '-' or 'N m'); got {unit!r}.")
        self.unit = unit
        self.name = check_name(cls, "name", name)

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def init_state(self, x=None) -> Float[Array, " n"]:
        if x is None:
            return self.x0
        return as_array("MeanRevertingNoise.init_state", "x", x, "state units", (self.n,))

    def back_substitution(self, x, ctx: HubContext) -> BackSub:
        return BackSub.zeros()

    def derivative(self, x, ctx: HubContext, rDDot_BN_B, omegaDot_BN_B):
        return -x / self.tau

    @property
    def noise_dim(self) -> int:
        return self.n

    def diffusion(self, x, ctx: HubContext):
        return jnp.diag(self.sigma * jnp.sqrt(2.0 / self.tau))

    def units(self) -> dict:
        """The state and its output `x` in the state units (`unit`)."""
        return {"ys": self.unit, "outputs": {"x": self.unit}, "args": {}}

    def outputs(self, x, ctx: HubContext) -> dict:
        return {"x": x}
