"""jaxsim's cache: the folder and its settings (`jaxsim._cache`), `throw=True` checked on the host
after a top-level run (`jaxsim._host_checks`), and compiled programs stored on disk
(`jaxsim._program_cache`).

Oracles: the settings a fresh process ends up with (subprocesses, one per configuration); the
error the in-program check raises (under `jaxsim.jit`) against the one raised on the host; runs
without the cache (the plain jit path) against runs compiled for the cache and loaded from it
(bitwise); keys against each other when one part of the call changes.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim import _cache, _program_cache


ROOT = Path(__file__).resolve().parents[1]
I_HUB = np.diag([10.0, 20.0, 30.0])


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


def assert_bitwise_equal(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture
def programs(tmp_path, monkeypatch):
    """An empty cache folder for this test, and no program held in memory. (Source files edited
    since this process imported jaxsim would refuse every key: the clock restarts here.)"""
    monkeypatch.setitem(_cache._state, "dir", tmp_path / "jaxsim")
    monkeypatch.setattr(_cache, "IMPORTED_AT_NS", time.time_ns())
    _program_cache.clear_memory()
    yield tmp_path / "jaxsim" / "programs"
    _program_cache.clear_memory()


def stored(folder):
    return sorted(folder.glob("*.bin")) if folder.exists() else []


# --------------------------------------------------------------------------------------------------
# The folder: default, opt-out, the user's own JAX cache folder (fresh processes)

_SETTINGS = """
import json, jax, jaxsim as js
if {disable}:
    js.disable_cache()
print(json.dumps({{
    "dir": None if js.cache_dir() is None else str(js.cache_dir()),
    "xla": jax.config.jax_compilation_cache_dir,
    "min_time": jax.config.jax_persistent_cache_min_compile_time_secs,
}}))
"""


def settings(tmp_path, disable=False, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("JAXSIM_", "JAX_COMP"))}
    full.update(env, HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    out = subprocess.run(
        [sys.executable, "-c", _SETTINGS.format(disable=disable)],
        capture_output=True, text=True, check=True, env=full, cwd=ROOT,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_folder_is_the_user_cache_directory(tmp_path):
    got = settings(tmp_path)
    folder = tmp_path / "xdg" / "jaxsim" / f"jax-{jax.__version__}"
    assert got["dir"] == str(folder)
    assert got["xla"] == str(folder / "xla")
    assert got["min_time"] == 0.0  # every entry: the model build's small eager programs too


def test_cache_dir_variable_moves_it(tmp_path):
    got = settings(tmp_path, JAXSIM_CACHE_DIR=str(tmp_path / "mine"))
    assert got["dir"] == str(tmp_path / "mine" / f"jax-{jax.__version__}")


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_opt_out_by_variable(tmp_path, value):
    got = settings(tmp_path, JAXSIM_CACHE=value)
    assert got["dir"] is None and got["xla"] is None and got["min_time"] == 1.0


def test_opt_out_by_function(tmp_path):
    got = settings(tmp_path, disable=True)
    assert got["dir"] is None and got["xla"] is None and got["min_time"] == 1.0


def test_a_folder_that_cannot_be_written_turns_the_cache_off(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    got = settings(tmp_path, JAXSIM_CACHE_DIR=str(blocker / "cache"))
    assert got["dir"] is None and got["xla"] is None


def test_a_users_jax_cache_folder_is_kept(tmp_path):
    got = settings(tmp_path, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "theirs"))
    assert got["xla"] == str(tmp_path / "theirs") and got["min_time"] == 1.0
    # jaxsim's own programs still go to its folder.
    assert got["dir"] == str(tmp_path / "xdg" / "jaxsim" / f"jax-{jax.__version__}")


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
    "clocked": ({"dt": 0.5, "clocks": [NOOP_CLOCK]}, "during the fixed-step (clocked) solve"),
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


_LANDS = """
import logging, sys, jax, jaxsim as js
sys.path.insert(0, {root!r})
from tests.test_cache import make_sc, y0_of, run
log = []
class H(logging.Handler):
    def emit(self, r):
        m = r.getMessage()
        if "_run_fixed" in m:
            log.append(m)
