"""An ephemeris' time span checked before the run, not inside the program (issue 41).

`simulate` refuses a run whose times leave the records a `DE421Ephemeris` copied (concrete
times), fails it with `invalid_model` where they are traced, and builds programs without the
ephemeris' run-time check (a host callback): JAX's persistent cache stores them. Oracles: the
records' span against the run's times; JAX's compiler log (written, then read) in two fresh
processes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.engine.compilation.test_cache import fresh_env, python


pytest.importorskip("de421")

EPOCH = fx.astro.Epoch("2025-03-20T12:00:00Z")
T0 = EPOCH.tdb_seconds_past_j2000
HOUR = 3600.0  # [s]


def _model():
    eph = fx.astro.DE421Ephemeris(["moon"], T0, T0 + HOUR)
    gravity = [
        fx.PointMassGravity(fx.astro.EARTH, central=True),
        fx.ThirdBodyGravity.from_ephemeris(fx.astro.MOON, eph, EPOCH),
    ]
    sc = fx.Spacecraft(fx.Hub(500.0, np.eye(3) * 100.0), gravity=gravity)
    r0 = fx.astro.EARTH.radius_equatorial + 500e3  # [m]
    y0 = sc.init_state([r0, 0.0, 0.0], [0.0, np.sqrt(fx.astro.EARTH.mu / r0), 0.0])
    return sc, y0, eph


def test_a_run_past_the_records_is_refused_at_the_call():
    sc, y0, eph = _model()
    lo, hi = eph.span()
    past = hi - T0 + 10 * HOUR  # [s] after the epoch: beyond the last copied record
    with pytest.raises(ValueError, match=r"DE421Ephemeris \('moon'\).*outside the copied records"):
        js.simulate(sc, y0, past, dt=60.0, sample_dt=600.0)
    # Within the records: runs.
    sol = js.simulate(sc, y0, HOUR, dt=60.0, sample_dt=600.0)
    assert bool(sol.ok)


def test_traced_times_past_the_records_fail_the_run_with_invalid_model():
    sc, y0, eph = _model()
    _, hi = eph.span()
    inside, past = HOUR, hi - T0 + 10 * HOUR  # [s]

    @jax.jit
    def run(t1):
        sol = js.simulate(sc, y0, t1, num_steps=20, num_samples=3, throw=False)
        return sol.result == js.RESULTS.invalid_model, sol.ok

    bad, ok = run(jnp.asarray(past))
    assert bool(bad) and not bool(ok)
    bad, ok = run(jnp.asarray(inside))
    assert not bool(bad) and bool(ok)


def test_a_direct_call_outside_the_records_still_raises():
    _, _, eph = _model()
    _, hi = eph.span()
    with pytest.raises(Exception, match="outside the copied records"):
        jax.jit(lambda t: eph.position("moon", t))(hi + 40 * 86400.0)


def test_the_simulation_program_has_no_callback():
    sc, y0, _ = _model()
    jaxpr = jax.make_jaxpr(
        lambda y: js.simulate(sc, y, HOUR, dt=60.0, sample_dt=600.0, throw=False).ys
    )(y0)
    text = str(jaxpr)
    assert "callback" not in text


_LANDS = """
import logging, sys, jax
sys.path.insert(0, {root!r})
log = []
class H(logging.Handler):
    def emit(self, r):
        log.append(r.getMessage())
for name in ("jax._src.compiler", "jax._src.compilation_cache"):
    logging.getLogger(name).addHandler(H()); logging.getLogger(name).setLevel(logging.DEBUG)
import jaxsim as js
from tests.effectors.astro.test_ephemeris_span import HOUR, _model
sc, y0, _ = _model()
jax.block_until_ready(js.simulate(sc, y0, HOUR, dt=60.0, sample_dt=600.0).ys)
mine = [m for m in log if "_run_fixed" in m]
print("HOST_CALLBACKS" if any("host callbacks" in m for m in mine) else "NO_HOST_CALLBACKS",
      "WRITTEN" if any("Writing" in m for m in mine) else "NOT_WRITTEN",
      "HIT" if any("cache hit" in m for m in mine) else "MISS")
"""


def test_a_program_with_third_bodies_from_de421_is_written_to_the_cache(tmp_path):
    """Two fresh processes with `JAXSIM_CACHE=<folder>`: the first writes the program of a run
    with `ThirdBodyGravity` from DE421, the second reads it (before issue 41 the ephemeris' span
    check was a host callback in the program, and JAX wrote nothing)."""
    from tests.engine.compilation.test_cache import ROOT

    env = fresh_env(tmp_path, JAXSIM_CACHE=str(tmp_path / "cache"))
    code = _LANDS.format(root=str(ROOT))
    outs = [python(code, env).stdout.split() for _ in range(2)]
    assert outs[0] == ["NO_HOST_CALLBACKS", "WRITTEN", "MISS"], outs
    assert outs[1][2] == "HIT", outs
