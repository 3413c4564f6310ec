"""The checks every effector gets from one registry entry (`tests/effectors/test_generic.py`).

An `Entry` builds a small spacecraft holding the effector (and what it needs: a tank's thrusters,
a noise state, gravity) with its initial state; the functions below are the generic checks, each
an oracle that needs no knowledge of the effector's equations:

- `check_jit`: the drift under `jax.jit` equals the eager drift;
- `check_vmap`: the drift under `jax.vmap` over perturbed states equals a Python loop;
- `check_gradient`: d(weighted drift)/d(parameter) is finite and equals central differences
  (along the parameter, or element by element for a tuple of parameters);
- `check_conservation`: energy and angular momentum stay constant (conservative entries);
- `check_mass_rates`: the effector's body-frame mass-property rates equal the time derivative of
  its mass properties along its state derivative (`jax.jvp`);
- `check_state_refused`: `simulate` refuses an initial state with a misspelt key, naming it;
- `check_commands_declared` / `check_commands_refused`: the commands it reads are declared
  (`init_commands()`, with units), and `simulate` refuses a misspelt key, a wrong shape or a
  value tagged with another unit (`jaxsim.Quantity`) by name;
- `check_units`: every state leaf, output entry and command has a unit (`units()`), and no unit
  names an entry the effector lacks;
- `check_basilisk`: where Basilisk has the model, the first samples of its stored reference run
  (`tests/data`, Basilisk 2.12.1's RK4 at the same step) are reproduced to round-off.

`check_all(entry)` runs them all (the writing-an-effector guide calls it on its `Slider`).
"""

import dataclasses
import re
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


# jit, vmap and the eager drift evaluate the same expressions; XLA may fuse and reorder them.
JIT_RTOL = 1e-12
# Central differences with relative step 1e-4 on a smooth drift: truncation ~1e-8, round-off
# ~1e-12 relative to the largest term.
FD_REL_STEP = 1e-4
GRAD_RTOL = 1e-6
# RK4 at h = 5 ms over 2 s, frequencies <= 4.5 rad/s (the registry's springs): energy error
# ~(omega h)^4 ~ 3e-7 relative at most.
CONSERVED_RTOL = 1e-6
CONSERVATION_T, CONSERVATION_DT = 2.0, 0.005
# The rates from the effector's formulas vs autodiff of its mass properties: round-off.
MASS_RATE_ATOL = 1e-12
# Basilisk runs the same RK4 in float64: positions/velocities relative to the run's largest value,
# attitude and rates absolute, at round-off over the first REFERENCE_SAMPLES sample intervals.
REFERENCE_RTOL = 1e-9
REFERENCE_ATOL = 1e-9
REFERENCE_SAMPLES = 20


@dataclasses.dataclass(frozen=True)
class Entry:
    """One effector configuration under the generic checks.

    - `name`: the test id; `effector`: the effector's name inside the spacecraft;
    - `build`: `() -> (spacecraft, y0)`;
    - `param`: `spacecraft -> array leaf` (an `eqx.tree_at` selector) that the gradient check
      scales by a traced factor, or `spacecraft -> tuple of leaves`: then each element of each
      leaf is checked on its own (every element must change the drift);
    - `conservative`: no external loads, dissipation or commands: energy and momentum conserved;
    - `mass_rates`: the effector's `first_moment_prime`, `inertia_prime_B` and `mass_dot` are the
      rates of its mass properties along its state (False where a variable-mass model reports
      Basilisk's approximation instead, e.g. a fuel tank);
    - `fd_step`: the relative step of the central differences;
    - `reference`: `(name, spec -> Spacecraft)`: a Basilisk reference run of `tests/data` and the
      spacecraft built from its spec.
    """

    name: str
    effector: str
    build: Callable
    param: Callable
    conservative: bool = False
    mass_rates: bool = True
    fd_step: float = FD_REL_STEP
    reference: tuple | None = None

    def __repr__(self):
        return self.name


def _drift_scalar(sc, y, args):
    """A fixed weighted sum of every derivative leaf (weights 1, 2, 3, ...: all components count)
    but the hub position's (its velocity, which no parameter changes, and whose size on an orbit
    would drown the others in round-off)."""
    dy = sc.drift(0.3, y, args)
    dy["hub"] = {k: v for k, v in dy["hub"].items() if k != "r_BN_N"}
    leaves = jax.tree_util.tree_leaves(dy)
    total, k = 0.0, 1.0
    for leaf in leaves:
        flat = jnp.ravel(leaf)
        total = total + jnp.sum(flat * (k + jnp.arange(flat.size)))
        k += flat.size
    return total


