"""Gradient-based optimization examples built on jaxsim and effectors (`examples`, at the top of
a checkout; not installed with the package: run from the repository root, `import examples`).

- `slew`: rest-to-rest reaction-wheel slew, piecewise-constant torques on the controller clock.
- `transfer`: finite-burn orbit targeting (burn start, duration, direction) in LEO.
- `inertia`: inertia estimation from noisy attitude measurements of a tumbling hub.

Each module has a problem set-up (`make_problem`), a residual/loss, and `solve(...)` returning
the optimised parameters and a result record (final errors, iterations, wall times). All solves
use optimistix and are compiled once per problem structure.
"""

from . import inertia as inertia, slew as slew, transfer as transfer
