"""Test helper: a spacecraft whose state also carries the energy dissipated by its dampers.

`W(t) = -int_0^t sum(damper_power) dt` is integrated by the same RK4 steps as the spacecraft, so the
energy balance `E(t) + W(t) = E(0)` holds to the integrator's own error (the same size as the energy
drift of an undamped run), not to the error of a quadrature of sampled power.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np

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
    """`jax.grad(f)(p0)` (a tuple of 1-D arrays) vs central differences, component by component.

    Both are compiled with `jaxsim.jit` (one program each, with jaxsim's compile options): the
    spinning-body gradient took 21 s instead of 32 s for an unjitted `jax.grad` (one run each on
    the shared 2-core machine)."""
    import jax

    grad = js.jit(jax.grad(f))(p0)
    f = js.jit(f)
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


def drift(x):
    """Max |x - x0| / max |x0| (componentwise) over the samples."""
    x = np.asarray(x)
    return np.abs(x - x[0]).max() / np.abs(x[0]).max()


def vec_drift(x):
    """Max ||x - x0|| / ||x0|| over the samples of a vector quantity."""
    x = np.asarray(x)
    return np.linalg.norm(x - x[0], axis=-1).max() / np.linalg.norm(x[0])


# A hub so heavy that it does not move: the effector oscillates as on a fixed base.
HEAVY_HUB = dict(
    mu=0.0,
    hub_mass=1e12,
    hub_inertia=((1e12, 0, 0), (0, 1e12, 0), (0, 0, 1e12)),
    omega0=(0.0, 0.0, 0.0),
    v0=(0.0, 0.0, 0.0),
)


def assert_damped_energy_balance(out, min_fraction, tol_dissipation, tol_conserved):
    """E + W = E(0) with W the dissipated work (more than `min_fraction` of E(0)); dampers are
    internal, so orbital energy and rotational angular momentum stay conserved."""
    E = np.asarray(out["totRotEnergy"])
    W = np.asarray(out["W"])
    assert W[-1] > min_fraction * E[0]
    residual = np.abs(E + W - E[0]).max()
    assert residual <= tol_dissipation * W[-1], residual / W[-1]
    assert drift(out["totOrbEnergy"]) <= tol_conserved
    assert vec_drift(out["totRotAngMomPntC_N"]) <= tol_conserved
