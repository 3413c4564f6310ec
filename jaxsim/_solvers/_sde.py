r"""SDE solvers for $d\mathbf y = \mathbf f(t,\mathbf y)\,dt + G(t,\mathbf y)\,d\mathbf W$.

The diffusion $G$ is a pytree like `y` whose leaves have shape `leaf.shape + (m,)` (`m` =
`model.noise_dim` independent Wiener processes). One step $t_n \to t_n + h$ receives the Wiener
increments $\Delta W \sim \mathcal N(0, h I_m)$ and, for schemes that need it, a second independent
Gaussian $\Delta Z \sim \mathcal N(0, h I_m)$ (Basilisk's `stochasticNoiseGenerator` convention), with
$I_{(1,0)}/h = \int_{t_n}^{t_n+h}(W_s - W_{t_n})\,ds / h = (\Delta W + \Delta Z/\sqrt3)/2$.

Fixed step (`EulerMaruyama`, `Heun`, `Milstein`, `SRA1`) run in jaxsim's `lax.scan` SDE driver
(`jaxsim._drivers._sde`); `ShARK` wraps `diffrax.ShARK` for adaptive steps on additive noise.

| solver | strong | weak | calculus | noise structure |
| --- | --- | --- | --- | --- |
| `EulerMaruyama` | 0.5 | 1 | Ito | any |
| `Heun` | 0.5 (1 commutative) | 1 | Stratonovich | any |
| `Milstein` | 1.0 | 1 | Ito | commutative ($L^j g_k = L^k g_j$; diagonal and scalar noise are) |
| `SRA1` | 1.5 | 2 | Ito = Stratonovich | additive ($G$ independent of `y`) |
| `ShARK` (adaptive) | 1.5 | 2 | Ito = Stratonovich | additive |

**Reference:** Kloeden & Platen, *Numerical Solution of Stochastic Differential Equations*, Springer
1992 (EM, Milstein, Heun); Rößler, "Runge-Kutta methods for the strong approximation of solutions of
stochastic differential equations", SIAM J. Numer. Anal. 48(3), 2010, doi:10.1137/09076636X (SRA1);
Foster, dos Reis & Strange, arXiv:2210.17543 (ShARK).
"""

import math
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ._ode import AbstractSolver


def _gdw(g, dW):
    """Contract each diffusion leaf `(..., m)` with the increments `(m,)`.

    A broadcast multiply-and-sum rather than `@`: under `vmap` a tiny batched `dot_general` is a
    slow library call on CPU, while this fuses with the surrounding elementwise work.
    """
    return jtu.tree_map(lambda gl: jnp.sum(gl * dW, axis=-1), g)


def _axpy(y, *terms):
    """`y + sum(c * x)` leafwise, for pairs `(c, x)`; `x` pytrees like `y`."""
    out = y
    for c, x in terms:
        out = jtu.tree_map(lambda u, v, c=c: u + c * v, out, x)
    return out


def _add(a, b):
    return jtu.tree_map(lambda u, v: u + v, a, b)


class AbstractSDESolver(AbstractSolver):
    r"""A fixed-step SDE scheme for jaxsim's SDE driver.

    Class attributes: `calculus` (`"ito"`/`"stratonovich"`), `noise` (`"general"`,
    `"commutative"`, `"additive"`: the structure of $G$ the scheme converges for), `strong_order`,
    `weak_order`, `uses_dZ` (needs the second Gaussian $\Delta Z$), `num_drift` and `num_diffusion`
    (evaluations per step).
    """

    adaptive: ClassVar[bool] = False
    stochastic: ClassVar[bool] = True
    calculus: ClassVar[str]
    noise: ClassVar[str]
    strong_order: ClassVar[float]
    weak_order: ClassVar[float]
    uses_dZ: ClassVar[bool] = False
    num_drift: ClassVar[int]
    num_diffusion: ClassVar[int]

    def step(self, f, g, t, y, h, dW, dZ, args):
        """One step of size `h` from `(t, y)` with increments `dW` (and `dZ`), each shape `(m,)`.

        `f(t, y, args)` returns a pytree like `y`; `g(t, y, args)` a pytree like `y` with leaves
        `leaf.shape + (m,)`.
        """
        raise NotImplementedError


