r"""Monte Carlo campaigns: dispersions drawn from one key, chunked `vmap` batches, failure
reporting, sharding over devices and resumable campaigns on disk.

A campaign has three parts:

1. **Dispersions** describe how parameters vary: `Normal`, `Uniform`, `Relative` (or `percent`),
   `PrincipalInertia` (a dispersed inertia tensor that stays symmetric positive definite and obeys
   the triangle inequality), `AttitudeMRP` and `UnitVector` (small random rotations). A
   `Dispersions` object gathers them in a pytree (usually a dict); `Dispersions.sample(key, n)`
   draws every parameter with a leading member axis. Parameter `p` of member `i` is drawn from
   `fold_in(fold_in(key, hash(p)), i)`, so its draw does not depend on `n`, on the chunk size, on
   the device count or on the other parameters in the tree (bitwise).
2. **A member function** `fn(params) -> pytree` runs one member: it typically writes the parameters
   into a model with `eqx.tree_at` and calls `js.simulate(..., throw=False)`. Its output may be any
   pytree of arrays, or a `Solution`; `run_batch` evaluates it with `jax.vmap` over chunks of
   `chunk_size` members (one compiled program for all chunks, the last one padded), optionally
   sharded over several devices.
3. **Results**: a `BatchResult` with the member indices, an `ok` mask, the diffrax result code of
   every member, the sampled parameters and the outputs, all with a leading member axis. A member
   whose solve failed (`Solution.result` not successful) or whose outputs are not finite is marked
   `ok = False` with a message; the other members are kept. `summarize` gives mean, standard
   deviation, extremes and percentiles over the `ok` members. `run_campaign` writes every finished
   chunk to a directory (atomically) and resumes an interrupted campaign without recomputing
   finished chunks; `load_campaign` reads it back.

```python
import equinox as eqx, jax.random as jr
import effectors as fx, jaxsim as js
from jaxsim import montecarlo as mc

disp = mc.Dispersions({
    "omega_BN_B": mc.Normal(omega_nominal, 5e-4, unit="rad/s"),
    "mass": mc.percent(750.0, 5.0),                      # 5 % (1 sigma)
    "inertia": mc.PrincipalInertia(I_nominal, 0.03),     # 3 % per principal moment
})

def member(p):
    model = eqx.tree_at(lambda s: (s.hub.mass, s.hub.IHubPntBc_B), sc, (p["mass"], p["inertia"]))
    y0 = model.init_state(r_CN_N, v_CN_N, sigma_BN, p["omega_BN_B"])
    return js.simulate(model, y0, 600.0, dt=1.0, sample_dt=10.0, throw=False)

res = mc.run_batch(member, disp, key=jr.key(0), n=1000, chunk_size=250, progress=True)
res.ok, res.messages                                 # per-member status
res.outputs["outputs"]["omega_BN_B"]                 # (1000, 61, 3), numpy
mc.summarize(res)["outputs/totRotEnergy"].percentiles[95.0]    # per sample time [J]
# On disk, resumable (rerun the same line after an interruption):
res = mc.run_campaign(member, disp, "runs/mc1", key=jr.key(0), n=100_000, chunk_size=1000)
```

**Sharding.** `devices=jax.devices()` (or a `mesh=jax.sharding.Mesh(...)`) splits the member axis
of every chunk over the devices with a `NamedSharding(mesh, PartitionSpec(axis))`: the chunk's
inputs are placed with `jax.device_put` and the program is compiled with matching in- and out-
shardings, so each device integrates `chunk_size / len(devices)` members.

**Multi-host.** After `jax.distributed.initialize()`, every process runs the same script on its
own devices and its own members: pass `devices=jax.local_devices()` (a process cannot place data
on another host's devices) and, for a campaign on a shared file system,
`process_index=jax.process_index(), process_count=jax.process_count()`: process `p` computes the
chunks `k` with `k % process_count == p` and writes them to the common directory, so
`load_campaign` on any host assembles the whole campaign once all processes are done. For
`run_batch`, `members=member_range(n, jax.process_index(), jax.process_count())` gives each
process a contiguous block of members.

**Assumptions and limitations:** `fn` must not raise at run time for a failing member: use
`simulate(..., throw=False)` (with `throw=True` an `eqx.error_if` inside the vmapped program
aborts the whole chunk). Under `vmap` an adaptive solver's loop runs until the slowest member of a
chunk finishes, so a member that fails by exhausting `max_steps` slows its chunk down. A campaign's
manifest records `n`, `chunk_size` and a hash of the key and the dispersions (or parameters), not
`fn` itself: pass `config={"version": ...}` to have changes of the model refused on resume.
As with `jax.jit`, the compiled chunk program of `fn` is cached (per `fn` object, sharding and
chunk shape) and reused by later calls: constants that `fn` reads from enclosing scopes are baked
in at its first compilation, so define a new `fn` after changing them.

**Reference:** the dispersion types follow Basilisk's Monte Carlo module
(`utilities/MonteCarlo/Dispersions.py`: normal, uniform, inertia-tensor and MRP dispersions),
re-designed for `jax.random` and `vmap`.
"""

import abc
import dataclasses
import hashlib
import json
import math
import os
import socket
import sys
import time
import weakref
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Float

from .._compile import compiler_options
from .._kinematics import prv_to_dcm
from .._validation import as_array, check_inertia, check_nonnegative, check_unit_vectors, fail


__all__ = [
    "AbstractDistribution",
    "AttitudeMRP",
    "BatchResult",
    "Dispersions",
    "Normal",
    "PrincipalInertia",
    "Relative",
    "Summary",
    "Uniform",
    "UnitVector",
    "load_campaign",
    "member_range",
    "percent",
    "run_batch",
    "run_campaign",
    "summarize",
]

_FORMAT = "jaxsim.montecarlo/1"
_MANIFEST = "manifest.json"
_SEP = "/"  # separator of the flattened output paths ("outputs/omega_BN_B")
_RESULT_ITEM = type(dfx.RESULTS.successful)


# ----------------------------------------------------------------------------------------------
# Distributions
# ----------------------------------------------------------------------------------------------


