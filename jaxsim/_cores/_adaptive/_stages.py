"""Embedded Runge-Kutta pairs as the core steps them: the tableau, unrolled or looped stages, dense-output stages."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Pair:
    """An explicit embedded pair: rows `a` (row 0 empty), weights `b`, error weights `e`
    (`b - b_hat`), nodes `c`, order `order` (the controller's exponent is `1/order`), first-same-
    as-last `fsal`, `ssal` (y1 is the last stage's argument), its dense output class, and the
    extra stages that dense output takes, `dense` (`(c_i, a_i)` each, a_i over every earlier
    stage; () when it takes the step's stages only, `Verner9`'s has four)."""

    name: str
    a: tuple
    b: tuple
    e: tuple
    c: tuple
    order: int
    fsal: bool
    ssal: bool
    interpolation: object
    dense: tuple = ()

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def rhs_per_step(self) -> int:
        """Drift evaluations per attempted step (FSAL pairs reuse the last stage)."""
        return self.stages - 1 if self.fsal else self.stages


@functools.cache
def pair_of(unrolled_cls) -> Pair:
    """The `Pair` of one of jaxsim's `AbstractUnrolledERK` classes (their tableaus)."""
    a, b, e, c = unrolled_cls._coeffs
    tab = unrolled_cls.tableau
    return Pair(
        unrolled_cls.__name__.removeprefix("Unrolled"), a, b, e, c, int(unrolled_cls._order),
        bool(tab.fsal), bool(tab.ssal), unrolled_cls.interpolation_cls,
        tuple(getattr(unrolled_cls, "_dense_rows", ())),
    )  # fmt: skip


def _combine(base, coeffs, ks):
    """`base + sum_j coeffs[j] ks[j]` over the nonzero coefficients (None: no base term)."""
    out = base
    for cj, kj in zip(coeffs, ks):
        if cj == 0.0:
            continue
        out = cj * kj if out is None else out + cj * kj
    return out


def _stage_time(t0, t1, h, ci):
    # c = 1 evaluates exactly at t1 (as diffrax does).
    return t1 if ci == 1.0 else t0 + ci * h


def _stages_unrolled(pair: Pair, f, t0, t1, y0, f0):
    """The stages of one step, written out: `(ks, y_last, f_last)`, `ks` a list of the stages
    times the step, `y_last` the last stage's argument and `f_last` its drift."""
    a, c = pair.a, pair.c
    h = (t1 - t0).astype(y0.dtype)
    fs = [f0]
    fi, yi = f0, y0
    for i in range(1, pair.stages):
        # y0 + sum_j (a_ij h) f_j: the newest drift enters through one product and one sum (the
        # scalars a_ij h are ready before it), where a_ij (h f_j) put two products after it.
        yi = y0
        for aij, fj in zip(a[i], fs):
            if aij != 0.0:
                yi = yi + (aij * h) * fj
        fi = f(_stage_time(t0, t1, t1 - t0, c[i]), yi)
        fs.append(fi)
    return [h * fj for fj in fs], yi, fi


def step_unrolled(pair: Pair, f, t0, t1, y0, f0):
    """One step from `(t0, y0)` to `t1` with `f0 = f(t0, y0)`: `(y1, error, k, f_last)`, `k` the
    stages times the step (shape `(s, n)`, what the interpolants take). Stages written out."""
    b, e = pair.b, pair.e
    ks, yi, fi = _stages_unrolled(pair, f, t0, t1, y0, f0)
    y1 = yi if pair.ssal else _combine(y0, b, ks)
    err = _combine(None, e, ks)
    err = jnp.zeros_like(y0) if err is None else err
    return y1, err, jnp.stack(ks), fi


def step_looped(pair: Pair, f, t0, t1, y0, f0):
    """`step_unrolled` with the stages in a `lax.fori_loop` over the tableau's rows (the drift
    traced once). Stage i combines the stages with the dense row `a[i]` (zeros past i)."""
    s = pair.stages
    amat = _dense_a(pair)
    cvec = np.asarray(pair.c, dtype=float)
    h = (t1 - t0).astype(y0.dtype)
    k0 = jnp.zeros((s,) + y0.shape, y0.dtype).at[0].set(h * f0)

    def stage(i, carry):
        ks, _ = carry
        yi = y0 + jnp.asarray(amat)[i] @ ks
        ci = jnp.asarray(cvec)[i]
        ti = jnp.where(ci == 1.0, t1, t0 + ci * (t1 - t0))
        fi = f(ti, yi)
        return ks.at[i].set(h * fi), fi

    ks, f_last = jax.lax.fori_loop(1, s, stage, (k0, f0))
    y1 = y0 + jnp.asarray(pair.b) @ ks
    err = jnp.asarray(pair.e) @ ks
    return y1, err, ks, f_last


def dense_stages(pair: Pair, f, t0, t1, y0, ks):
    """The stages `ks` of a step (a tuple of vectors or an `(s, n)` array) with the extra stages
    of the pair's dense output appended (`pair.dense`; the same `ks` when it has none)."""
    if not pair.dense:
        return ks
    stacked = not isinstance(ks, tuple)
    kl = list(ks)
    h = (t1 - t0).astype(y0.dtype)
    for ci, row in pair.dense:
        kl.append(h * f(_stage_time(t0, t1, t1 - t0, ci), _combine(y0, row, kl)))
    return jnp.stack(kl) if stacked else tuple(kl)


def _dense_a(pair) -> np.ndarray:
    """The tableau's `a` as an `(s, s)` array (zeros past each row)."""
    amat = np.zeros((pair.stages, pair.stages))
    for i, row in enumerate(pair.a):
        amat[i, : len(row)] = row
    return amat