class EulerMaruyama(AbstractSDESolver):
    r"""Euler-Maruyama (Basilisk `svStochasticIntegratorMayurama`), Ito, any noise structure:
    $\mathbf y_{n+1} = \mathbf y_n + \mathbf f(t_n, \mathbf y_n)h + G(t_n, \mathbf y_n)\Delta W$.

    Strong order 0.5 (1.0 for additive noise), weak order 1.
    """

    calculus = "ito"
    noise = "general"
    strong_order = 0.5
    weak_order = 1.0
    num_drift = 1
    num_diffusion = 1

    def step(self, f, g, t, y, h, dW, dZ, args):
        return _axpy(y, (h, f(t, y, args)), (1.0, _gdw(g(t, y, args), dW)))

    def to_diffrax(self):
        return dfx.Euler()


class Heun(AbstractSDESolver):
    r"""Stochastic Heun, Stratonovich, any noise structure (Basilisk `svStochasticIntegratorEulerHeun`).

    $\bar{\mathbf y} = \mathbf y_n + \mathbf f_1 h + G_1\Delta W$,
    $\mathbf y_{n+1} = \mathbf y_n + \frac h2(\mathbf f_1 + \mathbf f(t_{n+1}, \bar{\mathbf y}))
    + \frac12(G_1 + G(t_{n+1}, \bar{\mathbf y}))\Delta W$ (the predictor includes the drift and the
    drift is trapezoidal: `diffrax.Heun` on `MultiTerm(drift, diffusion)`, not `diffrax.EulerHeun`).

    Converges to the **Stratonovich** solution: for multiplicative noise this differs from the Ito
    solution by the drift correction $\frac12\sum_k (\partial g_k/\partial y)\, g_k$.
    """

    calculus = "stratonovich"
    noise = "general"
    strong_order = 0.5
    weak_order = 1.0
    num_drift = 2
    num_diffusion = 2

    def step(self, f, g, t, y, h, dW, dZ, args):
        f1, gw1 = f(t, y, args), _gdw(g(t, y, args), dW)
        ybar = _axpy(y, (h, f1), (1.0, gw1))
        f2, gw2 = f(t + h, ybar, args), _gdw(g(t + h, ybar, args), dW)
        return _axpy(y, (0.5 * h, _add(f1, f2)), (0.5, _add(gw1, gw2)))

    def to_diffrax(self):
        return dfx.Heun()


class Milstein(AbstractSDESolver):
    r"""Ito Milstein scheme for commutative noise, with exact Jacobian-vector products.

    $$\mathbf y_{n+1} = \mathbf y_n + \mathbf f h + \sum_k \mathbf g_k\Delta W_k
    + \tfrac12\sum_{j,k}(L^j\mathbf g_k)(\Delta W_j\Delta W_k - \delta_{jk}h),\qquad
    L^j\mathbf g_k = \frac{\partial\mathbf g_k}{\partial\mathbf y}\mathbf g_j,$$

    all at $(t_n, \mathbf y_n)$. The $m$ directional derivatives are one batched `jax.jvp` of the
    diffusion (Basilisk's `RKMil` uses a finite-difference support point instead; same order).

    **Assumptions and limitations:** the product form of the iterated integrals is exact only for
    **commutative** noise ($L^j\mathbf g_k = L^k\mathbf g_j$): scalar noise, diagonal noise (each
    source drives its own state components, e.g. independent noise states), additive noise. For
    non-commutative noise the Lévy areas are missing and the strong order drops to 0.5; `simulate`
    checks commutativity at `y0` when the model and `y0` are concrete. Ito calculus; strong order 1.0,
    weak order 1.0. The diffusion must be differentiable in `y`.
    """

    calculus = "ito"
    noise = "commutative"
    strong_order = 1.0
    weak_order = 1.0
    num_drift = 1
    num_diffusion = 2

    def step(self, f, g, t, y, h, dW, dZ, args):
        g1, Lg = milstein_jvps(g, t, y, args)
        m = dW.shape[0]
        M = 0.5 * (jnp.outer(dW, dW) - h * jnp.eye(m, dtype=dW.dtype))
        # sum_{j,k} L[j, ..., k] M[j, k], written as broadcasts (see `_gdw`).
        corr = jtu.tree_map(
            lambda L: jnp.sum(L * M.reshape((m,) + (1,) * (L.ndim - 2) + (m,)), axis=(0, -1)), Lg
        )
        return _axpy(y, (h, f(t, y, args)), (1.0, _gdw(g1, dW)), (1.0, corr))

    def to_diffrax(self):
        return dfx.ItoMilstein()


