"""A harmonic oscillator with optional additive noise, the small model of the `simulate` argument
tests (progress, diffrax vocabulary)."""

import equinox as eqx
import jax.numpy as jnp

import jaxsim as js


class Osc(js.AbstractDynamicObject):
    """x'' = -x, with an additive noise on v when `sigma` > 0."""

    sigma: float = 0.0
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": y["v"], "v": -y["x"]}

    @property
    def noise_dim(self):
        return 1

    def diffusion(self, t, y, args):
        return {"x": jnp.zeros((1,)), "v": jnp.full((1,), self.sigma)}
