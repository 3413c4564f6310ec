r"""Physical validity of parameters and states as traced checks (issue #33).

A model changed after construction (`eqx.tree_at`, dispersions, `vmap` over parameters) bypasses
the checks of `__init__`. Effectors that carry physical parameters expose
`physical_checks(...) -> {quantity: bool array}` (True where valid), built from the functions here
so that they work on traced values; `Spacecraft.validity(y)` gathers them as
`{"<effector>.<quantity>": bool}`. `simulate` refuses a concrete model that fails one (naming it),
and fails a run whose traced one (`jit`, `vmap`, Monte Carlo members) fails: `invalid_model`
(an error naming the check with `throw=True`; see `jaxsim.RESULTS`).

A rigid body's inertia about its centre of mass is physical iff it is symmetric positive definite
and its principal moments satisfy the triangle inequality $I_1 + I_2 \ge I_3$ (each is a sum of two
of the non-negative second moments $\int x_i^2\,dm$); equivalently $\tfrac12\mathrm{tr}(I)\,E - I$,
the matrix of second moments, is positive semi-definite (Schaub & Junkins, *Analytical Mechanics of
Space Systems*, sec. 4.2).
"""

import jax
import jax.numpy as jnp
import numpy as np


# Relative round-off allowed on the symmetry test.
INERTIA_RTOL = 1e-12
# Violation of the triangle inequality allowed, relative to the trace: a flat plate has
# I_1 + I_2 = I_3 exactly, and inertias rounded to a few digits (or with rounded products of
# inertia) may miss it slightly; 0.1 % of the trace refuses clearly impossible bodies only.
TRIANGLE_RTOL = 1e-3


def _xp(*xs):
    """NumPy for concrete values (a call-time check: no JAX dispatch per operation, about 50x
    faster on small arrays), `jax.numpy` when any is traced."""
    return jnp if any(isinstance(x, jax.core.Tracer) for x in xs) else np


def _minors(m):
    """The seven principal minors of a 3x3 matrix (3 diagonal, 3 of order 2, the determinant)."""
    d = [m[..., i, i] for i in range(3)]
    two = [
        m[..., i, i] * m[..., j, j] - m[..., i, j] * m[..., j, i]
        for i, j in ((0, 1), (0, 2), (1, 2))
    ]
    det = (
        m[..., 0, 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
        - m[..., 0, 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
        + m[..., 0, 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0])
    )
    return d, two, det


def inertia_ok(I):
    r"""Whether inertia matrices `I` (..., 3, 3) [kg m^2] about a centre of mass are physical:
    symmetric, positive definite (Sylvester's leading minors > 0) and with principal moments that
    satisfy the triangle inequality (all principal minors of $\tfrac12\mathrm{tr}(I)E - I$
    $\ge -$ `TRIANGLE_RTOL` times the matching power of the trace). A traced boolean."""
    xp = _xp(I)
    I = xp.asarray(I)
    tr = I[..., 0, 0] + I[..., 1, 1] + I[..., 2, 2]
    scale = xp.maximum(xp.abs(tr), 1e-300)
    sym = xp.all(
        xp.abs(I - xp.swapaxes(I, -1, -2)) <= INERTIA_RTOL * scale[..., None, None], (-2, -1)
    )
    d, two, det = _minors(I)
    pd = (d[0] > 0) & (two[0] > 0) & (det > 0)
    M = 0.5 * tr[..., None, None] * xp.eye(3) - I
    md, mtwo, mdet = _minors(M)
    tol = TRIANGLE_RTOL
    tri = xp.all(xp.stack([x >= -tol * scale for x in md]), 0)
    tri = tri & xp.all(xp.stack([x >= -tol * scale**2 for x in mtwo]), 0)
    tri = tri & (mdet >= -tol * scale**3)
    return sym & pd & tri


def inertia_pd(I):
    """Whether inertia matrices `I` (..., 3, 3) [kg m^2] are symmetric positive definite
    (Sylvester's leading minors > 0; what a joint body's constructor checks). A traced boolean."""
    xp = _xp(I)
    I = xp.asarray(I)
    tr = I[..., 0, 0] + I[..., 1, 1] + I[..., 2, 2]
    scale = xp.maximum(xp.abs(tr), 1e-300)
    sym = xp.all(
        xp.abs(I - xp.swapaxes(I, -1, -2)) <= INERTIA_RTOL * scale[..., None, None], (-2, -1)
    )
    d, two, det = _minors(I)
    return xp.all(sym & (d[0] > 0) & (two[0] > 0) & (det > 0))


def nonnegative(x):
    """Whether every entry of `x` is >= 0 (a traced boolean)."""
    xp = _xp(x)
    return xp.all(xp.asarray(x) >= 0)


def positive(x):
    """Whether every entry of `x` is > 0 (a traced boolean)."""
    xp = _xp(x)
    return xp.all(xp.asarray(x) > 0)


def all_valid(checks: dict):
    """The conjunction of a `{name: bool}` dict (True when empty)."""
    ok = jnp.asarray(True)
    for v in checks.values():
        ok = ok & jnp.all(v)
    return ok