class AbstractDistribution(eqx.Module):
    """A distribution of one parameter (an array of fixed shape), sampled from a `jax.random` key.

    Subclasses implement `sample(key)`, which draws one member's value, and `shape`.
    """

    @abc.abstractmethod
    def sample(self, key) -> Array:
        """One draw, of shape `self.shape`."""

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Shape of one draw."""


def _broadcast(cls, names, arrays, unit):
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError:
        got = ", ".join(f"`{n}` {np.shape(a)}" for n, a in zip(names, arrays))
        raise ValueError(
            f"{cls}: `{names[0]}` and `{names[1]}` must have broadcastable shapes [{unit}]; got {got}."
        ) from None
    return shape, [jnp.broadcast_to(a, shape) for a in arrays]


class Normal(AbstractDistribution):
    r"""Normal (Gaussian) dispersion $x \sim \mathcal N(\mu, \sigma^2)$, elementwise, optionally
    truncated to $[\text{low}, \text{high}]$ (Basilisk's `NormalDispersion` with bounds).

    **Arguments:**

    - `mean`: $\mu$, any shape.
    - `std`: $\sigma \ge 0$, broadcastable with `mean` (the draw has the broadcast shape).
    - `low`, `high`: optional truncation bounds (then `std > 0` and `low < high`), broadcastable.
    - `unit`: unit of the parameter, for error messages and documentation only.

    !!! example

        ```python
        mc.Normal(jnp.array([1e-3, -2e-3, 1.5e-3]), 5e-4, unit="rad/s")
        mc.Normal(750.0, 20.0, low=700.0, unit="kg")         # truncated below
        ```
    """

    mean: Float[Array, "..."]
    std: Float[Array, "..."]
    low: Float[Array, "..."] | None
    high: Float[Array, "..."] | None
    unit: str = eqx.field(static=True)

    def __init__(self, mean, std, *, low=None, high=None, unit: str = ""):
        cls = "Normal"
        mean = as_array(cls, "mean", mean, unit)
        std = check_nonnegative(cls, "std", as_array(cls, "std", std, unit), unit)
        arrays = [mean, std]
        names = ["mean", "std"]
        for name, bound in (("low", low), ("high", high)):
            if bound is not None:
                arrays.append(as_array(cls, name, bound, unit))
                names.append(name)
        _, arrays = _broadcast(cls, names, arrays, unit)
        self.mean, self.std = arrays[0], arrays[1]
        bounds = dict(zip(names[2:], arrays[2:]))
        self.low, self.high = bounds.get("low"), bounds.get("high")
        if bounds:
            if np.any(np.asarray(self.std) <= 0):
                fail(
                    cls, "std", "must be > 0 when `low`/`high` truncate the distribution", unit, std
                )
        if self.low is not None and self.high is not None:
            if np.any(np.asarray(self.low) >= np.asarray(self.high)):
                fail(cls, "high", f"must be > `low` = {np.asarray(self.low)}", unit, self.high)
        self.unit = unit

    @property
    def shape(self):
        return tuple(self.mean.shape)

    def sample(self, key):
        if self.low is None and self.high is None:
            return self.mean + self.std * jr.normal(key, self.shape)
        lower = -jnp.inf if self.low is None else (self.low - self.mean) / self.std
        upper = jnp.inf if self.high is None else (self.high - self.mean) / self.std
        return self.mean + self.std * jr.truncated_normal(key, lower, upper, self.shape)


class Uniform(AbstractDistribution):
    r"""Uniform dispersion $x \sim \mathcal U[\text{low}, \text{high})$, elementwise (Basilisk's
    `UniformDispersion`).

    **Arguments:**

    - `low`, `high`: bounds, broadcastable, `low <= high` (equal bounds give a constant).
    - `unit`: unit of the parameter, for error messages and documentation only.

    !!! example

        ```python
        mc.Uniform(-0.01, 0.01, unit="m")                    # a CoM offset component
        ```
    """

    low: Float[Array, "..."]
    high: Float[Array, "..."]
    unit: str = eqx.field(static=True)

    def __init__(self, low, high, *, unit: str = ""):
        cls = "Uniform"
        low = as_array(cls, "low", low, unit)
        high = as_array(cls, "high", high, unit)
        _, (low, high) = _broadcast(cls, ["low", "high"], [low, high], unit)
        if np.any(np.asarray(high) < np.asarray(low)):
            fail(cls, "high", f"must be >= `low` = {np.asarray(low)}", unit, high)
        self.low, self.high, self.unit = low, high, unit

    @property
    def shape(self):
        return tuple(self.low.shape)

    def sample(self, key):
        return self.low + (self.high - self.low) * jr.uniform(key, self.shape)


class Relative(AbstractDistribution):
    r"""Relative dispersion about a nominal value: $x = x_0\,(1 + s\,z)$ with
    $z \sim \mathcal N(0, 1)$ (`kind="normal"`, $s$ the relative 1-sigma) or
    $z \sim \mathcal U[-1, 1)$ (`kind="uniform"`, $s$ the relative half-width).

    **Arguments:**

    - `nominal`: $x_0$, any shape.
    - `scale`: $s \ge 0$ (a fraction: 0.05 for 5 %), broadcastable with `nominal`.
    - `kind`: `"normal"` or `"uniform"`.
    - `unit`: unit of the parameter, for error messages and documentation only.

    See also `percent(nominal, 5.0)` (the same with `scale` in percent).

    !!! example

        ```python
        mc.Relative(750.0, 0.05, unit="kg")                  # 5 % (1 sigma)
        mc.Relative(jnp.array([0.2, 0.3]), 0.1, kind="uniform")
        ```
    """

    nominal: Float[Array, "..."]
    scale: Float[Array, "..."]
    kind: str = eqx.field(static=True)
    unit: str = eqx.field(static=True)

    def __init__(self, nominal, scale, *, kind: str = "normal", unit: str = ""):
        cls = "Relative"
        if kind not in ("normal", "uniform"):
            raise ValueError(f"{cls}: `kind` must be 'normal' or 'uniform'; got {kind!r}.")
        nominal = as_array(cls, "nominal", nominal, unit)
        scale = check_nonnegative(cls, "scale", as_array(cls, "scale", scale, "-"), "-")
        _, (self.nominal, self.scale) = _broadcast(
            cls, ["nominal", "scale"], [nominal, scale], unit
        )
        self.kind, self.unit = kind, unit

    @property
    def shape(self):
        return tuple(self.nominal.shape)

    def sample(self, key):
        if self.kind == "normal":
            z = jr.normal(key, self.shape)
        else:
            z = jr.uniform(key, self.shape, minval=-1.0, maxval=1.0)
        return self.nominal * (1.0 + self.scale * z)


def percent(nominal, pct, *, kind: str = "normal", unit: str = "") -> Relative:
    """`Relative(nominal, pct / 100, kind=kind)`: a dispersion given in percent of the nominal.

    !!! example

        ```python
        mc.percent(750.0, 5.0, unit="kg")                    # 750 kg +- 5 % (1 sigma)
        ```
    """
    pct = check_nonnegative("percent", "pct", as_array("percent", "pct", pct, "%"), "%")
    return Relative(nominal, pct / 100.0, kind=kind, unit=unit)


def _mm(a, b):
    """3x3 matrix product written out as three products and two additions. A `dot` or a `sum`
    reduction is vectorized by XLA depending on the batch size, which can change its rounding;
    written out, a member's draw is bitwise the same at every batch (chunk) size."""
    terms = [a[..., :, k, None] * b[..., None, k, :] for k in range(3)]
    return terms[0] + terms[1] + terms[2]


def _triangle_ok(p):
    """All moments positive and each smaller than the sum of the other two."""
    p0, p1, p2 = p[..., 0], p[..., 1], p[..., 2]
    positive = (p0 > 0) & (p1 > 0) & (p2 > 0)
    return positive & (p0 + p1 > p2) & (p1 + p2 > p0) & (p2 + p0 > p1)


class PrincipalInertia(AbstractDistribution):
    r"""Dispersed inertia tensor: principal moments scaled and principal axes rotated.

    With the nominal tensor $[I_0] = [V]\,\mathrm{diag}(p)\,[V]^T$ (principal moments $p$ in
    ascending order, axes the columns of $[V]$), a draw is

    $$[I] = [R]\,[V]\,\mathrm{diag}(p \odot (1 + s \odot z))\,[V]^T [R]^T,\quad
    z \sim \mathcal N(0, I_3),\quad [R] = [R(\boldsymbol\theta)],\
    \boldsymbol\theta \sim \mathcal N(0, \sigma_\theta^2 I_3),$$

    with $[R(\boldsymbol\theta)]$ the DCM of the principal rotation vector $\boldsymbol\theta$.
    Draws whose moments are not all positive or violate the triangle inequality
    $p_i + p_j > p_k$ (every rigid body satisfies it) are rejected: `max_tries` candidates $z$
    are drawn and the first physical one is kept, so every tensor is symmetric positive definite
    and physical.

    **Arguments:**

    - `inertia`: nominal tensor $[I_0]$ [kg m^2], shape `(3, 3)`, symmetric positive definite,
      strictly satisfying the triangle inequality.
    - `rel_std`: $s$, relative 1-sigma of the principal moments (fraction), scalar or shape `(3,)`
      (in ascending order of the nominal moments), in `[0, 1)`.
    - `angle_std`: $\sigma_\theta$ [rad], 1-sigma of each component of the axes' rotation vector.
    - `max_tries`: candidate draws per member; if none is physical the member's tensor is NaN,
      and its simulation is reported as failed rather than run with a non-physical body.

    **Assumptions and limitations:** the nominal principal frame is computed once with
    `numpy.linalg.eigh`; for (nearly) repeated moments the axes are arbitrary within the degenerate
    plane, which is harmless since the tensor is then invariant under rotations in it.

    !!! example

        ```python
        mc.PrincipalInertia(I_nominal, 0.03, angle_std=np.deg2rad(1.0))
        ```
    """

    moments: Float[Array, " 3"]
    axes: Float[Array, "3 3"]
    rel_std: Float[Array, " 3"]
    angle_std: Float[Array, ""]
    max_tries: int = eqx.field(static=True)

    def __init__(self, inertia, rel_std, *, angle_std=0.0, max_tries: int = 16):
        cls = "PrincipalInertia"
        inertia = check_inertia(cls, "inertia", as_array(cls, "inertia", inertia, "kg m^2", (3, 3)))
        moments, axes = np.linalg.eigh(np.asarray(inertia))
        if not moments[0] + moments[1] > moments[2]:
            fail(
                cls,
                "inertia",
                f"must satisfy the triangle inequality I1 + I2 > I3 strictly (principal moments "
                f"{np.array2string(moments, precision=6)})",
                "kg m^2",
                inertia,
            )
        rel_std = np.broadcast_to(np.asarray(as_array(cls, "rel_std", rel_std, "-")), (3,))
        if np.any(rel_std < 0) or np.any(rel_std >= 1):
            fail(cls, "rel_std", "must lie in [0, 1)", "-", rel_std)
        angle_std = as_array(cls, "angle_std", angle_std, "rad", ())
        check_nonnegative(cls, "angle_std", angle_std, "rad")
        if not isinstance(max_tries, int) or max_tries < 1:
            raise ValueError(f"{cls}: `max_tries` must be an integer >= 1; got {max_tries!r}.")
        self.moments = jnp.asarray(moments)
        self.axes = jnp.asarray(axes)
        self.rel_std = jnp.asarray(rel_std)
        self.angle_std = angle_std
        self.max_tries = max_tries

    @property
    def shape(self):
        return (3, 3)

    def sample(self, key):
        # One normal draw: the axes' rotation vector, then all `max_tries` candidates at once (a
        # straight-line program, no loop); the first physical candidate is kept.
        z = jr.normal(key, (1 + self.max_tries, 3))
        candidates = self.moments * (1.0 + self.rel_std * z[1:])
        valid = _triangle_ok(candidates)
        p = candidates[jnp.argmax(valid)]
        p = jnp.where(jnp.any(valid), p, jnp.nan)
        dcm = prv_to_dcm(self.angle_std * z[0])
        axes = _mm(dcm, self.axes)
        inertia = _mm(axes * p, axes.T)
        return 0.5 * (inertia + inertia.T)


class AttitudeMRP(AbstractDistribution):
    r"""Dispersed attitude: the nominal frame rotated by a small random rotation.

    $[B'N] = [R(\boldsymbol\theta)]\,[BN(\boldsymbol\sigma_0)]$ with
    $\boldsymbol\theta \sim \mathcal N(0, \mathrm{diag}(\sigma_\theta^2))$ a principal rotation
    vector in $\mathcal B$ components; the draw is the MRP set of $[B'N]$ with $|\sigma| \le 1$.

    **Arguments:**

    - `sigma_BN`: nominal MRPs $\boldsymbol\sigma_0$ [-], shape `(3,)`.
    - `angle_std`: $\sigma_\theta$ [rad], scalar or shape `(3,)`, >= 0.

    !!! example

        ```python
        mc.AttitudeMRP(jnp.array([0.1, 0.2, -0.1]), np.deg2rad(2.0))
        ```
    """

    sigma_BN: Float[Array, " 3"]
    angle_std: Float[Array, " 3"]
    beta_BN: Float[Array, " 4"]

    def __init__(self, sigma_BN, angle_std):
        cls = "AttitudeMRP"
        self.sigma_BN = as_array(cls, "sigma_BN", sigma_BN, "-", (3,))
        angle_std = check_nonnegative(
            cls, "angle_std", as_array(cls, "angle_std", angle_std, "rad"), "rad"
        )
        if angle_std.shape not in ((), (3,)):
            raise ValueError(
                f"AttitudeMRP: `angle_std` must be a scalar or have shape (3,) [rad]; got shape "
                f"{angle_std.shape}."
            )
        self.angle_std = jnp.broadcast_to(angle_std, (3,))
        s = np.asarray(self.sigma_BN)
        s2 = float(s @ s)
        self.beta_BN = jnp.asarray(np.concatenate([[1.0 - s2], 2.0 * s]) / (1.0 + s2))

    @property
    def shape(self):
        return (3,)

    def sample(self, key):
        # Euler parameters of [R(theta)] and the product [B'N] = [R][BN], written out (no
        # reductions: bitwise the same draw at every batch size).
        t = self.angle_std * jr.normal(key, (3,))
        phi2 = t[0] ** 2 + t[1] ** 2 + t[2] ** 2
        small = phi2 < 1e-8
        phi = jnp.sqrt(jnp.where(small, 1.0, phi2))
        half_sinc = jnp.where(small, 0.5 - phi2 / 48.0, jnp.sin(0.5 * phi) / phi)
        r0 = jnp.where(small, 1.0 - phi2 / 8.0, jnp.cos(0.5 * phi))
        r1, r2, r3 = half_sinc * t[0], half_sinc * t[1], half_sinc * t[2]
        b0, b1, b2, b3 = (self.beta_BN[i] for i in range(4))
        q = jnp.stack(
            [
                r0 * b0 - r1 * b1 - r2 * b2 - r3 * b3,
                r1 * b0 + r0 * b1 + r3 * b2 - r2 * b3,
                r2 * b0 - r3 * b1 + r0 * b2 + r1 * b3,
                r3 * b0 + r2 * b1 - r1 * b2 + r0 * b3,
            ]
        )
        q = jnp.where(q[0] < 0, -q, q)  # the short rotation: |sigma| <= 1
        return q[1:] / (1.0 + q[0])


class UnitVector(AbstractDistribution):
    r"""Dispersed unit vector(s) (e.g. thruster or wheel axes): each nominal vector $\hat g$ is
    rotated by a principal rotation vector $\boldsymbol\theta \sim \mathcal N(0, \sigma_\theta^2 I_3)$,
    so the pointing error is Rayleigh distributed with scale $\sigma_\theta$ (the component of
    $\boldsymbol\theta$ along $\hat g$ does not move it). The result is renormalized.

    **Arguments:**

    - `nominal`: unit vector(s) [-], shape `(3,)` or `(n, 3)`.
    - `angle_std`: $\sigma_\theta$ [rad], scalar, >= 0.

    !!! example

        ```python
        mc.UnitVector(gsHat_B, np.deg2rad(0.5))              # (4, 3) wheel spin axes
        ```
    """

    nominal: Float[Array, "*n 3"]
    angle_std: Float[Array, ""]

    def __init__(self, nominal, angle_std):
        cls = "UnitVector"
        nominal = as_array(cls, "nominal", nominal, "-")
        if nominal.ndim not in (1, 2) or nominal.shape[-1] != 3:
            raise ValueError(
                f"{cls}: `nominal` must have shape (3,) or (n, 3) [-]; got shape {nominal.shape}."
            )
        self.nominal = check_unit_vectors(cls, "nominal", nominal)
        self.angle_std = check_nonnegative(
            cls, "angle_std", as_array(cls, "angle_std", angle_std, "rad", ()), "rad"
        )

    @property
    def shape(self):
        return tuple(self.nominal.shape)

    def sample(self, key):
        g = self.nominal.reshape(-1, 3)
        theta = self.angle_std * jr.normal(key, g.shape)
        v = _mm(prv_to_dcm(theta), g[:, :, None])[..., 0]
        v = v / jnp.sqrt(v[:, :1] ** 2 + v[:, 1:2] ** 2 + v[:, 2:] ** 2)
        return v.reshape(self.shape)


def _is_dist(x) -> bool:
    return isinstance(x, AbstractDistribution)


def _path_id(path) -> int:
    """A stable 31-bit id of a pytree path (the per-parameter `fold_in` data)."""
    return zlib.crc32(jtu.keystr(path).encode()) & 0x7FFFFFFF


def _check_key(where: str, key):
    if key is None:
        raise ValueError(
            f"{where}: `key` (a jax.random key) is required with dispersions; got None."
        )
    dtype = getattr(key, "dtype", None)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    legacy = dtype == jnp.uint32 and np.shape(key) == (2,)
    if not (typed and np.shape(key) == ()) and not legacy:
        raise ValueError(
            f"{where}: `key` must be one jax.random key (`jax.random.key(seed)`); got "
            f"{type(key).__name__} of shape {np.shape(key)} and dtype {dtype}."
        )
    return key


class Dispersions(eqx.Module):
    """A pytree of distributions (and constants), sampled per member from one key.

    **Arguments:**

    - `tree`: a pytree (usually a dict) whose leaves are `AbstractDistribution`s or constants
      (numbers/arrays, repeated for every member).

    The parameter at path `path` of member `i` is drawn from the key
    `fold_in(fold_in(key, h), i)`, `h` a hash of `jax.tree_util.keystr(path)`: a member's draw
    depends on neither `n`, the chunk size, the device count nor the other parameters of the
    tree (adding a dispersion leaves the existing ones' draws unchanged). The distributions avoid
    reductions and `dot`s, whose rounding XLA may vary with the batch size, so the draws are
    bitwise reproducible.

    !!! example

        ```python
        disp = mc.Dispersions({"mass": mc.percent(750.0, 5.0), "omega_BN_B": mc.Normal(w0, 5e-4)})
        params = disp.sample(jr.key(0), 100)      # {"mass": (100,), "omega_BN_B": (100, 3)}
        params_17 = disp.sample_member(jr.key(0), 17)
        ```
    """

    tree: Any

    def __init__(self, tree):
        leaves = jtu.tree_leaves(tree, is_leaf=_is_dist)
        if not leaves:
            raise ValueError(
                f"Dispersions: `tree` must hold at least one distribution; got {tree!r}."
            )
        paths = jtu.tree_flatten_with_path(tree, is_leaf=_is_dist)[0]

        def convert(path, leaf):
            if _is_dist(leaf):
                return leaf
            try:
                return jnp.asarray(leaf, dtype=float) if not hasattr(leaf, "dtype") else leaf
            except (TypeError, ValueError):
                raise ValueError(
                    f"Dispersions: `tree{jtu.keystr(path)}` must be a distribution or a numeric "
                    f"constant; got {leaf!r}."
                ) from None

        ids = [_path_id(p) for p, _ in paths]
        if len(set(ids)) != len(ids):  # a crc32 collision would correlate two parameters
            raise ValueError(
                f"Dispersions: `tree` paths {[jtu.keystr(p) for p, _ in paths]} collide in their "
                "hash; rename one of them."
            )
        self.tree = jtu.tree_map_with_path(convert, tree, is_leaf=_is_dist)

    def sample_member(self, key, i):
        """The parameters of member `i` (no leading axis)."""
        key = _check_key("Dispersions", key)

        def draw(path, leaf):
            if _is_dist(leaf):
                return leaf.sample(jr.fold_in(jr.fold_in(key, _path_id(path)), i))
            return leaf

        return jtu.tree_map_with_path(draw, self.tree, is_leaf=_is_dist)

    def sample_members(self, key, members):
        """The parameters of the members `members` (integer array), stacked on a leading axis."""
        members = jnp.asarray(members)
        return _sample_members(self, _check_key("Dispersions", key), members)

    def sample(self, key, n: int):
        """The parameters of members `0 .. n-1`, stacked on a leading axis of length `n`."""
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"Dispersions: `n` must be an integer >= 1; got {n!r}.")
        return self.sample_members(key, jnp.arange(int(n)))


