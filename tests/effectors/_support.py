"""Test helpers of the 1-DOF effectors (hinged panels, spinning bodies, spring-mass-dampers).

`WithDissipatedWork`: a spacecraft whose state also carries the energy dissipated by its dampers.
`W(t) = -int_0^t sum(damper_power) dt` is integrated by the same RK4 steps as the spacecraft, so the
energy balance `E(t) + W(t) = E(0)` holds to the integrator's own error (the same size as the energy
drift of an undamped run), not to the error of a quadrature of sampled power.

`tracked_run`: one compiled scenario (an effector on a hub, point-mass gravity whose `mu` is a
traced leaf, the dissipated work) that each file runs with many parameter sets; `assert_conserved`,
`assert_damped_energy_balance`: its invariants; `assert_basilisk_run`: a run against a stored
Basilisk reference.
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


MU_EARTH = 3.986004415e14  # [m^3/s^2]
R_CN_N0 = [-4020338.690396649, 7490566.741852513, 5248299.211589362]  # [m] Basilisk test orbit
V_CN_N0 = [-5199.77710904224, -3436.681645356935, 1041.576797498721]  # [m/s]


def tracked_run(effector, *, dt, t_end, sample_dt, mu=MU_EARTH, hub_mass=750.0,
                hub_inertia=((900.0, 0, 0), (0, 800.0, 0), (0, 0, 600.0)), r_BcB_B=(0.0, 0.0, 1.0),
                omega0=(0.1, -0.1, 0.1), v0=V_CN_N0):  # fmt: skip
    """`simulate` of `effector` on a hub in point-mass gravity (`mu` a traced leaf: one compiled
    program for every `mu`, hub and effector parameter set of the same shapes) from the Basilisk
    test orbit, with the dissipated work `W` of its dampers as a state (`WithDissipatedWork`)."""
    gravity = fx.PointMassGravity(MU_EARTH, name="earth")
    gravity = eqx.tree_at(lambda g: g.mu, gravity, jnp.asarray(float(mu), dtype=float))
    hub = fx.Hub(hub_mass, hub_inertia, list(r_BcB_B))
    sc = fx.Spacecraft(hub, state_effectors=(effector,), gravity=(gravity,))
    model = WithDissipatedWork(sc, (effector.name,))
    y0 = model.init_state(sc.init_state(R_CN_N0, v0, [0.0, 0.0, 0.0], omega0))
    return js.simulate(model, y0, t_end, dt=dt, sample_dt=sample_dt)


def assert_conserved(out, tol):
    """Rotational and orbital energy and angular momentum constant to `tol` (relative drift)."""
    for key in ["totRotEnergy", "totOrbEnergy"]:
        assert drift(out[key]) <= tol, (key, drift(out[key]))
    for key in ["totRotAngMomPntC_N", "totOrbAngMomPntN_N"]:
        assert vec_drift(out[key]) <= tol, (key, vec_drift(out[key]))


def scaled_err(a, b):
    """max_t ||a - b|| / max_t ||b|| (norm-scaled relative error over the run)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.linalg.norm(a - b, axis=-1).max() / np.linalg.norm(b, axis=-1).max()


def assert_basilisk_run(sol, ref, unit_states, tol_rv, tol_abs, rv_keys=("r_BN_N", "v_BN_N")):
    """A run against a Basilisk reference (same RK4 in float64): `rv_keys` norm-scaled relative
    (`scaled_err`, components cross zero), attitude, rates and the effector's states
    (`unit_states`: `{(effector, key): reference samples}`) absolute, MRP switches equal."""
    out = sol.outputs
    for key in rv_keys:
        err = scaled_err(out[key], ref[key])
        assert err <= tol_rv, f"{key}: norm-scaled error {err:.3e}"
    for key in ["sigma_BN", "omega_BN_B"]:
        err = np.abs(np.asarray(out[key]) - ref[key]).max()
        assert err <= tol_abs, f"{key}: {err:.3e}"
    for (name, key), want in unit_states.items():
        err = np.abs(np.asarray(out[name][key]) - want).max()
        assert err <= tol_abs, f"{name} {key}: {err:.3e}"
    np.testing.assert_array_equal(np.asarray(sol.counts["mrp_switches"]), ref["MRPSwitchCount"])


def assert_logged(out, ref, tol, keys=("massSC", "c_B", "ISC_PntB_B", "totRotEnergy",
                                       "totRotAngMomPntC_N")):  # fmt: skip
    """Logged mass properties and energies vs Basilisk's log, relative to the largest value."""
    for key in keys:
        a, b = np.asarray(out[key]), ref[key]
        err = np.abs(a - b).max() / np.abs(b).max()
        assert err <= tol, f"{key}: {err:.3e}"


def random_hub_state(rng):
    """A hub state of O(1) position/velocity, MRP and rates drawn from `rng`."""
    return dict(
        r_CN_N=rng.normal(0, 1, 3),
        v_CN_N=rng.normal(0, 1, 3),
        sigma_BN=rng.normal(0, 0.3, 3),
        omega_BN_B=rng.normal(0, 0.2, 3),
    )


def assert_split_equal(whole, parts, name, keys, tol):
    """One `n`-unit effector `name` vs `n` one-unit effectors `parts` (their names, in unit order):
    the hub leaves and the units' `keys` of two spacecraft derivatives (or states) agree to `tol`
    relative to max(|value|, 1)."""
    d1, d2 = whole
    for key in d1["hub"]:
        a, b = np.asarray(d1["hub"][key]), np.asarray(d2["hub"][key])
        assert np.abs(a - b).max() <= tol * max(np.abs(b).max(), 1.0), key
    for i, part in enumerate(parts):
        for key in keys:
            a, b = float(d1[name][key][i]), float(d2[part][key][0])
            assert abs(a - b) <= tol * max(abs(b), 1.0), (key, i)


@eqx.filter_jit
def jit_drift(sc, t, y):
    """`sc.drift(t, y, None)`, compiled once per spacecraft structure."""
    return sc.drift(t, y, None)


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