def _perturbed(y, scale, seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), len(jax.tree_util.tree_leaves(y)))
    leaves, treedef = jax.tree_util.tree_flatten(y)
    out = [
        x + scale * (1.0 + jnp.abs(x)) * jax.random.uniform(k, jnp.shape(x), minval=-1, maxval=1)
        for x, k in zip(leaves, keys)
    ]
    return jax.tree_util.tree_unflatten(treedef, out)


def _close(a, b, rtol, what):
    for x, z in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        scale = max(float(jnp.max(jnp.abs(z))), 1e-300)
        np.testing.assert_allclose(x, z, rtol=0, atol=rtol * scale, err_msg=what)


def check_jit(entry: Entry):
    sc, y0 = entry.build()
    jitted = jax.jit(lambda model, t, y: model.drift(t, y, None))(sc, 0.3, y0)
    _close(jitted, sc.drift(0.3, y0, None), JIT_RTOL, "jit vs eager")


def check_vmap(entry: Entry):
    sc, y0 = entry.build()
    ys = [_perturbed(y0, 1e-3, seed) for seed in range(3)]
    batched = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *ys)
    got = jax.vmap(sc.drift, in_axes=(None, 0, None))(0.3, batched, None)
    want = [sc.drift(0.3, y, None) for y in ys]
    for i, w in enumerate(want):
        _close(jax.tree_util.tree_map(lambda g, i=i: g[i], got), w, JIT_RTOL, f"vmap member {i}")


def check_gradient(entry: Entry):
    sc, y0 = entry.build()
    p0 = entry.param(sc)
    if isinstance(p0, tuple):
        return _check_gradient_elements(entry, sc, y0, p0)

    def f(s):
        return _drift_scalar(eqx.tree_at(entry.param, sc, entry.param(sc) * s), y0, None)

    g = float(jax.grad(f)(1.0))
    h = entry.fd_step
    fd = (float(f(1.0 + h)) - float(f(1.0 - h))) / (2 * h)
    assert np.isfinite(g), g
    assert abs(fd) > 1e-12, f"{entry.name}: the parameter does not change the drift ({fd})"
    assert abs(g - fd) <= GRAD_RTOL * abs(fd), (g, fd)


def _check_gradient_elements(entry: Entry, sc, y0, p0):
    """`jax.grad` w.r.t. every element of the tuple of 1-D leaves `p0` vs central differences
    with the relative step `entry.fd_step` of that element's value (`assert_grad_matches_fd`:
    every element must change the drift)."""
    from tests.effectors._support import assert_grad_matches_fd

    def f(params):
        return _drift_scalar(eqx.tree_at(entry.param, sc, params), y0, None)

    assert_grad_matches_fd(f, p0, entry.fd_step, GRAD_RTOL)


def check_conservation(entry: Entry):
    sc, y0 = entry.build()
    sol = js.simulate(sc, y0, CONSERVATION_T, dt=CONSERVATION_DT, sample_dt=CONSERVATION_T / 4)
    E = np.asarray(sol.outputs["totRotEnergy"])
    H = np.asarray(sol.outputs["totRotAngMomPntC_N"])
    assert np.abs(E - E[0]).max() <= CONSERVED_RTOL * np.abs(E[0]).max(), E
    dH = np.linalg.norm(H - H[0], axis=-1).max()
    assert dH <= CONSERVED_RTOL * np.linalg.norm(H[0]), H


def check_mass_rates(entry: Entry):
    sc, y0 = entry.build()
    effector = next(e for e in sc.state_effectors if e.name == entry.effector)
    x, dx = y0[effector.name], sc.drift(0.3, y0, None)[effector.name]
    mctx = sc._mass_context(jnp.asarray(0.3), None, y0)
    mp, rate = jax.jvp(lambda x: effector.mass_props(x, mctx), (x,), (dx,))
    np.testing.assert_allclose(mp.first_moment_prime, rate.first_moment, atol=MASS_RATE_ATOL)
    np.testing.assert_allclose(mp.inertia_prime_B, rate.inertia_B, atol=MASS_RATE_ATOL)
    np.testing.assert_allclose(mp.mass_dot, rate.mass, atol=MASS_RATE_ATOL)


def check_state_refused(entry: Entry):
    sc, y0 = entry.build()
    if entry.effector not in y0:
        return  # a dynamic effector has no state
    x = y0[entry.effector]
    bad = dict(y0)
    if isinstance(x, dict):
        key = next(iter(x))
        bad[entry.effector] = {**{k: v for k, v in x.items() if k != key}, key + "_typo": x[key]}
        match = key + "_typo"
    else:
        bad[entry.effector] = jnp.zeros(jnp.shape(x) + (2,))
        match = "y0"
    with pytest.raises(ValueError, match=match):
        js.simulate(sc, bad, 0.1, dt=0.05)