@eqx.filter_jit
def _sample_members(disp, key, members):
    return jax.vmap(lambda i: disp.sample_member(key, i))(members)


# ----------------------------------------------------------------------------------------------
# Normalized outputs: nested dicts of arrays, RESULTS separated
# ----------------------------------------------------------------------------------------------


def _normalize(tree, results: list):
    """Nested dicts of arrays (str keys) from any output pytree; RESULTS items go to `results`.

    Equinox modules (e.g. `Solution`) become dicts of their fields, sequences dicts keyed "0", "1",
    ...; `None` and empty containers are dropped.
    """
    if isinstance(tree, _RESULT_ITEM):
        results.append(tree)
        return None
    if isinstance(tree, dict):
        items = {str(k): _normalize(v, results) for k, v in tree.items()}
    elif isinstance(tree, eqx.Module):
        fields = [f for f in dataclasses.fields(tree) if not f.metadata.get("static", False)]
        items = {f.name: _normalize(getattr(tree, f.name), results) for f in fields}
    elif isinstance(tree, list | tuple):
        items = {str(i): _normalize(v, results) for i, v in enumerate(tree)}
    elif tree is None or isinstance(tree, str):
        return None
    else:
        return jnp.asarray(tree)
    items = {k: v for k, v in items.items() if v is not None}
    return items or None


