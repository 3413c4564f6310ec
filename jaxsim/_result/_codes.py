"""Result codes of a run: diffrax's, plus the causes only jaxsim's drivers can report.

`Solution.result` is a `jaxsim.RESULTS` item on every path. `jaxsim.RESULTS` extends
`diffrax.RESULTS` (same codes and messages for diffrax's causes, e.g. `max_steps_reached`,
`nonfinite`), with:

- `too_many_events`: more event firings (or event re-solves) than `max_events`;
- `event_location_failed`: the root finder could not locate an event's crossing time (or the
  check grid of a step could not resolve a condition, see `jaxsim._events._guard`);
- `zeno`: event times accumulate at a finite time (`t_final` is that time);
- `event_condition_nonfinite`: an event condition evaluated to NaN/inf;
- `nonfinite_state`: the continuous state became NaN/inf (a model or step-size problem; the
  solve itself did not report it, e.g. a fixed-step run), or entered a singular region (a
  spacecraft's CoM inside its `min_radius` or a spherical-harmonic body's radius);
- `invalid_model`: a traced parameter or initial state is out of its physical range (a model
  changed after construction by `eqx.tree_at`, a dispersion or `vmap`): `model.validity(y0)`
  names the failing checks, the `throw=True` error the first of them (`jaxsim._result._validity`);
- `invalid_times`: traced times of a free horizon out of order (`t1 <= t0`, samples `ts` not
  non-decreasing in [t0, t1]): the states are NaN from `t0` on.

Compare with `jaxsim.RESULTS` items (`sol.result == js.RESULTS.successful`); a diffrax item is
promoted with `js.RESULTS.promote(dfx_item)`. `Solution.ok` and `Solution.message` read them.
"""

import diffrax as dfx
import jax.numpy as jnp


class RESULTS(dfx.RESULTS):
    too_many_events = (
        "simulate: more event firings (or event re-solves) were needed than `max_events`; raise "
        "`max_events` (the event log has that fixed size; nothing is truncated silently)."
    )
    event_location_failed = (
        "simulate: the root finder could not locate an event's crossing time; check that the "
        "event condition is continuous near the crossing, or give another `root_finder`."
    )
    zeno = (
        "simulate: zeno: event times accumulate at a finite time (Zeno behaviour: infinitely many "
        "firings before it, e.g. a bouncing ball coming to rest, or a state resting on an event "
        "surface that its reset cannot leave); the run stops at the accumulation time, "
        "`Solution.t_final`; the event log holds the firings before it."
    )
    event_condition_nonfinite = (
        "simulate: an event condition evaluated to NaN/inf; the run stops at the last point "
        "where it was finite (`Solution.t_final`, within `event_tol`); check the condition."
    )
    nonfinite_state = (
        "simulate: the state became non-finite (NaN/inf); check the model's parameters and the "
        "step size."
    )
    invalid_times = (
        "simulate: the run's (traced) times are out of order: `t1` must be > `t0`, and the "
        "samples `ts` non-decreasing in [t0, t1] and ending at t1."
    )
    invalid_model = (
        "simulate: invalid_model: a parameter or initial state of the model is out of its "
        "physical range (e.g. a mass or inertia <= 0, an inertia not positive definite or "
        "violating the triangle inequality, a fuel load outside [0, max], a negative stiffness, "
        "damping, friction or radius), set after construction (eqx.tree_at, a dispersion, vmap); "
        "`model.validity(y0)` names the failing checks."
    )


# diffrax codes that come from optimistix's root finder (an event whose time could not be located).
_ROOT_FINDER_CODES = (
    dfx.RESULTS.nonlinear_max_steps_reached,
    dfx.RESULTS.nonlinear_divergence,
    dfx.RESULTS.singular,
    dfx.RESULTS.breakdown,
    dfx.RESULTS.stagnation,
    dfx.RESULTS.conlim,
)


def promote(result, *, events: bool = False):
    """A diffrax result as a `jaxsim.RESULTS` item (root-finder codes name the event when `events`)."""
    if isinstance(result, type(RESULTS.successful)) and result._enumeration is RESULTS:
        return result
    out = RESULTS.promote(result)
    if events:
        failed = jnp.asarray(False)
        for code in _ROOT_FINDER_CODES:
            failed = failed | (result == code)
        out = RESULTS.where(failed, RESULTS.event_location_failed, out)
    return out


def message(result) -> str:
    """The message of a concrete result code ("" for success)."""
    return RESULTS[result]
