"""Trajectory optimization: problems over pytrees of decision variables, their transcription
(free initial and final times, running costs, single and multiple shooting, phase linkage) and solvers (SciPy, IPOPT, and a pure-JAX solver that runs under `vmap`).
Guide: "Trajectory optimization".

- `Problem` / `Problem.combined`: objective, bounds, equality and inequality constraints; every
  value and Jacobian from one compiled call.
- `RunningCost`, `shoot` (free `t0`/`t1` through `simulate(..., num_steps=)`), `interior_nodes`,
  `linkage`: transcription; `collocate` (Hermite-Simpson collocation of any model's drift),
  `mesh_errors`, `refine_mesh`, `resample`: direct collocation with mesh refinement.
- `solve_scipy` (`SLSQP`, `trust-constr`), `solve_ipopt` (`cyipopt`, the `optimize` extra),
  `solve_jax` (augmented Lagrangian, projected BFGS; `jit`/`vmap`).
- `OptimizeResult`, `STATUS`: one result for every solver (converged / infeasible / iteration
  limit / failed, violation, multipliers, iteration log).
- `problems`: published reference problems (Bryson & Ho's maximum-radius orbit transfer).
"""

from . import problems as problems
from ._alm import solve_jax as solve_jax
from ._collocation import (
    Collocated as Collocated,
    collocate as collocate,
    mesh_errors as mesh_errors,
    refine_mesh as refine_mesh,
    resample as resample,
)
from ._host_solvers import (
    cyipopt_available as cyipopt_available,
    solve_ipopt as solve_ipopt,
    solve_scipy as solve_scipy,
)
from ._problem import HostEvaluator as HostEvaluator, Problem as Problem
from ._result import STATUS as STATUS, OptimizeResult as OptimizeResult
from ._transcription import (
    RunningCost as RunningCost,
    Shot as Shot,
    interior_nodes as interior_nodes,
    linkage as linkage,
    shoot as shoot,
)


__all__ = [
    "STATUS",
    "Collocated",
    "HostEvaluator",
    "OptimizeResult",
    "Problem",
    "RunningCost",
    "Shot",
    "collocate",
    "cyipopt_available",
    "interior_nodes",
    "linkage",
    "mesh_errors",
    "problems",
    "refine_mesh",
    "resample",
    "shoot",
    "solve_ipopt",
    "solve_jax",
    "solve_scipy",
]