def _flatten(tree, prefix: str = "") -> dict:
    """`{"a/b/c": leaf}` of nested dicts (`prefix` joined in front; a bare leaf is `{prefix: leaf}`,
    or `{"value": leaf}` without a prefix)."""
    if isinstance(tree, dict):
        flat = {}
        for key, value in tree.items():
            if _SEP in key:
                raise ValueError(
                    f"montecarlo: output and parameter keys must not contain {_SEP!r} (it joins "
                    f"the keys of nested outputs); got {key!r}."
                )
            flat.update(_flatten(value, f"{prefix}{_SEP}{key}" if prefix else key))
        return flat
    if tree is None:
        return {}
    return {prefix or "value": tree}


def _unflatten(flat: dict, prefix: str):
    if prefix in flat:
        return flat[prefix]
    out: dict = {}
    start = prefix + _SEP
    for name, value in flat.items():
        if not name.startswith(start):
            continue
        parts = name[len(start) :].split(_SEP)
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _finite(tree):
    ok = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok


def _result_code(items) -> jax.Array:
    """The first non-successful code among diffrax RESULTS items (0 when all succeeded)."""
    code = jnp.asarray(0, jnp.int32)
    for item in items:
        value = jnp.asarray(item._value, jnp.int32)
        code = jnp.where(code != 0, code, value)
    return code