for name in ("jax._src.compiler", "jax._src.compilation_cache"):
    logging.getLogger(name).addHandler(H()); logging.getLogger(name).setLevel(logging.DEBUG)
from jaxsim import _cache
_cache._state["dir"] = None  # jaxsim's program cache off: JAX's own cache alone
jax.block_until_ready(run(make_sc()).ys)  # throw=True (the default)
print("HOST_CALLBACKS" if any("host callbacks" in m for m in log) else "NO_HOST_CALLBACKS")
print("WRITTEN" if any("Writing" in m for m in log) else "NOT_WRITTEN")
print("HIT" if any("cache hit" in m for m in log) else "MISS")
"""


def test_the_simulation_program_with_throw_lands_in_jaxs_cache(tmp_path):
    """Two fresh processes on one JAX cache folder, jaxsim's program cache off: the first writes
    the `throw=True` program (no host callbacks), the second reads it (JAX's compiler log)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXSIM_")}
    env["JAXSIM_CACHE_DIR"] = str(tmp_path)
    code = _LANDS.format(root=str(ROOT))
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=ROOT,
        ).stdout.split()  # fmt: skip
        for _ in range(2)
    ]
    assert outs[0] == ["NO_HOST_CALLBACKS", "WRITTEN", "MISS"], outs
    assert outs[1][2] == "HIT", outs


# --------------------------------------------------------------------------------------------------
# Programs on disk: bitwise the same results, never a stale program


def test_results_are_bitwise_equal_with_and_without_the_program_cache(programs, monkeypatch):
    sc = make_sc(mass=123.0)
    compiled = run(sc)  # compiled for the cache, and stored
    assert len(stored(programs)) == 1
    _program_cache.clear_memory()
    loaded = run(sc)  # read from the file
    assert len(_program_cache._memory) == 1
    monkeypatch.setitem(_cache._state, "dir", None)
    plain = run(sc)  # the plain jit path
    assert_bitwise_equal(compiled, plain)
    assert_bitwise_equal(loaded, plain)
    assert type(loaded) is type(plain) and loaded.result == js.RESULTS.successful


def test_array_values_are_inputs_not_part_of_the_key(programs):
    a, b = run(make_sc()), run(make_sc(torque_B=(0.0, 0.03, 0.0)))
    assert len(stored(programs)) == 1
    assert not np.array_equal(a.ys["hub"]["omega_BN_B"], b.ys["hub"]["omega_BN_B"])


@pytest.mark.parametrize(
    "change",
    [
        {"outputs": False},  # a static option of simulate
        {"dt": 0.25},  # another step grid
        {"checkpoint": False},
        {"solver": js.RK2()},
    ],
    ids=["outputs", "dt", "checkpoint", "solver"],
)
def test_a_changed_static_option_never_reuses_a_program(programs, monkeypatch, change):
    sc = make_sc()
    run(sc)
    _program_cache.clear_memory()
    changed = run(sc, **change)
    assert len(stored(programs)) == 2
    monkeypatch.setitem(_cache._state, "dir", None)
    assert_bitwise_equal(changed, run(sc, **change))


@pytest.mark.parametrize(
    "other",
    [make_sc(wheels=False), make_sc(name="other")],
    ids=["no wheels", "static name"],
)
def test_a_changed_model_structure_never_reuses_a_program(programs, monkeypatch, other):
    run(make_sc())
    _program_cache.clear_memory()
    changed = run(other)
    assert len(stored(programs)) == 2
    monkeypatch.setitem(_cache._state, "dir", None)
    assert_bitwise_equal(changed, run(other))


def test_changed_source_never_reuses_a_program(programs, monkeypatch):
    sc = make_sc()
    run(sc)
    _program_cache.clear_memory()
    # As if a file of the effectors package had been edited since the program was stored.
    real = _program_cache._package_hash
    monkeypatch.setattr(
        _program_cache, "_package_hash", lambda top: "edited" if top == "effectors" else real(top)
    )
    run(sc)
    assert len(stored(programs)) == 2