def check_commands_declared(entry: Entry):
    sc, _ = entry.build()
    effector = next(
        e for e in fx._spacecraft._assembly._all_effectors(sc) if e.name == entry.effector
    )
    commands = effector.init_commands()
    assert commands is not None, f"{type(effector).__name__} does not declare its commands"
    declared = sc.init_commands().get(effector.name, {})
    assert {k: jnp.shape(v) for k, v in declared.items()} == {
        k: jnp.shape(v) for k, v in commands.items()
    }
    units = effector.units()["args"]
    assert set(units) == set(commands), (units, commands)


def check_commands_refused(entry: Entry):
    sc, y0 = entry.build()
    effector = next(
        e for e in fx._spacecraft._assembly._all_effectors(sc) if e.name == entry.effector
    )
    commands = effector.init_commands()
    with pytest.raises(ValueError, match="motor_torqe|unknown"):
        js.simulate(sc, y0, 0.1, dt=0.05, args={entry.effector: {"motor_torqe": 0.0}})
    for key, zeros in commands.items():
        wrong = jnp.zeros((5, 7))  # broadcasts to no command shape of the library
        with pytest.raises(ValueError, match=key):
            js.simulate(sc, y0, 0.1, dt=0.05, args={entry.effector: {key: wrong}})
        assert jnp.shape(zeros) == tuple(sc.command_spec()[entry.effector][key])
        # A value tagged with a unit that no command is declared in is refused, naming both.
        unit = effector.units()["args"][key]
        tagged = {entry.effector: {key: js.Quantity(zeros, "furlong")}}
        match = rf"\['{key}'\]` is given in 'furlong'.*'{re.escape(unit)}'"
        with pytest.raises(ValueError, match=match):
            js.simulate(sc, y0, 0.1, dt=0.05, args=tagged)


def check_units(entry: Entry):
    """The effector's `units()` give a unit to each of its state leaves and commands and name no
    other; the spacecraft's composed `units()` pass `simulate`'s check against a run (traced
    with `jax.eval_shape`), which covers every state leaf and recorded output."""
    sc, y0 = entry.build()
    effector = next(
        e for e in fx._spacecraft._assembly._all_effectors(sc) if e.name == entry.effector
    )
    units = effector.units()
    assert set(units) == {"ys", "outputs", "args"}, units
    assert set(units["args"]) == set(effector.init_commands() or {}), units["args"]
    x = y0.get(entry.effector)
    if isinstance(x, dict):
        assert set(units["ys"]) == set(x), (units["ys"], x)
    elif x is not None:  # an array state: one unit for it
        assert isinstance(units["ys"], str) and units["ys"], units["ys"]
    else:
        assert not units["ys"], units["ys"]
    sol = jax.eval_shape(lambda: js.simulate(sc, y0, 0.05, dt=0.05))
    for field in ("ys", "outputs"):
        for path, _ in jax.tree_util.tree_flatten_with_path(getattr(sol, field))[0]:
            dotted = ".".join([field, *(str(k.key) for k in path)])
            assert sol.info.unit(dotted), f"no unit for {dotted}"


def check_basilisk(entry: Entry):
    from tests.helpers import initial_state, load_reference

    name, build = entry.reference
    spec, ref = load_reference(name)
    sc = build(spec)
    t = spec["time"]
    n = REFERENCE_SAMPLES
    sol = js.simulate(sc, initial_state(sc, spec), n * t["sample_interval_s"], dt=t["step_s"],
                      sample_dt=t["sample_interval_s"])  # fmt: skip
    out = sol.outputs
    for key in ("r_BN_N", "v_BN_N"):
        want = np.asarray(ref[key][: n + 1])
        err = np.abs(np.asarray(out[key]) - want).max() / np.abs(want).max()
        assert err <= REFERENCE_RTOL, f"{name} {key}: {err:.3e}"
    for key in ("sigma_BN", "omega_BN_B"):
        want = ref[key][: n + 1]
        np.testing.assert_allclose(out[key], want, rtol=0, atol=REFERENCE_ATOL, err_msg=key)
    np.testing.assert_array_equal(sol.counts["mrp_switches"], ref["MRPSwitchCount"][: n + 1])


def check_all(entry: Entry):
    """Every generic check that applies to `entry`."""
    for check in (check_jit, check_vmap, check_gradient, check_state_refused, check_units):
        check(entry)
    check_commands_declared(entry)
    check_commands_refused(entry)
    sc, y0 = entry.build()
    if entry.effector in y0 and entry.mass_rates:
        check_mass_rates(entry)
    if entry.conservative:
        check_conservation(entry)
    if entry.reference is not None:
        check_basilisk(entry)