def _message(code: int) -> str:
    table = dfx.RESULTS._index_to_message
    if 0 <= code < len(table):
        return table[code]
    return f"diffrax result code {code}"


# ----------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------


class Summary(eqx.Module):
    """Statistics of one output over the `ok` members (elementwise over its trailing axes).

    **Fields:** `mean`, `std` (population, `ddof=0`), `min`, `max`, `percentiles` (dict
    `{p: array}`), `n_ok` (members used), `n_failed` (members excluded).
    """

    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    percentiles: dict
    n_ok: int = eqx.field(static=True)
    n_failed: int = eqx.field(static=True)


class BatchResult(eqx.Module):
    """What `run_batch`, `run_campaign` and `load_campaign` return.

    **Fields** (leading axis: members, in increasing member index):

    - `members`: member indices, shape `(m,)` int64.
    - `ok`: `True` where the member's solve succeeded and all its outputs are finite, shape `(m,)`.
    - `result`: the first non-successful `diffrax.RESULTS` code among the member's outputs (0 when
      successful), shape `(m,)` int32; see `messages`.
    - `params`: the member's parameters (sampled ones for `Dispersions`), nested dicts of arrays.
    - `outputs`: the member function's outputs as nested dicts of arrays (a `Solution` becomes
      `{"ts", "ys", "outputs", "counts", "stats"}`, like `jaxsim.results.to_numpy`).
    - `n_total`: members in the whole batch or campaign; `complete`: all of them are present.

    Arrays are numpy arrays, except with `run_batch(..., to_host=False)` (device arrays).
    """

    members: np.ndarray
    ok: Any
    result: Any
    params: Any
    outputs: Any
    n_total: int = eqx.field(static=True)
    complete: bool = eqx.field(static=True)

    @property
    def n_ok(self) -> int:
        return int(np.sum(np.asarray(self.ok)))

    @property
    def n_failed(self) -> int:
        return int(np.size(self.ok)) - self.n_ok

    @property
    def messages(self) -> tuple[str, ...]:
        """Per member: `""` when ok, else why it failed (the diffrax message, or which outputs
        are non-finite)."""
        ok, result = np.asarray(self.ok), np.asarray(self.result)
        flat = _flatten(self.outputs)
        msgs = []
        for j in range(ok.shape[0]):
            if ok[j]:
                msgs.append("")
            elif result[j] != 0:
                msgs.append(_message(int(result[j])))
            else:
                bad = [
                    name
                    for name, leaf in flat.items()
                    if np.issubdtype(np.asarray(leaf).dtype, np.inexact)
                    and not np.all(np.isfinite(np.asarray(leaf[j])))
                ]
                msgs.append(f"non-finite outputs: {', '.join(bad)}")
        return tuple(msgs)

    def failures(self) -> list[tuple[int, str]]:
        """`[(member index, message)]` of the failed members."""
        ok = np.asarray(self.ok)
        msgs = self.messages
        return [(int(m), msgs[j]) for j, m in enumerate(np.asarray(self.members)) if not ok[j]]

    def summary(self, percentiles=(5.0, 50.0, 95.0)) -> dict[str, Summary]:
        """`summarize(self, percentiles)`."""
        return summarize(self, percentiles)


def summarize(
    result: BatchResult, percentiles=(5.0, 50.0, 95.0), *, include_params: bool = False
) -> dict[str, Summary]:
    r"""Mean, standard deviation, extremes and percentiles of every output over the `ok` members.

    **Arguments:**

    - `result`: a `BatchResult`.
    - `percentiles`: percentiles in `[0, 100]` (numpy's linear interpolation).
    - `include_params`: also summarize the parameters, under `"params/<name>"`.

    **Returns:** `{path: Summary}` with `path` the output's `/`-joined keys (for a `Solution`:
    `"outputs/omega_BN_B"`, `"ys/hub/sigma_BN"`, `"stats/num_steps"`) and each statistic of shape
    `leaf.shape[1:]` (per sample time, per component). Outputs with no `ok` member get NaN
    statistics.

    !!! example

        ```python
        stats = mc.summarize(res, percentiles=(1.0, 99.0))
        stats["outputs/omega_BN_B"].std[-1]                 # final-time 1-sigma per axis [rad/s]
        ```
    """
    if not isinstance(result, BatchResult):
        raise ValueError(f"summarize: `result` must be a BatchResult; got {type(result).__name__}.")
    pct = tuple(float(p) for p in np.atleast_1d(percentiles))
    if any(not 0.0 <= p <= 100.0 for p in pct):
        raise ValueError(f"summarize: `percentiles` must lie in [0, 100]; got {pct}.")
    ok = np.asarray(result.ok, dtype=bool)
    n_ok = int(ok.sum())
    flat = _flatten(result.outputs)
    if include_params:
        flat.update(_flatten(result.params, "params"))
    out = {}
    for name, leaf in flat.items():
        x = np.asarray(leaf)[ok].astype(float)
        if n_ok == 0:
            nan = np.full(x.shape[1:], np.nan)
            stats = dict(mean=nan, std=nan, min=nan, max=nan, percentiles={p: nan for p in pct})
        else:
            stats = dict(
                mean=x.mean(axis=0),
                std=x.std(axis=0),
                min=x.min(axis=0),
                max=x.max(axis=0),
                percentiles=dict(zip(pct, np.percentile(x, pct, axis=0))),
            )
        out[name] = Summary(**stats, n_ok=n_ok, n_failed=int(ok.size) - n_ok)
    return out


