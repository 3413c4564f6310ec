"""Shared test helpers: reference-data loading and spacecraft builders from Basilisk specs."""

import contextlib
import json
import logging
from pathlib import Path

import jax
import numpy as np

import effectors as fx
import jaxsim as js


DATA = Path(__file__).parent / "data"


def load_reference(name: str):
    """`(spec, npz)` of a Basilisk reference scenario stored in `tests/data` (see its README)."""
    spec = json.loads((DATA / f"{name}.json").read_text())
    ref = np.load(DATA / f"{name}.npz")
    return spec, ref


def hub_from_spec(spec) -> fx.Hub:
    h = spec["hub"]
    return fx.Hub(h["mHub_kg"], h["IHubPntBc_B_kgm2"], h["r_BcB_B_m"])


def gravity_from_spec(spec) -> tuple:
    g = spec.get("gravity")
    if not g:
        return ()
    return (fx.PointMassGravity(g["mu_m3ps2"], name="earth"),)


def initial_state(sc: fx.Spacecraft, spec, effector_states=None):
    ic = spec["initial_conditions"]
    return sc.init_state(
        ic["r_CN_N_m"],
        ic["v_CN_N_mps"],
        ic["sigma_BN"],
        ic["omega_BN_B_radps"],
        effector_states=effector_states,
    )


def simulate_spec(sc: fx.Spacecraft, spec, duration=None):
    """`jaxsim.simulate` of `sc` from the spec's initial conditions on its time grid (RK4 step,
    sample interval), over `duration` [s] (default: the spec's)."""
    t = spec["time"]
    duration = t["duration_s"] if duration is None else duration
    return js.simulate(sc, initial_state(sc, spec), duration, dt=t["step_s"],
                       sample_dt=t["sample_interval_s"])  # fmt: skip


def rel_err(a, b):
    """Per-component relative difference |a - b| / |b| (Basilisk's `isArrayEqualRelative`)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b) / np.abs(b)


@contextlib.contextmanager
def compile_log():
    """The names of the functions XLA compiles inside the `with` block (JAX's `jax_log_compiles`
    log), in order; the setting is restored on exit."""
    names = []

    class Collect(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            if msg.startswith("Compiling "):
                names.append(msg.split(" ")[1])

    handler = Collect()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    previous = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    try:
        yield names
    finally:
        jax.effects_barrier()
        jax.config.update("jax_log_compiles", previous)
        logger.removeHandler(handler)
