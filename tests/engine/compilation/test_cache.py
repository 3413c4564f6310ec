"""JAX's persistent compilation cache, opt-in (`jaxsim.enable_cache`, `JAXSIM_CACHE`), and
`throw=True` checked on the host after a top-level run (`jaxsim._result._host_checks`), which keeps host
callbacks out of the program so that JAX's cache can store it.

Oracles: the JAX settings of a fresh process before and after `import jaxsim` and after each way
of turning the cache on (subprocesses, one per configuration); JAX's own compiler log (what was
written to and read from its cache); the error the in-program check raises (under `jaxsim.jit`)
against the one raised on the host.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


ROOT = Path(__file__).resolve().parents[3]
I_HUB = np.diag([10.0, 20.0, 30.0])
JAX_DEFAULT_MIN_COMPILE_TIME_S = 1.0  # jax_persistent_cache_min_compile_time_secs, JAX's default


def make_sc(mass=100.0, name="sc", wheels=True, torque_B=(0.01, 0.0, -0.02)):
    state = (fx.ReactionWheels(np.eye(3), [0.1, 0.1, 0.1], name="wheels"),) if wheels else ()
    return fx.Spacecraft(
        fx.Hub(mass, I_HUB, [0.0, 0.05, 0.1]),
        state_effectors=state,
        dynamic_effectors=(fx.ExtForceTorque(torque_B=list(torque_B), name="ext"),),
        name=name,
    )


def y0_of(sc):
    return sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])


def run(sc, **kw):
    opts = {"dt": 0.5, "sample_dt": 1.0} | kw
    return js.simulate(sc, y0_of(sc), 2.0, **opts)


def fresh_env(tmp_path, **env):
    """The environment of a fresh process: no JAX or jaxsim cache settings but `env`, and a
    private user cache directory."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("JAXSIM_", "JAX_"))}
    full.update(env, HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    return full


def python(code, env):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=ROOT)  # fmt: skip
    return out


# --------------------------------------------------------------------------------------------------
# Importing jaxsim changes no JAX setting but float64; the cache is opt-in

_SETTINGS = """
import json, warnings, jax
NAMES = {names!r}
def now():
    return {{n: getattr(jax.config, n) for n in NAMES}}
before = now()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jaxsim as js
after = now()
{action}
print(json.dumps({{"before": before, "after": after, "end": now(),
                  "dir": None if js.cache_dir() is None else str(js.cache_dir()),
                  "warnings": [str(w.message) for w in caught]}}))
"""
# Every JAX setting that `import jaxsim` could touch: the cache's, the compiler's, the numerics'.
NAMES = [
    "jax_enable_x64",
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_enable_compilation_cache",
    "jax_default_matmul_precision",
    "jax_platforms",
    "jax_log_compiles",
    "jax_debug_nans",
]


def settings(tmp_path, action="", **env):
    code = _SETTINGS.format(names=NAMES, action=action)
    out = python(code, fresh_env(tmp_path, **env))
    return json.loads(out.stdout.strip().splitlines()[-1])


def changed(a, b):
    return {k for k in a if a[k] != b[k]}


def test_import_changes_only_float64(tmp_path):
    got = settings(tmp_path)
    assert got["before"]["jax_enable_x64"] is False
    assert changed(got["before"], got["after"]) == {"jax_enable_x64"}
    assert got["after"]["jax_enable_x64"] is True and got["dir"] is None
    assert got["warnings"] == []
    assert not (tmp_path / "xdg").exists()  # nothing written to the user's cache directory


@pytest.mark.parametrize("value", ["0", "off", "False", ""])
def test_cache_variable_off_values(tmp_path, value):
    got = settings(tmp_path, JAXSIM_CACHE=value)
    assert changed(got["before"], got["after"]) == {"jax_enable_x64"} and got["dir"] is None


def test_cache_variable_on_uses_the_user_cache_directory(tmp_path):
    got = settings(tmp_path, JAXSIM_CACHE="1")
    folder = tmp_path / "xdg" / "jaxsim" / f"jax-{jax.__version__}"
    assert got["dir"] == str(folder) and folder.is_dir()
    assert got["after"]["jax_compilation_cache_dir"] == str(folder)
    # The threshold for the user's other programs is JAX's default.
    assert changed(got["before"], got["after"]) == {"jax_enable_x64", "jax_compilation_cache_dir"}
    assert (
        got["after"]["jax_persistent_cache_min_compile_time_secs"] == JAX_DEFAULT_MIN_COMPILE_TIME_S
    )