def test_package_hash_follows_the_source(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    init = pkg / "__init__.py"
    init.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fakepkg

    monkeypatch.setattr(_cache, "IMPORTED_AT_NS", time.time_ns())  # as if imported now
    first = _program_cache._package_hash("fakepkg")
    assert _program_cache._package_hash("fakepkg") == first
    init.write_text("X = 2\n")
    os.utime(init, ns=(_cache.IMPORTED_AT_NS - 1, _cache.IMPORTED_AT_NS - 1))  # before import
    assert _program_cache._package_hash("fakepkg") != first
    # Written after the import: this process may run older code than the file; no key.
    init.write_text("X = 3\n")
    with pytest.raises(_program_cache.Unkeyable, match="changed after jaxsim was imported"):
        _program_cache._package_hash("fakepkg")
    _program_cache._source_hashes.pop("fakepkg")
    del sys.modules[fakepkg.__name__]


def test_a_damaged_file_is_compiled_again(programs, monkeypatch):
    sc = make_sc(mass=321.0)
    good = run(sc)
    (path,) = stored(programs)
    path.write_bytes(b"not a program")
    _program_cache.clear_memory()
    again = run(sc)
    assert_bitwise_equal(good, again)
    assert path.read_bytes() != b"not a program"  # written anew


def test_user_classes_are_not_keyed(programs):
    # A user's model may read globals, files or the environment at trace time: no key sees that.
    sol = js.simulate(BOOM, 0.5 * BOOM.init_state(), 1.0, dt=0.5)
    assert stored(programs) == [] and bool(sol.ok)
    with pytest.raises(_program_cache.Unkeyable):
        _program_cache._Keyer().token(BOOM)


def test_progress_programs_are_stored_and_report_after_loading(programs, monkeypatch):
    # progress on and off run one program (the reports are behind a run-time switch): stored once,
    # and loaded from its file with the reports connected again (jaxsim._progress).
    sc = make_sc(mass=123.0)
    seen = []
    first = run(sc, progress=lambda t, t1: seen.append(t))
    jax.effects_barrier()
    assert len(stored(programs)) == 1 and seen[-1] == 2.0
    _program_cache.clear_memory()
    seen.clear()
    monkeypatch.setattr(_program_cache, "_compile", lambda *a, **k: pytest.fail("compiled again"))
    loaded = run(sc, progress=lambda t, t1: seen.append(t))  # from the file
    jax.effects_barrier()
    assert seen == [1.0, 2.0] and len(stored(programs)) == 1
    assert_bitwise_equal(first, loaded)
    assert_bitwise_equal(first, run(sc))


def test_key_arrays_are_not_stored():
    key = _program_cache._aval(jax.random.key(0))
    with pytest.raises(_program_cache.Unkeyable):
        _program_cache._disk_aval(key, jax.devices()[0])


def test_closures_are_keyed_by_what_they_capture(monkeypatch):
    monkeypatch.setattr(
        _program_cache, "TRUSTED_PACKAGES", _program_cache.TRUSTED_PACKAGES | {"tests"}
    )

    def gain(k):
        return lambda x: k * x

    keyer = _program_cache._Keyer()
    assert keyer.token(gain(2.0)) == keyer.token(gain(2.0))
    assert keyer.token(gain(2.0)) != keyer.token(gain(3.0))
    with pytest.raises(_program_cache.Unkeyable):
        keyer.token(gain(jnp.ones(3)))  # a closed-over array: a constant of the program
    with pytest.raises(_program_cache.Unkeyable):
        keyer.token(threading.Lock())  # no value to write down (a C object of `_thread`)


def test_key_depends_on_the_jax_settings():
    key = lambda: _program_cache.program_key(js.simulate, {}, (), ())
    before = key()
    jax.config.update("jax_default_matmul_precision", "highest")
    try:
        assert key() != before
    finally:
        jax.config.update("jax_default_matmul_precision", None)
    assert key() == before


def test_a_file_that_loads_but_fails_to_run_is_removed(programs, monkeypatch):
    """A file whose executable fails at run time (incomplete) is removed and the call compiles."""
    sc = make_sc(mass=222.0)
    good = run(sc)
    (path,) = stored(programs)
    _program_cache.clear_memory()

    class Failing:
        def __call__(self, *args):
            raise jax.errors.JaxRuntimeError("INTERNAL: Function fusion not found")

    # Every stored program goes through `_deserialize` (programs with progress reports reconnect
    # them there instead of calling `serialize_executable.deserialize_and_load`).
    monkeypatch.setattr(_program_cache, "_deserialize", lambda *a: Failing())
    assert_bitwise_equal(good, run(sc))
    assert not path.exists()


def test_the_programs_folder_keeps_the_newest_files(programs, monkeypatch):
    monkeypatch.setattr(_program_cache, "MAX_PROGRAMS", 1)
    run(make_sc())
    (first,) = stored(programs)
    run(make_sc(name="other"))
    (second,) = stored(programs)
    assert first != second and not first.exists()


_RESTART = """
import sys, numpy as np, jax
sys.path.insert(0, {root!r})
from jaxsim import _program_cache
from tests.test_cache import make_sc, run
sol = run(make_sc(mass=111.0))
leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(sol)]
np.savez({out!r}, *leaves)
held = [e for e in _program_cache._memory.values() if e is not None]
print("LOADED" if any(e.path is not None for e in held) else "COMPILED")
"""


def test_a_fresh_process_loads_the_program_and_gets_bitwise_the_same_results(tmp_path):
    """The restart itself: a second process on the same folder runs the stored program (no
    trace) and its results equal the first process's bit for bit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXSIM_")}
    env["JAXSIM_CACHE_DIR"] = str(tmp_path / "cache")
    how, results = [], []
    for k in range(2):
        out = tmp_path / f"run{k}.npz"
        code = _RESTART.format(root=str(ROOT), out=str(out))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env=env, cwd=ROOT)  # fmt: skip
        how.append(done.stdout.split()[-1])
        results.append(np.load(out))
    assert how == ["COMPILED", "LOADED"]
    assert results[0].files == results[1].files
    for name in results[0].files:
        np.testing.assert_array_equal(results[0][name], results[1][name])


class _UserDecay(js.AbstractDynamicObject):
    """A user's model class (module `tests`, outside the trusted packages): never stored on disk."""

    k: jax.Array
    name: str = eqx.field(static=True, default="decay")

    def init_state(self):
        return {"x": jnp.array([1.0, -2.0])}

    def drift(self, t, y, args):
        return {"x": -self.k * y["x"]}


@pytest.mark.parametrize("solver", [js.RK4(), js.Tsit5()], ids=["fixed", "adaptive"])
@pytest.mark.parametrize("folder", ["on", "off"])
def test_unkeyable_plain_runs_are_held_in_process(programs, monkeypatch, solver, folder):
    """A user model's repeated plain run executes its compiled program directly (no equinox
    filtering per call), with the cache folder on or off, bitwise as the equinox path."""
    from jaxsim._adaptive_core import run as _run_adaptive  # jaxsim's pairs: the adaptive core
    from jaxsim._simulate import _run_fixed

    if folder == "off":
        monkeypatch.setitem(_cache._state, "dir", None)
    model = _UserDecay(jnp.asarray(0.7))
    kw = {"rtol": 1e-9, "atol": 1e-9} if solver.adaptive else {"dt": 0.1}
    call = lambda: js.simulate(model, model.init_state(), 2.0, solver=solver, outputs=False, **kw)
    _program_cache.clear_memory()
    first, second = call(), call()
    driver = (_run_adaptive if solver.adaptive else _run_fixed).__wrapped__
    held = [v for k, v in _program_cache._memory.items() if k[0] is driver]
    assert len(held) == 1 and held[0] is not None and held[0].path is None
    assert stored(programs) == []  # not on disk: the class is not keyable
    assert_bitwise_equal(first, second)
    monkeypatch.setattr(_program_cache, "IN_PROCESS", set())  # the equinox path
    _program_cache.clear_memory()
    assert_bitwise_equal(first, call())
    assert list(_program_cache._memory.values()) == [None]
