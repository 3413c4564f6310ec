"""SDE driver and solvers: Basilisk prescribed-noise replay, ensemble moments, strong/weak orders,
reproducibility, pathwise gradients, validation."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.helpers import load_reference


# Prescribed-noise replay: same increments, same recursion; only float64 round-off differs
# (Basilisk's own replay check reports 4.4e-16).
REPLAY_ATOL = 1e-12
# Ensemble statistics: |estimate - exact| within this many standard errors (fixed key, so the
# check is deterministic; 3 SE is the acceptance criterion).
N_SE = 3.0
# Strong-order slopes: within 0.15 of the theoretical order (Monte Carlo error of the estimated
# slope with 1000 paths and four step sizes is about 0.05).
SLOPE_TOL = 0.15
# Weak order (drift recursion of the mean), slope tolerance: the error is deterministic, the slope
# deviates from the asymptotic order only by higher-order terms at the coarsest step.
WEAK_SLOPE_TOL = 0.1
# Pathwise gradient vs central finite differences (step 1e-5 relative: truncation ~1e-10,
# round-off ~1e-11), relative.
GRAD_RTOL = 1e-6
# ShARK (adaptive, rtol=atol=1e-4) vs SRA1 at dt = 2^-9 s on one Brownian tree: both converge
# pathwise (strong order 1.5) on the same path; measured difference 1.7e-5, dominated by ShARK's
# local tolerance (SRA1 at 2^-9 is within 1.4e-6 of SRA1 at 2^-12).
PATHWISE_ATOL = 1e-4

SPEC, REF = load_reference("stochastic_ou")
TAU = SPEC["model"]["tau_s"]  # [s]
SIGMA = SPEC["model"]["sigma_stationary"]  # [-]
X0 = SPEC["model"]["x0"]
DT = SPEC["time"]["step_s"]  # [s]
T1 = SPEC["time"]["duration_s"]  # [s]


def ou_spacecraft(n, tau=TAU, sigma=SIGMA):
    """Basilisk's container: an inert 1 kg hub (identity inertia, at rest, no gravity) + OU states."""
    noise = fx.MeanRevertingNoise(tau=tau, sigma=sigma, x0=X0 * jnp.ones(n), name="ou")
    return fx.Spacecraft(fx.Hub(1.0, jnp.eye(3)), state_effectors=(noise,))


class GBM(js.AbstractDynamicObject):
    """Scalar geometric Brownian motion dx = a x dt + b x dW (Ito), exact x0 exp((a - b^2/2)t + b W)."""

    a: float
    b: float
    name: str = eqx.field(static=True)

    def __init__(self, a, b, name="gbm"):
        self.a, self.b, self.name = a, b, name

    def init_state(self):
        return jnp.ones(1)

    def drift(self, t, y, args):
        return self.a * y

    @property
    def noise_dim(self):
        return 1

    def diffusion(self, t, y, args):
        return self.b * y[:, None]


class OU(js.AbstractDynamicObject):
    """The same OU SDE without a spacecraft around it (cheap to compile): dx = -x/tau dt + g dW."""

    tau: float
    sigma: float
    name: str = eqx.field(static=True, default="ou")

    def init_state(self):
        return X0 * jnp.ones(1)

    def drift(self, t, y, args):
        return -y / self.tau

    @property
    def noise_dim(self):
        return 1

    def diffusion(self, t, y, args):
        return self.sigma * jnp.sqrt(2.0 / self.tau) * jnp.ones((1, 1))


class NonCommutative(js.AbstractDynamicObject):
    """dx1 = dW1, dx2 = x1 dW2: L^1 g_2 = (0, 1) != L^2 g_1 = 0 (non-commutative noise)."""

    name: str = eqx.field(static=True, default="nc")

    def init_state(self):
        return jnp.ones(2)

    def drift(self, t, y, args):
        return jnp.zeros(2)

    @property
    def noise_dim(self):
        return 2

    def diffusion(self, t, y, args):
        return jnp.array([[1.0, 0.0], [0.0, 1.0]]) * jnp.array([1.0, y[0]])


class Deterministic(js.AbstractDynamicObject):
    name: str = eqx.field(static=True, default="det")

    def init_state(self):
        return jnp.ones(1)

    def drift(self, t, y, args):
        return -y


# --------------------------------------------------------------------------------------------------
# Basilisk prescribed-noise replay