def test_cache_variable_with_a_path(tmp_path):
    got = settings(tmp_path, JAXSIM_CACHE=str(tmp_path / "mine"))
    assert got["dir"] == str(tmp_path / "mine")
    assert got["after"]["jax_compilation_cache_dir"] == str(tmp_path / "mine")


def settings_in(tmp_path, **env):
    """`settings` in a process whose working folder is `tmp_path` (where a value taken for a
    relative folder would be created), importing this checkout's jaxsim."""
    env = fresh_env(tmp_path, PYTHONPATH=str(ROOT), **env)
    code = _SETTINGS.format(names=NAMES, action="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=tmp_path)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("value", ["enabled", "Enable", "YES", "y"])
def test_cache_variable_true_words_turn_on_the_default_folder(tmp_path, value):
    got = settings_in(tmp_path, JAXSIM_CACHE=value)
    assert got["dir"] == str(tmp_path / "xdg" / "jaxsim" / f"jax-{jax.__version__}")
    assert not (tmp_path / value).exists()


@pytest.mark.parametrize("value", ["disabled", "Disable", "N"])
def test_cache_variable_false_words_leave_it_off(tmp_path, value):
    got = settings_in(tmp_path, JAXSIM_CACHE=value)
    assert got["dir"] is None and got["warnings"] == []
    assert not (tmp_path / value).exists()


def test_cache_variable_unknown_word_is_refused_by_name(tmp_path):
    """`JAXSIM_CACHE=enbled` (a typo) was taken as a folder and created `./enbled`: now a
    warning naming the value and the accepted words; no folder; the import succeeds."""
    got = settings_in(tmp_path, JAXSIM_CACHE="enbled")
    assert got["dir"] is None and got["after"]["jax_compilation_cache_dir"] is None
    assert len(got["warnings"]) == 1
    assert "JAXSIM_CACHE='enbled' is neither a true/false word" in got["warnings"][0]
    assert "./enbled" in got["warnings"][0]
    assert not (tmp_path / "enbled").exists()


def test_cache_variable_with_a_relative_path(tmp_path):
    got = settings_in(tmp_path, JAXSIM_CACHE="./mine")
    assert got["dir"] == "mine" and (tmp_path / "mine").is_dir()


def test_enable_and_disable_in_a_running_process(tmp_path):
    action = f"js.enable_cache({str(tmp_path / 'run')!r}); mid = now(); js.disable_cache()"
    got = settings(tmp_path, action=action)
    assert changed(got["before"], got["after"]) == {"jax_enable_x64"}
    assert got["end"] == got["after"] and got["dir"] is None
    assert (tmp_path / "run").is_dir()


def test_enable_cache_keeps_the_users_jax_folder(tmp_path):
    theirs = str(tmp_path / "theirs")
    got = settings(tmp_path, action="js.enable_cache()", JAX_COMPILATION_CACHE_DIR=theirs)
    assert got["dir"] == theirs and got["end"]["jax_compilation_cache_dir"] == theirs
    assert (
        got["end"]["jax_persistent_cache_min_compile_time_secs"] == JAX_DEFAULT_MIN_COMPILE_TIME_S
    )


def test_a_folder_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    # At import (environment variable): a warning, the cache stays off, the import succeeds.
    got = settings(tmp_path, JAXSIM_CACHE=str(blocker / "cache"))
    assert got["dir"] is None and got["after"]["jax_compilation_cache_dir"] is None
    assert len(got["warnings"]) == 1 and "cannot create the cache folder" in got["warnings"][0]
    # Called: an OSError naming the folder.
    with pytest.raises(OSError, match="jaxsim.enable_cache: cannot create the cache folder"):
        js.enable_cache(blocker / "cache")
    assert js.cache_dir() is None


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
from tests.engine.compilation.test_cache import make_sc, run
jax.block_until_ready(run(make_sc()).ys)  # throw=True (the default)
def users_program(x):  # a program of the user's, compiled in far under 1 s
    return x * 3.0 + 1.0
jax.jit(users_program)(2.0)
def about(program):
    mine = [m for m in log if program in m]
    return ["HOST_CALLBACKS" if any("host callbacks" in m for m in mine) else "NO_HOST_CALLBACKS",
            "WRITTEN" if any("Writing" in m for m in mine) else "NOT_WRITTEN",
            "HIT" if any("cache hit" in m for m in mine) else "MISS"]
print(" ".join(about("_run_fixed") + about("users_program")))
"""


def test_the_simulation_program_lands_in_jaxs_cache_and_the_users_small_one_does_not(tmp_path):
    """Two fresh processes with `JAXSIM_CACHE=<folder>`: the first writes the `throw=True`
    simulation program (no host callbacks; stored whatever its compile time), the second reads
    it. A small program of the user's stays under JAX's default threshold: never written."""
    env = fresh_env(tmp_path, JAXSIM_CACHE=str(tmp_path / "cache"))
    code = _LANDS.format(root=str(ROOT))
    outs = [python(code, env).stdout.split() for _ in range(2)]
    assert outs[0][:3] == ["NO_HOST_CALLBACKS", "WRITTEN", "MISS"], outs
    assert outs[1][2] == "HIT", outs
    assert outs[0][4] == "NOT_WRITTEN" and outs[1][4:] == ["NOT_WRITTEN", "MISS"], outs


# --------------------------------------------------------------------------------------------------
# throw=True: checked on the host at the top level, in the program under a trace; same error


class Exploding(js.AbstractDynamicObject):
    """dy/dt = y^2 from y0 = 1 blows up at t = 1."""

    name: str = eqx.field(static=True, default="boom")

    def init_state(self):
        return jnp.ones(())

    def drift(self, t, y, args):
        return y * y


BOOM = Exploding()
NOOP_CLOCK = js.DiscreteModel("noop", js.Clock(0.5), lambda t, y, z, a: (z, {}))
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-6, "atol": 1e-6, "max_steps": 50}
CASES = {
    "fixed-step": ({"dt": 0.5}, "non-finite (NaN/inf) during the fixed-step solve"),
    "adaptive": (ADAPTIVE, "maximum number of solver steps"),
    # Clocked runs (on the grid or in segments): one message per cause.
    "clocked": ({"dt": 0.5, "clocks": [NOOP_CLOCK]}, "the state became non-finite (NaN/inf)"),
    "segments": (ADAPTIVE | {"clocks": [NOOP_CLOCK]}, "maximum number of solver steps"),
    "SDE": ({"dt": 0.5, "solver": js.EulerMaruyama(), "key": 0}, "during the SDE solve"),
}
# Horizons [s] past the blow-up at t = 1 for each driver (Euler-Maruyama overflows after ~20 steps).
HORIZON = {
    "SDE": 10.0,
}


class NoisyExploding(js.AbstractDynamicObject):
    """dy = y^2 dt + 0 dW: the same blow-up as an SDE."""

    name: str = eqx.field(static=True, default="noisy_boom")

    @property
    def noise_dim(self):
        return 1

    def init_state(self):
        return jnp.ones(1)

    def drift(self, t, y, args):
        return y * y

    def diffusion(self, t, y, args):
        return 0.0 * y[:, None]


def error_of(fn):
    with pytest.raises(eqx.EquinoxRuntimeError) as info:
        jax.block_until_ready(fn())
    return str(info.value)


@pytest.mark.parametrize("case", list(CASES))
def test_failed_run_raises_the_same_error_on_the_host_and_in_the_program(case):
    opts, expected = CASES[case]
    model = NoisyExploding() if case == "SDE" else BOOM
    y0, t1 = model.init_state(), HORIZON.get(case, 3.0)
    host = error_of(lambda: js.simulate(model, y0, t1, **opts).ys)
    # Under a trace (here jaxsim.jit), the check is in the program.
    in_program = error_of(lambda: js.jit(lambda y: js.simulate(model, y, t1, **opts).ys)(y0))
    assert expected in host
    # equinox wraps the in-program message in its report; the message itself is the same.
    assert f"equinox.EquinoxRuntimeError: {host}\n" in in_program
    sol = js.simulate(model, y0, t1, throw=False, **opts)
    assert not bool(sol.ok)


def test_too_many_events_raises_the_same_error_on_the_host_and_in_the_program():
    class Falling(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="fall")

        def init_state(self):
            return {"h": jnp.asarray(1.0), "v": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"h": y["v"], "v": jnp.asarray(-9.81) + 0.0 * y["h"]}

    model = Falling()
    # Crossing h = 0.9, 0.8, 0.7 downwards: three firings, room for one.
    events = [
        js.Event(lambda t, y, a, c=c: y["h"] - c, direction="falling") for c in (0.9, 0.8, 0.7)
    ]
    opts = ADAPTIVE | {"max_steps": 4096, "events": events, "max_events": 1}
    y0 = model.init_state()
    host = error_of(lambda: js.simulate(model, y0, 1.0, **opts).ys)
    in_program = error_of(lambda: js.jit(lambda y: js.simulate(model, y, 1.0, **opts).ys)(y0))
    assert "max_events" in host
    assert f"equinox.EquinoxRuntimeError: {host}\n" in in_program
