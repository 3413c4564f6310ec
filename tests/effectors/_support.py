"""Test helper: a spacecraft whose state also carries the energy dissipated by its dampers.

`W(t) = -int_0^t sum(damper_power) dt` is integrated by the same RK4 steps as the spacecraft, so the
energy balance `E(t) + W(t) = E(0)` holds to the integrator's own error (the same size as the energy
drift of an undamped run), not to the error of a quadrature of sampled power.
"""

import equinox as eqx
import jax.numpy as jnp

import effectors as fx
import jaxsim as js


class WithDissipatedWork(js.AbstractDynamicObject):
    sc: fx.Spacecraft
    effector_names: tuple = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(self, sc, effector_names, name="tracked"):
        self.sc = sc
        self.effector_names = tuple(effector_names)
        self.name = name

    def init_state(self, y_sc=None):
        return {"sc": self.sc.init_state() if y_sc is None else y_sc, "W": jnp.zeros(())}

    def _dissipation(self, t, y_sc, args):
        ctx = self.sc.context(t, y_sc, args)
        total = jnp.zeros(())
        for e in self.sc.state_effectors:
            if e.name in self.effector_names:
                total = total - jnp.sum(e.outputs(y_sc[e.name], ctx)["damper_power"])
        return total

    def drift(self, t, y, args):
        return {"sc": self.sc.drift(t, y["sc"], args), "W": self._dissipation(t, y["sc"], args)}

    def step_map(self, t, y):
        y_sc, counts = self.sc.step_map(t, y["sc"])
        return {"sc": y_sc, "W": y["W"]}, counts

    def energy_momentum(self, t, y, args):
        return self.sc.energy_momentum(t, y["sc"], args)

    def outputs(self, t, y, args):
        out = dict(self.sc.outputs(t, y["sc"], args))
        out["W"] = y["W"]
        return out


def assert_grad_matches_fd(f, p0, rel_step, rel_tol, names=None):
    """`jax.grad(f)(p0)` (a tuple of 1-D arrays) vs central differences, component by component."""
    import jax

    grad = jax.grad(f)(p0)
    f = jax.jit(f)
    for j in range(len(p0)):
        for i in range(p0[j].shape[0]):
            h = rel_step * abs(float(p0[j][i]))
            plus = tuple(p.at[i].add(h) if jj == j else p for jj, p in enumerate(p0))
            minus = tuple(p.at[i].add(-h) if jj == j else p for jj, p in enumerate(p0))
            fd = (float(f(plus)) - float(f(minus))) / (2 * h)
            g = float(grad[j][i])
            label = (names[j] if names else j, i, g, fd)
            assert abs(fd) > 1e-8, label  # a non-trivial dependence
            assert abs(g - fd) <= rel_tol * abs(fd), label