def milstein_jvps(g, t, y, args):
    r"""`(G, LG)` with `LG` leaves `(m, *leaf.shape, m)`: `LG[j, ..., k]` $= (\partial g_k/\partial y)\, g_j$."""
    g1 = g(t, y, args)
    cols = jtu.tree_map(lambda gl: jnp.moveaxis(gl, -1, 0), g1)
    gy = lambda yy: g(t, yy, args)
    Lg = jax.vmap(lambda v: jax.jvp(gy, (y,), (v,))[1])(cols)
    return g1, Lg


class SRA1(AbstractSDESolver):
    r"""Rößler's SRA1, strong order 1.5 for **additive** noise (Basilisk `svStochasticIntegratorSRA1`).

    With $\chi = I_{(1,0)}/h = (\Delta W + \Delta Z/\sqrt3)/2$ and the tableau $A_{10} = 3/4$,
    $B_{10} = 3/2$, $\alpha = (1/3, 2/3)$, $c^{(0)} = (0, 3/4)$, $c^{(1)} = (1, 0)$,
    $\beta^{(1)} = (1, 0)$, $\beta^{(2)} = (-1, 1)$:

    $$H_2 = \mathbf y_n + \tfrac34 h\,\mathbf f(t_n, \mathbf y_n) + \tfrac32 G(t_n + h)\chi,$$

    $$\mathbf y_{n+1} = \mathbf y_n + h\big(\tfrac13\mathbf f(t_n, \mathbf y_n) + \tfrac23\mathbf f(t_n + \tfrac34h, H_2)\big)
    + G(t_n + h)\Delta W + \big(G(t_n) - G(t_n + h)\big)\chi.$$

    **Assumptions and limitations:** $G$ may depend on time but not on `y` (additive noise);
    `simulate` raises `ValueError` when the diffusion is detectably state-dependent. Needs the second
    Gaussian $\Delta Z$ (drawn from the key, or prescribed with `dZ=`). Weak order 2.
    """

    calculus = "ito"
    noise = "additive"
    strong_order = 1.5
    weak_order = 2.0
    uses_dZ = True
    num_drift = 2
    num_diffusion = 2

    def step(self, f, g, t, y, h, dW, dZ, args):
        chi = 0.5 * (dW + dZ / math.sqrt(3.0))
        g_n, g_h = g(t, y, args), g(t + h, y, args)
        f1 = f(t, y, args)
        H2 = _axpy(y, (0.75 * h, f1), (1.5, _gdw(g_h, chi)))
        f2 = f(t + 0.75 * h, H2, args)
        dg = jtu.tree_map(lambda a, b: a - b, g_n, g_h)
        return _axpy(
            y,
            (h / 3.0, f1),
            (2.0 * h / 3.0, f2),
            (1.0, _gdw(g_h, dW)),
            (1.0, _gdw(dg, chi)),
        )

    def to_diffrax(self):
        return dfx.SRA1()


class ShARK(AbstractSolver):
    r"""Adaptive additive-noise SDE solver: `diffrax.ShARK` (Foster, dos Reis & Strange 2023).

    Strong order 1.5 for additive noise, with an embedded error estimate driving a PID controller
    (`rtol`, `atol` required). The Brownian motion is a `diffrax.VirtualBrownianTree` carrying the
    space-time Lévy area. Noise must be additive (checked as for `SRA1`).
    """

    adaptive: ClassVar[bool] = True
    stochastic: ClassVar[bool] = True
    calculus: ClassVar[str] = "stratonovich"
    noise: ClassVar[str] = "additive"
    strong_order: ClassVar[float] = 1.5
    uses_dZ: ClassVar[bool] = True

    def to_diffrax(self):
        return dfx.ShARK()
