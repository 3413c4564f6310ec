r"""The diffrax core: `diffrax.diffeqsolve` on the model's flat state, with its step map after
every accepted step; used by the plain diffrax path, SDEs with diffrax solvers, and the segments
of the clocked driver.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from .._model._layout import StateLayout
from .._result._solution import zeros_counts
from .._solvers._ode import StepMappedSolver, for_adjoint


class DiffraxSegments:
    """The diffrax core: `diffeqsolve` on the model's flat state with its step map after every step.

    Built once per run (inside the trace) and used by every diffrax path: plain adaptive runs, SDEs
    with diffrax solvers, and the segments of the clocked driver. The terms see the pytree state
    (`drift(t, y, args)`, `diffusion(t, y, args)`); the solver carries one flat vector between
    steps and stages (`jaxsim._model._layout`); `StepMappedSolver` applies the model's `step_map` after
    each accepted step and counts its switches (`solver_state[1]`: totals, `[2]`: last step's).
    """

    def __init__(self, model, y0, dsolver, adjoint=None, *, drift=None, diffusion=None, path=None):
        self.model, self.adjoint = model, adjoint
        layout = StateLayout.of(y0)
        if layout is None:
            self.pack, self.unpack = (lambda y: y), (lambda v: v)
        else:
            self.pack, self.unpack = layout.flatten, layout.unflatten
        self.counts0 = zeros_counts(model, y0)
        term = dfx.ODETerm(self.flat_drift(model.drift if drift is None else drift))
        if diffusion is not None:
            m = model.noise_dim

            def g(t, v, a):
                gs = diffusion(t, self.unpack(v), a)
                leaves = [jnp.reshape(x, (-1, m)) for x in jtu.tree_leaves(gs)]
                return jnp.concatenate(leaves, axis=0)

            term = dfx.MultiTerm(term, dfx.ControlTerm(g, path))
        self.terms = term
        if dsolver is not None:
            inner = for_adjoint(dsolver, adjoint)
            self.solver = StepMappedSolver(inner, self.step_map, self.counts0)

    def flat_drift(self, drift):
        pack, unpack = self.pack, self.unpack
        return lambda t, v, a: pack(drift(t, unpack(v), a))

    def step_map(self, t, v):
        y, counts = self.model.step_map(t, self.unpack(v))
        return self.pack(y), counts

    def solve(self, t0, t1, dt0, y0, args, *, progress=None, **kwargs):
        """`diffeqsolve` from the pytree `y0`; `sol.ys` stay flat (see `states`). `progress`: a
        `jaxsim._drivers._progress.Reporter` fed by diffrax's progress meter, or None."""
        if self.adjoint is not None:
            kwargs["adjoint"] = self.adjoint
        if progress is not None:
            kwargs["progress_meter"] = progress.meter()
        return dfx.diffeqsolve(self.terms, self.solver, t0, t1, dt0, self.pack(y0), args, **kwargs)

    def states(self, ts, vs):
        """Saved flat states as pytrees in the step map's canonical form (dense output is in
        each step's starting coordinates)."""
        return jax.vmap(lambda t, v: self.model.step_map(t, self.unpack(v))[0])(ts, vs)


def _stages(dsolver) -> int:
    tab = getattr(dsolver, "tableau", None)
    if tab is None:
        return 1
    # FSAL schemes reuse the last stage of the previous step.
    n = len(tab.b_sol)
    return n - 1 if tab.fsal else n


GAIN_NAMES = ("pcoeff", "icoeff", "dcoeff")


def pid_controller(rtol, atol, gains, **kwargs) -> dfx.PIDController:
    """diffrax's `PIDController` with the request's tolerances and gains (`gains`: the checked
    `(pcoeff, icoeff[, dcoeff])`, static floats; `kwargs`: `dtmax`, `jump_ts`, `step_ts`): the one
    place where a diffrax controller is built from a request's settings."""
    return dfx.PIDController(rtol=rtol, atol=atol, **dict(zip(GAIN_NAMES, gains)), **kwargs)