# ----------------------------------------------------------------------------------------------
# Running: the compiled chunk program
# ----------------------------------------------------------------------------------------------


class _Source:
    """Where member parameters come from: `Dispersions` + key, or stacked parameter arrays."""

    def __init__(self, where: str, params, key, n):
        self.disp = params if isinstance(params, Dispersions) else None
        if self.disp is not None:
            self.key = _check_key(where, key)
            if not isinstance(n, int | np.integer) or n < 1:
                raise ValueError(
                    f"{where}: `n` (number of members) must be an integer >= 1 with dispersions; "
                    f"got {n!r}."
                )
            self.n = int(n)
            self.params = None
            return
        if key is not None:
            raise ValueError(
                f"{where}: `key` applies to `Dispersions` only; got a key with `params` of type "
                f"{type(params).__name__} (sample it first, or pass a Dispersions)."
            )
        leaves = jtu.tree_leaves(params)
        if not leaves:
            raise ValueError(
                f"{where}: `params` must be a Dispersions or a non-empty pytree of arrays with a "
                f"leading member axis; got {params!r}."
            )
        try:
            params = jtu.tree_map(np.asarray, params)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{where}: `params` leaves must be numeric arrays; got {err}."
            ) from None
        lengths = {np.shape(x)[0] if np.ndim(x) else None for x in jtu.tree_leaves(params)}
        if None in lengths or len(lengths) != 1:
            shapes = [np.shape(x) for x in jtu.tree_leaves(params)]
            raise ValueError(
                f"{where}: `params` leaves must share a leading member axis; got shapes {shapes}."
            )
        (length,) = lengths
        if n is not None and n != length:
            raise ValueError(
                f"{where}: `n` must equal the leading axis of `params` ({length}); got {n!r}."
            )
        self.n, self.params, self.key = int(length), params, None

    def digest(self) -> str:
        """sha256 of the key and the dispersions (or of the parameter arrays)."""
        h = hashlib.sha256()
        if self.disp is not None:
            leaves, treedef = jtu.tree_flatten(self.disp)
            h.update(str(treedef).encode())
            data = jr.key_data(self.key) if _is_typed_key(self.key) else self.key
            h.update(np.asarray(data).tobytes())
        else:
            leaves, treedef = jtu.tree_flatten(self.params)
            h.update(str(treedef).encode())
        for leaf in leaves:
            arr = np.asarray(leaf)
            h.update(f"{arr.dtype}{arr.shape}".encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def chunk_input(self, members: np.ndarray):
        return jtu.tree_map(lambda x: x[members], self.params)


def _is_typed_key(key) -> bool:
    return jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key)


def _mesh_sharding(where: str, devices, mesh, axis_name):
    if devices is not None and mesh is not None:
        raise ValueError(f"{where}: give `devices` or `mesh`, not both.")
    if devices is not None:
        devices = list(devices)
        if not devices:
            raise ValueError(f"{where}: `devices` must be a non-empty sequence; got [].")
        mesh = jax.sharding.Mesh(np.asarray(devices), ("members",))
    if mesh is None:
        return None, 1
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ValueError(f"{where}: `mesh` must be a jax.sharding.Mesh; got {type(mesh).__name__}.")
    axis = mesh.axis_names[0] if axis_name is None else axis_name
    if axis not in mesh.axis_names:
        raise ValueError(
            f"{where}: `axis_name` must be one of the mesh axes {mesh.axis_names}; got {axis!r}."
        )
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    return sharding, int(mesh.shape[axis])


# Compiled chunk programs per member function, so that a second batch with the same `fn` (another
# key, other dispersion values, more members) reuses the compilation when the chunk shapes agree.
_PROGRAMS: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_SAMPLERS: dict = {}


def _compile(fn, sharding):
    """`jit(vmap(member))(params) -> (params, outputs, result, finite)`."""

    def member(params):
        results: list = []
        out = _normalize(fn(params), results)
        return _normalize(params, []), out, _result_code(results), _finite(out)

    batched = jax.vmap(member)
    options = compiler_options()
    if sharding is None:
        return jax.jit(batched, compiler_options=options)
    return jax.jit(
        batched, in_shardings=(sharding,), out_shardings=sharding, compiler_options=options
    )


def _sampler(sharding):
    """The sampling program of a chunk: `(disp, key, members) -> params` (the one of
    `Dispersions.sample` when unsharded, so that both draw bitwise the same values)."""
    if sharding is None:
        return _sample_members
    if sharding not in _SAMPLERS:
        replicated = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
        batched = jax.vmap(lambda d, k, i: d.sample_member(k, i), in_axes=(None, None, 0))
        _SAMPLERS[sharding] = jax.jit(
            batched, in_shardings=(replicated, replicated, sharding), out_shardings=sharding
        )
    return _SAMPLERS[sharding]


class _Program:
    """The compiled chunk program of `fn` for one source: `run(members) -> (params, outputs,
    result, finite)` for the (padded) member indices `members`.

    Dispersions are sampled by a program of their own, apart from `fn`: fused into the
    simulation, XLA could evaluate the same expressions with a different rounding, and a member's
    parameters would then differ in the last bit from `Dispersions.sample`'s.
    """

    def __init__(self, fn, source: _Source, sharding):
        self.source, self.sharding = source, sharding
        try:
            cache = _PROGRAMS.setdefault(fn, {})
        except TypeError:  # not weak-referenceable: compile for this run only
            cache = {}
        if sharding not in cache:
            cache[sharding] = _compile(fn, sharding)
        self.call = cache[sharding]
        self.sample = _sampler(sharding) if source.disp is not None else None

    def run(self, members: np.ndarray):
        if self.sample is not None:
            idx = jnp.asarray(members)
            if self.sharding is not None:
                idx = jax.device_put(idx, self.sharding)
            x = self.sample(self.source.disp, self.source.key, idx)
        else:
            x = self.source.chunk_input(members)
            if self.sharding is not None:
                x = jax.device_put(x, self.sharding)
        return self.call(x)


def _round_up(a: int, b: int) -> int:
    return -(-a // b) * b


def _check_chunk_size(where, chunk_size, n, n_dev, required=False):
    if chunk_size is None:
        if required:
            raise ValueError(f"{where}: `chunk_size` (members per chunk) is required; got None.")
        return _round_up(n, n_dev)
    if not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"{where}: `chunk_size` must be an integer >= 1; got {chunk_size!r}.")
    if chunk_size % n_dev:
        raise ValueError(
            f"{where}: `chunk_size` must be a multiple of the {n_dev} devices that share each "
            f"chunk; got {chunk_size}."
        )
    return int(chunk_size)