@pytest.mark.parametrize("scheme", ["Mayurama", "SRA1"])
def test_prescribed_noise_replay(scheme):
    solver = js.EulerMaruyama() if scheme == "Mayurama" else js.SRA1()
    sc = ou_spacecraft(5)
    sol = js.simulate(
        sc, sc.init_state(), T1, dt=DT, sample_dt=DT, solver=solver,
        dW=REF["prescribed_dW"], dZ=REF["prescribed_dZ"], outputs=False,
    )  # fmt: skip
    np.testing.assert_allclose(sol.ts, REF["prescribed_t"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        sol.ys["ou"], REF[f"prescribed_x_{scheme}"], rtol=0, atol=REPLAY_ATOL,
        err_msg=f"{scheme} replay of Basilisk's prescribed increments",
    )  # fmt: skip
    # The inert hub does not move.
    assert float(jnp.max(jnp.abs(sol.ys["hub"]["r_BN_N"]))) == 0.0


# --------------------------------------------------------------------------------------------------
# Ensemble statistics (vmap over keys)

N_PATHS = 2000


@pytest.fixture(scope="module")
def ensembles():
    sc = ou_spacecraft(1)
    y0 = sc.init_state()
    keys = jr.split(jr.key(2024), N_PATHS)
    out = {}
    for name, solver in [("Mayurama", js.EulerMaruyama()), ("SRA1", js.SRA1())]:
        run = lambda k, solver=solver: js.simulate(
            sc, y0, T1, dt=DT, sample_dt=1.0, solver=solver, key=k, outputs=False
        ).ys["ou"][:, 0]
        out[name] = np.asarray(jax.jit(jax.vmap(run))(keys))
    return out


@pytest.mark.parametrize("scheme", ["Mayurama", "SRA1"])
def test_ensemble_moments_vs_exact_ou(ensembles, scheme):
    x = ensembles[scheme]  # (N_PATHS, 6) at t = 0..5 s
    t = np.arange(6.0)
    mean_exact = X0 * np.exp(-t / TAU)
    var_exact = SIGMA**2 * (1 - np.exp(-2 * t / TAU))
    mean, var = x.mean(0), x.var(0, ddof=1)
    se_mean = np.sqrt(var_exact[1:] / N_PATHS)
    se_var = var_exact[1:] * np.sqrt(2.0 / (N_PATHS - 1))
    assert np.all(np.abs(mean[1:] - mean_exact[1:]) <= N_SE * se_mean), (mean, mean_exact)
    assert np.all(np.abs(var[1:] - var_exact[1:]) <= N_SE * se_var), (var, var_exact)
    np.testing.assert_array_equal(x[:, 0], X0)


@pytest.mark.parametrize("scheme", ["Mayurama", "SRA1"])
def test_ensemble_moments_vs_basilisk_ensemble(ensembles, scheme):
    """Two independent 2000-path estimates (ours, Basilisk's) agree within 3 SE of their difference."""
    x = ensembles[scheme]
    n_bsk = SPEC["ensemble"]["n_paths"]
    for i, t in enumerate([1.0, 2.0, 5.0]):
        ref = SPEC["stats_at_fixed_times"][f"{t}"]
        var = ref["var_exact_sde"]
        k = int(t)
        se = np.sqrt(var / N_PATHS + var / n_bsk)
        assert abs(x[:, k].mean() - ref[f"mean_{scheme}"]) <= N_SE * se
        se_v = var * np.sqrt(2.0 / (N_PATHS - 1) + 2.0 / (n_bsk - 1))
        assert abs(x[:, k].var(ddof=1) - ref[f"var_{scheme}"]) <= N_SE * se_v


# --------------------------------------------------------------------------------------------------
# Strong and weak order


def _strong_errors(solver, a, b, stratonovich=False, n_paths=1000, fine=2**8, levels=(3, 4, 5, 6)):
    """Mean |X_T - x(T)| at T = 1 s for dt = 2^-k, all from one set of fine increments per path."""
    model = GBM(a, b)
    dW_fine = jnp.sqrt(1.0 / fine) * jr.normal(jr.key(7), (n_paths, fine, 1))
    W_T = dW_fine.sum(axis=(1, 2))
    drift_exp = a if stratonovich else a - 0.5 * b**2
    exact = jnp.exp(drift_exp + b * W_T)
    errs = []
    for k in levels:
        n = 2**k
        dW = dW_fine.reshape(n_paths, n, fine // n, 1).sum(axis=2)
        run = lambda d: js.simulate(model, jnp.ones(1), 1.0, dt=1.0 / n, solver=solver, dW=d,
                                    outputs=False).ys[-1, 0]  # fmt: skip
        xT = jax.vmap(run)(dW)
        errs.append(float(jnp.mean(jnp.abs(xT - exact))))
    hs = 2.0 ** -np.asarray(levels, float)
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    return slope, errs


@pytest.mark.parametrize(
    "solver, order, strat",
    [(js.EulerMaruyama(), 0.5, False), (js.Milstein(), 1.0, False), (js.Heun(), 1.0, True)],
)
def test_strong_order_gbm(solver, order, strat):
    """Heun converges to the Stratonovich solution with strong order 1 for scalar noise."""
    slope, errs = _strong_errors(solver, a=1.5, b=1.0, stratonovich=strat)
    assert abs(slope - order) <= SLOPE_TOL, (type(solver).__name__, slope, errs)


@pytest.mark.parametrize("solver, order", [(js.EulerMaruyama(), 1.0), (js.SRA1(), 2.0)])
def test_weak_order_ou_mean(solver, order):
    """For linear drift and additive noise the mean of the scheme is its noise-free recursion
    (dW = dZ = 0), so the weak error of E[x_T] is computed exactly; an ensemble confirms it."""
    model = OU(TAU, SIGMA)
    errs, hs = [], [0.1, 0.05, 0.025, 0.0125]
    for h in hs:
        n = round(1.0 / h)
        z = jnp.zeros((n, 1))
        sol = js.simulate(model, model.init_state(), 1.0, dt=h, solver=solver, dW=z, dZ=z,
                          outputs=False)  # fmt: skip
        errs.append(abs(float(sol.ys[-1, 0]) - X0 * np.exp(-1.0 / TAU)))
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(slope - order) <= WEAK_SLOPE_TOL, (slope, errs)


def test_ensemble_mean_equals_noise_free_recursion(ensembles):
    """Euler-Maruyama ensemble mean vs the exact mean of its recursion, (1 - h/tau)^n x0."""
    x = ensembles["Mayurama"]
    t = np.arange(1.0, 6.0)
    mean_rec = X0 * (1 - DT / TAU) ** np.round(t / DT)
    se = np.sqrt(x[:, 1:].var(0, ddof=1) / N_PATHS)
    assert np.all(np.abs(x[:, 1:].mean(0) - mean_rec) <= N_SE * se)


# --------------------------------------------------------------------------------------------------
# Reproducibility and Brownian modes


@pytest.fixture(scope="module")
def key_runs():
    model = OU(TAU, SIGMA)
    y0 = model.init_state()
    run = lambda key, sample_dt: (
        js.simulate(
            model,
            y0,
            1.0,
            dt=DT,
            sample_dt=sample_dt,
            solver=js.EulerMaruyama(),
            key=key,
            outputs=False,
        ).ys
    )
    return {
        "a": run(jr.key(1), 0.1),
        "a_again": run(jr.key(1), 0.1),
        "a_coarse": run(jr.key(1), 0.5),
        "b": run(jr.key(2), 0.1),
    }


def test_same_key_bit_identical(key_runs):
    np.testing.assert_array_equal(key_runs["a"], key_runs["a_again"])


def test_different_keys_differ(key_runs):
    assert np.all(np.asarray(key_runs["a"][1:] != key_runs["b"][1:]))


def test_path_independent_of_sample_spacing(key_runs):
    np.testing.assert_array_equal(key_runs["a"][::5], key_runs["a_coarse"])


def test_block_draws_equal_per_step_draws():
    """Key-mode increments drawn per sample interval (blocks) equal those drawn step by step (one
    sample interval longer than the block limit)."""
    model = OU(TAU, SIGMA)
    run = lambda sample_dt: js.simulate(model, model.init_state(), 0.6, dt=0.001,
                                        sample_dt=sample_dt, solver=js.SRA1(), key=jr.key(4),
                                        outputs=False).ys  # fmt: skip
    np.testing.assert_array_equal(run(0.1)[-1], run(0.6)[-1])


def test_legacy_uint32_key_matches_typed_key():
    model = OU(TAU, SIGMA)
    run = lambda k: js.simulate(model, model.init_state(), 0.1, dt=DT, solver=js.EulerMaruyama(),
                                key=k, outputs=False).ys  # fmt: skip
    np.testing.assert_array_equal(run(jr.key(5)), run(jr.PRNGKey(5)))


def test_shark_adaptive_matches_sra1_on_one_tree():
    sc = OU(TAU, SIGMA)
    y0 = sc.init_state()
    tree = dfx.VirtualBrownianTree(
        0.0, 1.0, 2**-10, (1,), jr.key(3), levy_area=dfx.SpaceTimeLevyArea
    )
    ts = np.linspace(0.0, 1.0, 5)
    shark = js.simulate(sc, y0, ts=ts, solver=js.ShARK(), key=jr.key(3), brownian=tree,
                        rtol=1e-4, atol=1e-4, outputs=False)  # fmt: skip
    sra1 = js.simulate(sc, y0, ts=ts, dt=2**-9, solver=js.SRA1(), key=jr.key(3), brownian=tree,
                       outputs=False)  # fmt: skip
    np.testing.assert_allclose(shark.ys, sra1.ys, rtol=0, atol=PATHWISE_ATOL)
    assert int(shark.stats["num_steps"]) > 4
    # The path is a real Brownian path, not a flat line.
    assert float(jnp.std(sra1.ys[:, 0] - X0 * jnp.exp(-jnp.asarray(ts) / TAU))) > 1e-3


# --------------------------------------------------------------------------------------------------
# Pathwise gradients (common random numbers)


def test_pathwise_gradient_vs_finite_differences():
    """d x(1 s) / d(tau, sigma) at a fixed key (common random numbers), through the Spacecraft."""
    key = jr.key(11)

    def x_final(p):
        sc = ou_spacecraft(1, tau=p[0], sigma=p[1])
        sol = js.simulate(sc, sc.init_state(), 1.0, dt=DT, solver=js.SRA1(), key=key, outputs=False)
        return sol.ys["ou"][-1, 0]

    p0 = jnp.array([TAU, SIGMA])
    g = jax.grad(x_final)(p0)
    for i in range(2):
        e = jnp.zeros(2).at[i].set(1e-5 * p0[i])
        fd = (x_final(p0 + e) - x_final(p0 - e)) / (2 * e[i])
        np.testing.assert_allclose(g[i], fd, rtol=GRAD_RTOL, err_msg=["tau", "sigma"][i])
    assert np.all(np.abs(np.asarray(g)) > 1e-3)


# --------------------------------------------------------------------------------------------------
# Validation


def test_sde_solver_on_model_without_diffusion():
    with pytest.raises(ValueError, match="noise_dim"):
        js.simulate(
            Deterministic(), jnp.ones(1), 1.0, dt=0.1, solver=js.EulerMaruyama(), key=jr.key(0)
        )


@pytest.mark.parametrize("solver", [js.Tsit5(), js.RK4()])
def test_ode_solver_with_key_on_sde(solver):
    sc = ou_spacecraft(1)
    with pytest.raises(ValueError, match="ODE solver"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=solver, key=jr.key(0), rtol=1e-6,
                    atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("solver", [js.SRA1(), js.ShARK()])
def test_additive_solver_rejects_state_dependent_diffusion(solver):
    with pytest.raises(ValueError, match="additive"):
        js.simulate(GBM(1.0, 0.5), jnp.ones(1), 1.0, dt=0.1, solver=solver, key=jr.key(0))


def test_milstein_rejects_non_commutative_noise():
    with pytest.raises(ValueError, match="commutative"):
        js.simulate(NonCommutative(), jnp.ones(2), 1.0, dt=0.1, solver=js.Milstein(), key=jr.key(0))


def test_sde_solver_needs_key_or_dW():
    sc = ou_spacecraft(1)
    with pytest.raises(ValueError, match="key"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.EulerMaruyama())
    with pytest.raises(ValueError, match="not both"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.EulerMaruyama(), key=jr.key(0),
                    dW=jnp.zeros((10, 1)))  # fmt: skip


def test_prescribed_increments_shape_and_dZ():
    sc = ou_spacecraft(1)
    with pytest.raises(ValueError, match="dW"):
        js.simulate(
            sc, sc.init_state(), 1.0, dt=0.1, solver=js.EulerMaruyama(), dW=jnp.zeros((9, 1))
        )
    with pytest.raises(ValueError, match="dZ"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.SRA1(), dW=jnp.zeros((10, 1)))


def test_adaptive_sde_needs_tolerances_and_fixed_rejects_them():
    sc = ou_spacecraft(1)
    with pytest.raises(ValueError, match="rtol"):
        js.simulate(sc, sc.init_state(), 1.0, solver=js.ShARK(), key=jr.key(0))
    with pytest.raises(ValueError, match="rtol"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.EulerMaruyama(), key=jr.key(0),
                    rtol=1e-3, atol=1e-3)  # fmt: skip


def test_bad_brownian_mode():
    sc = ou_spacecraft(1)
    with pytest.raises(ValueError, match="brownian"):
        js.simulate(sc, sc.init_state(), 1.0, dt=0.1, solver=js.EulerMaruyama(), key=jr.key(0),
                    brownian="sobol")  # fmt: skip