class _Progress:
    """Progress reporting: a callable `progress(done, total)`, tqdm, or plain text on stderr."""

    def __init__(self, progress, total: int, desc: str):
        self.callback = progress if callable(progress) else None
        self.bar = None
        self.text = False
        self.total, self.start, self.desc = total, time.perf_counter(), desc
        if progress is True:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=desc, unit="member", file=sys.stderr)
            except ImportError:
                self.text = True
        elif progress not in (False, None) and self.callback is None:
            raise ValueError(
                f"{desc}: `progress` must be a bool or a callable (done, total); got {progress!r}."
            )

    def update(self, done: int, step: int, failed: int):
        if self.bar is not None:
            self.bar.update(step)
            self.bar.set_postfix(failed=failed)
        elif self.text:
            elapsed = time.perf_counter() - self.start
            print(
                f"{self.desc}: {done}/{self.total} members, {failed} failed, {elapsed:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        if self.callback is not None:
            self.callback(done, self.total)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _host_chunk(raw, valid: int):
    """Chunk outputs to numpy, dropping padded members."""
    return jtu.tree_map(lambda x: np.asarray(x)[:valid], raw)


def _concat(parts, to_host: bool):
    if len(parts) == 1:
        return parts[0]
    cat = np.concatenate if to_host else jnp.concatenate
    return jtu.tree_map(lambda *xs: cat(xs, axis=0), *parts)


def member_range(n: int, process_index: int, process_count: int, chunk_size: int = 1) -> range:
    """The contiguous block of members `0 .. n-1` that process `process_index` of `process_count`
    runs (blocks of whole chunks of `chunk_size`, as even as possible).

    !!! example

        ```python
        # multi-host: after jax.distributed.initialize(), on every host
        mine = mc.member_range(n, jax.process_index(), jax.process_count(), chunk_size)
        res = mc.run_batch(fn, disp, key=key, n=n, members=mine, devices=jax.local_devices())
        ```
    """
    for name, value, low in (
        ("n", n, 1),
        ("process_count", process_count, 1),
        ("chunk_size", chunk_size, 1),
    ):
        if not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"member_range: `{name}` must be an integer >= {low}; got {value!r}.")
    if not isinstance(process_index, int | np.integer) or not 0 <= process_index < process_count:
        raise ValueError(
            f"member_range: `process_index` must be an integer in [0, {process_count}); got "
            f"{process_index!r}."
        )
    n_chunks = math.ceil(n / chunk_size)
    lo = process_index * n_chunks // process_count
    hi = (process_index + 1) * n_chunks // process_count
    return range(min(lo * chunk_size, n), min(hi * chunk_size, n))


def run_batch(
    fn: Callable[[Any], Any],
    params,
    *,
    key=None,
    n: int | None = None,
    chunk_size: int | None = None,
    members: Sequence[int] | None = None,
    devices: Sequence[jax.Device] | None = None,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str | None = None,
    progress: bool | Callable[[int, int], None] = False,
    to_host: bool = True,
) -> BatchResult:
    r"""Evaluate `fn` for every member, `chunk_size` members at a time with `jax.vmap`.

    All chunks run the same compiled program (the last one is padded with copies of its last
    member, whose results are dropped). Failed members are reported, not raised: see
    `BatchResult.ok` and `BatchResult.messages`.

    **Arguments:**

    - `fn`: `fn(params) -> pytree` for one member (no leading axis), traceable (it runs under
      `jit` and `vmap`); a `Solution` in its output is checked through `Solution.result`.
    - `params`: a `Dispersions` (then `key` and `n` are required), or a pytree of arrays with a
      leading member axis (e.g. `Dispersions.sample(key, n)` or a design of experiments).
    - `key`: the `jax.random` key of the dispersions.
    - `n`: number of members (members `0 .. n-1`).
    - `chunk_size`: members per compiled call (default: all, one chunk); a multiple of the
      device count when sharded.
    - `members`: run only these member indices (e.g. `member_range(...)` on one host of several,
      or the failed members of a previous run); default all.
    - `devices` / `mesh`, `axis_name`: shard each chunk's member axis over these devices (a 1-D
      mesh is built from `devices`), or over the axis `axis_name` of `mesh` (default its first).
    - `progress`: `True` for a progress bar on stderr (tqdm when installed, else one line per
      chunk), or a callable `progress(done, total)` called after every chunk.
    - `to_host`: copy every chunk's results to numpy as it finishes (default; frees device
      memory). With `False` results stay device arrays (sharded when `devices`/`mesh` is given).

    **Returns:** a `BatchResult`.

    !!! example

        ```python
        res = mc.run_batch(member, disp, key=jr.key(0), n=1024, chunk_size=256)
        print(res.n_failed, res.failures()[:3])
        ```
    """
    where = "run_batch"
    if not callable(fn):
        raise ValueError(f"{where}: `fn` must be callable; got {type(fn).__name__}.")
    source = _Source(where, params, key, n)
    sharding, n_dev = _mesh_sharding(where, devices, mesh, axis_name)
    if members is None:
        todo = np.arange(source.n)
    else:
        todo = np.asarray(members, dtype=np.int64).reshape(-1)
        if todo.size == 0 or np.any(todo < 0) or np.any(todo >= source.n):
            raise ValueError(
                f"{where}: `members` must be a non-empty set of indices in [0, {source.n}); got "
                f"{members!r}."
            )
        todo = np.unique(todo)
    size = _check_chunk_size(where, chunk_size, todo.size, n_dev)
    size = min(size, _round_up(todo.size, n_dev))
    program = _Program(fn, source, sharding)
    reporter = _Progress(progress, int(todo.size), where)
    parts, failed = [], 0
    try:
        for start in range(0, todo.size, size):
            chunk = todo[start : start + size]
            valid = chunk.size
            padded = np.concatenate([chunk, np.full(size - valid, chunk[-1], dtype=chunk.dtype)])
            raw = program.run(padded)
            if to_host:
                part = _host_chunk(raw, valid)
            elif valid < size:
                part = jtu.tree_map(lambda x: x[:valid], raw)
            else:
                part = raw
            _, _, code, finite = part
            failed += valid - int(np.sum((np.asarray(code) == 0) & np.asarray(finite)))
            parts.append(part)
            reporter.update(start + valid, valid, failed)
    finally:
        reporter.close()
    params_, outputs, code, finite = _concat(parts, to_host)
    ok = (code == 0) & finite
    return BatchResult(
        members=todo,
        ok=ok,
        result=code,
        params=params_,
        outputs=outputs,
        n_total=source.n,
        complete=todo.size == source.n,
    )


# ----------------------------------------------------------------------------------------------
# Campaigns on disk
# ----------------------------------------------------------------------------------------------


def _chunk_path(directory: Path, k: int) -> Path:
    return directory / f"chunk_{k:06d}.npz"


def _atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    # Unique per process and host (several hosts may share the campaign directory).
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _read_manifest(directory: Path, where: str) -> dict | None:
    path = directory / _MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: `directory` has an unreadable {_MANIFEST} ({err}).") from None
    if manifest.get("format") != _FORMAT:
        raise ValueError(
            f"{where}: `directory` {str(directory)!r} is not a jaxsim Monte Carlo campaign "
            f"(format {manifest.get('format')!r}, expected {_FORMAT!r})."
        )
    return manifest


def run_campaign(
    fn: Callable[[Any], Any],
    params,
    directory: str | os.PathLike,
    *,
    chunk_size: int,
    key=None,
    n: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str | None = None,
    progress: bool | Callable[[int, int], None] = False,
    max_chunks: int | None = None,
    process_index: int = 0,
    process_count: int = 1,
    config: dict | None = None,
) -> BatchResult:
    r"""Run a Monte Carlo campaign chunk by chunk into `directory`, resumably.

    Chunk `k` holds members `k * chunk_size .. min((k + 1) * chunk_size, n) - 1` and is written as
    `chunk_<k>.npz` (member indices, `ok`, `result`, parameters under `params/...`, outputs under
    `outputs/...`) to a temporary file that is then renamed over the final name (`os.replace`,
    atomic), so an interrupted campaign never leaves a partial chunk. `manifest.json` records `n`,
    `chunk_size`, a sha256 of the key and dispersions (or of the parameters) and `config`; running
    again in the same directory skips the chunks already on disk and refuses a different
    configuration.

    **Arguments:**

    - `fn`, `params`, `key`, `n`, `devices`, `mesh`, `axis_name`, `progress`: as in `run_batch`
      (`progress` counts the members of this process, finished chunks included).
    - `directory`: the campaign folder (created if missing).
    - `chunk_size`: members per chunk (and per compiled call).
    - `max_chunks`: compute at most this many new chunks in this call, then return (the result
      is then incomplete: `complete=False`); default no limit.
    - `process_index`, `process_count`: this process computes the chunks `k` with
      `k % process_count == process_index` (multi-host: `jax.process_index()`,
      `jax.process_count()`, with `devices=jax.local_devices()`).
    - `config`: JSON-serializable metadata (e.g. a model version) stored in the manifest and
      compared on resume.

    **Returns:** `load_campaign(directory)`: every chunk on disk, from all processes.

    **Raises:** `ValueError` if `directory` holds a campaign with another configuration.

    !!! example

        ```python
        res = mc.run_campaign(member, disp, "runs/mc1", key=jr.key(0), n=10_000, chunk_size=500,
                              progress=True, config={"model": "v3"})
        # killed after 7 chunks? Run the same call again: chunks 0-6 are loaded, not recomputed.
        ```
    """
    where = "run_campaign"
    if not callable(fn):
        raise ValueError(f"{where}: `fn` must be callable; got {type(fn).__name__}.")
    source = _Source(where, params, key, n)
    sharding, n_dev = _mesh_sharding(where, devices, mesh, axis_name)
    size = _check_chunk_size(where, chunk_size, source.n, n_dev, required=True)
    if max_chunks is not None and (not isinstance(max_chunks, int | np.integer) or max_chunks < 0):
        raise ValueError(
            f"{where}: `max_chunks` must be an integer >= 0 or None; got {max_chunks!r}."
        )
    if not isinstance(process_count, int | np.integer) or process_count < 1:
        raise ValueError(
            f"{where}: `process_count` must be an integer >= 1; got {process_count!r}."
        )
    if not isinstance(process_index, int | np.integer) or not 0 <= process_index < process_count:
        raise ValueError(
            f"{where}: `process_index` must be an integer in [0, {process_count}); got "
            f"{process_index!r}."
        )
    config = {} if config is None else config
    try:
        config = json.loads(json.dumps(config))
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{where}: `config` must be JSON-serializable; got {config!r} ({err})."
        ) from None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n_chunks = math.ceil(source.n / size)
    wanted = {
        "format": _FORMAT,
        "n": source.n,
        "chunk_size": size,
        "n_chunks": n_chunks,
        "source": "dispersions" if source.disp is not None else "params",
        "digest": source.digest(),
        "config": config,
    }
    manifest = _read_manifest(directory, where)
    if manifest is None:
        text = json.dumps({**wanted, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2)
        _atomic_write(directory / _MANIFEST, lambda f: f.write(text.encode()))
    else:
        diff = [
            f"{name}: on disk {manifest.get(name)!r}, requested {value!r}"
            for name, value in wanted.items()
            if manifest.get(name) != value
        ]
        if diff:
            raise ValueError(
                f"{where}: `directory` {str(directory)!r} holds a campaign with a different "
                f"configuration ({'; '.join(diff)}); resume with the original arguments, or use "
                "a new directory."
            )
    mine = [k for k in range(n_chunks) if k % process_count == process_index]
    total = sum(min(size, source.n - k * size) for k in mine)
    reporter = _Progress(progress, total, where)
    program, computed, done, failed = None, 0, 0, 0
    try:
        for k in mine:
            chunk = np.arange(k * size, min((k + 1) * size, source.n))
            path = _chunk_path(directory, k)
            if path.exists():
                with np.load(path) as data:
                    if not np.array_equal(data["members"], chunk):
                        raise ValueError(
                            f"{where}: {path.name} holds members {data['members'][:4]}... but "
                            f"chunk {k} should hold {chunk[:4]}...; the directory is corrupt."
                        )
                    failed += int(np.sum(~data["ok"]))
                done += chunk.size
                reporter.update(done, chunk.size, failed)
                continue
            if max_chunks is not None and computed >= max_chunks:
                break
            if program is None:
                program = _Program(fn, source, sharding)
            padded = np.concatenate([chunk, np.full(size - chunk.size, chunk[-1])])
            params_, outputs, code, finite = _host_chunk(program.run(padded), chunk.size)
            ok = (code == 0) & finite
            arrays = {"members": chunk, "ok": ok, "result": code}
            for prefix, tree in (("params", params_), ("outputs", outputs)):
                arrays.update(_flatten(tree, prefix))
            _atomic_write(path, lambda f: np.savez(f, **arrays))
            computed += 1
            done += chunk.size
            failed += int(np.sum(~ok))
            reporter.update(done, chunk.size, failed)
    finally:
        reporter.close()
    return load_campaign(directory)


def load_campaign(directory: str | os.PathLike) -> BatchResult:
    """Read a campaign written by `run_campaign` (complete or not) into one `BatchResult`.

    **Arguments:**

    - `directory`: the campaign folder.

    **Returns:** a `BatchResult` of the chunks on disk, members in increasing order;
    `complete` tells whether every chunk is there, `n_total` is the campaign's `n`.

    !!! example

        ```python
        res = mc.load_campaign("runs/mc1")
        res.complete, res.n_ok, mc.summarize(res)["outputs/totRotEnergy"].mean
        ```
    """
    directory = Path(directory)
    manifest = _read_manifest(directory, "load_campaign")
    if manifest is None:
        raise ValueError(
            f"load_campaign: `directory` {str(directory)!r} has no {_MANIFEST}; not a campaign."
        )
    flats = []
    for k in range(int(manifest["n_chunks"])):
        path = _chunk_path(directory, k)
        if path.exists():
            with np.load(path) as data:
                flats.append({name: data[name] for name in data.files})
    if not flats:
        empty = np.zeros(0, dtype=np.int64)
        return BatchResult(
            members=empty,
            ok=np.zeros(0, bool),
            result=np.zeros(0, np.int32),
            params={},
            outputs={},
            n_total=int(manifest["n"]),
            complete=False,
        )
    flat = {name: np.concatenate([f[name] for f in flats], axis=0) for name in flats[0]}
    return BatchResult(
        members=flat["members"],
        ok=flat["ok"],
        result=flat["result"],
        params=_unflatten(flat, "params"),
        outputs=_unflatten(flat, "outputs"),
        n_total=int(manifest["n"]),
        complete=len(flats) == int(manifest["n_chunks"]),
    )
