"""XLA's small-while-loop hoisting, opt-in at `import jaxsim` (`JAXSIM_SMALL_LOOPS=1`) (`jaxsim._compilation._xla_options`).

XLA reads `XLA_FLAGS` once per process, when JAX creates its backend, so every case runs in a
fresh interpreter (`sys.executable -c ...`) with its own environment. The oracle of "on" is XLA's
own: the compiled program of a jaxsim step loop holds the call XLA tags `xla_cpu_small_call` (the
loop compiled as one function) with the default, and none with `JAXSIM_SMALL_LOOPS=0`.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import jaxsim as js
from jaxsim._compilation import _xla_options as _xla_setup


ROOT = Path(__file__).resolve().parents[3]
OPTION = _xla_setup.OPTION
DEFAULT = f"--xla_backend_extra_options={OPTION}={_xla_setup.DEFAULT_THRESHOLD}"
# Seconds one child may take (import jaxsim + a small compile; the machine may be loaded).
CHILD_TIMEOUT_S = 300

# The child: what `import jaxsim` left in XLA_FLAGS, `jaxsim.small_loops()`, and (`loop`) how XLA
# compiled a jaxsim step loop (Tsit5 on a 16-state decay, about 10 kB per step: above XLA's own
# threshold, 1 kB): the `while` instructions the top-level computation runs itself (one per loop
# left kernel by kernel) and the calls XLA compiled as one function (its `xla_cpu_small_call` tag).
_CHILD = r"""
import json, os, sys
before = sys.argv[1]
if before == "jax used":
    import jax.numpy as jnp
    jnp.ones(3).sum().block_until_ready()
import jaxsim as js
out = {"flags": os.environ.get("XLA_FLAGS"), "small_loops": js.small_loops()._asdict()}
if "loop" in sys.argv[2:]:
    import jax, jax.numpy as jnp

    class Decay(js.AbstractDynamicObject):
        name: str = "decay"

        def init_state(self):
            return {"x": jnp.ones(16)}

        def drift(self, t, y, args):
            return {"x": -y["x"]}

    def run(x0):
        sol = js.simulate(Decay(), {"x": x0}, 1.0, solver=js.Tsit5(), rtol=1e-8, atol=1e-8,
                          outputs=False)
        return sol.ys

    compiled = jax.jit(run, compiler_options=js.compiler_options()).lower(jnp.ones(16)).compile()
    text = compiled.as_text()
    entry = text[text.index("\nENTRY"):]
    out["top_level_whiles"] = entry[: entry.index("\n}")].count(" while(")
    out["one_function_calls"] = text.count("xla_cpu_small_call")
print(json.dumps(out))
"""


def _child(env_changes: dict, before: str = "", *extra: str) -> dict:
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, before, *extra],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_off_by_default():
    flags = "--xla_force_host_platform_device_count=1"
    out = _child({"XLA_FLAGS": flags, "JAXSIM_SMALL_LOOPS": None}, "", "loop")
    assert out["flags"] == flags
    assert not out["small_loops"]["requested"]
    assert not out["small_loops"]["effective"]
    assert "off by default" in out["small_loops"]["reason"]
    assert out["top_level_whiles"] == 1


def test_opted_in_added_and_loop_compiled_as_one_function():
    out = _child({"XLA_FLAGS": None, "JAXSIM_SMALL_LOOPS": "1"}, "", "loop")
    assert out["flags"] == DEFAULT
    assert out["small_loops"]["requested"]
    assert out["small_loops"]["threshold"] == _xla_setup.DEFAULT_THRESHOLD
    assert out["small_loops"]["effective"]
    assert out["top_level_whiles"] == 0
    assert out["one_function_calls"] >= 1


def test_opt_out_leaves_flags_and_loop_runs_kernel_by_kernel():
    flags = "--xla_force_host_platform_device_count=1"
    out = _child({"XLA_FLAGS": flags, "JAXSIM_SMALL_LOOPS": "0"}, "", "loop")
    assert out["flags"] == flags
    assert not out["small_loops"]["requested"]
    assert out["small_loops"]["threshold"] is None
    assert not out["small_loops"]["effective"]
    assert "JAXSIM_SMALL_LOOPS=0" in out["small_loops"]["reason"]
    assert out["top_level_whiles"] == 1
    assert out["one_function_calls"] == 0


def test_users_threshold_is_kept():
    flags = f"--xla_backend_extra_options={OPTION}=65536"
    out = _child({"XLA_FLAGS": flags, "JAXSIM_SMALL_LOOPS": None})
    assert out["flags"] == flags
    assert out["small_loops"]["threshold"] == 65536
    assert "your XLA_FLAGS" in out["small_loops"]["reason"]
    assert out["small_loops"]["effective"]


def test_merged_into_existing_extra_options_other_flags_kept():
    flags = (
        "--xla_force_host_platform_device_count=2 "
        "--xla_backend_extra_options=xla_cpu_disable_loop_unrolling"
    )
    out = _child({"XLA_FLAGS": flags, "JAXSIM_SMALL_LOOPS": "200000"})
    assert out["flags"] == (
        "--xla_force_host_platform_device_count=2 "
        f"--xla_backend_extra_options=xla_cpu_disable_loop_unrolling,{OPTION}=200000"
    )
    assert out["flags"].count("--xla_backend_extra_options") == 1
    assert out["small_loops"]["threshold"] == 200000
    assert out["small_loops"]["effective"]


def test_backend_created_first_leaves_environment_alone():
    out = _child({"XLA_FLAGS": None, "JAXSIM_SMALL_LOOPS": "1"}, "jax used")
    assert out["flags"] is None
    assert not out["small_loops"]["requested"]
    assert not out["small_loops"]["effective"]
    assert "before jaxsim was imported" in out["small_loops"]["reason"]


def test_this_process_matches_its_environment():
    # The test process itself imported jaxsim before JAX's backend existed (conftest creates none).
    report = js.small_loops()
    if jax.default_backend() != "cpu" or not report.requested:
        assert not report.effective
    else:
        assert report.requested and report.effective, report.reason


@pytest.mark.parametrize(
    "flags, expected",
    [
        ("", DEFAULT),
        ("--xla_cpu_use_thunk_runtime=true", f"--xla_cpu_use_thunk_runtime=true {DEFAULT}"),
        (
            "--xla_backend_extra_options=a=1 --xla_dump_to=/tmp/x --xla_backend_extra_options=b",
            "--xla_backend_extra_options=a=1 --xla_dump_to=/tmp/x "
            f"--xla_backend_extra_options=b,{OPTION}={_xla_setup.DEFAULT_THRESHOLD}",
        ),
        ("--xla_backend_extra_options= --x=1", f"{DEFAULT} --x=1"),
        (
            '--xla_backend_extra_options="a=1,b" --x=1',
            f'--xla_backend_extra_options="a=1,b,{OPTION}={_xla_setup.DEFAULT_THRESHOLD}" --x=1',
        ),
    ],
)
def test_with_option(flags, expected):
    assert _xla_setup.with_option(flags, _xla_setup.DEFAULT_THRESHOLD) == expected


@pytest.mark.parametrize(
    "value, threshold",
    [(None, None), ("", None), ("on", 1_000_000), ("1", 1_000_000), ("OFF", None),
     ("0", None), ("65536", 65536)],
)  # fmt: skip
def test_environment_values(value, threshold):
    assert _xla_setup._requested_threshold(value) == threshold


@pytest.mark.parametrize("value", ["maybe", "-5", "1e6"])
def test_bad_environment_value_is_refused(value):
    with pytest.raises(ValueError, match=r"JAXSIM_SMALL_LOOPS=.* is not understood"):
        _xla_setup._requested_threshold(value)


@pytest.mark.parametrize(
    "name, value",
    [(OPTION, 1_000_000), ("xla_backend_extra_options", f"{OPTION}=1000000")],
)
def test_compiler_options_refuse_it(name, value):
    """Why jaxsim sets it through `XLA_FLAGS`: a program's own compile options cannot carry it
    (if a future jaxlib accepts it, per-program control becomes possible: revisit)."""
    if jax.default_backend() != "cpu":
        pytest.skip("XLA:CPU option")
    with pytest.raises(Exception, match="option"):
        jax.jit(lambda x: x + 1.0, compiler_options={name: value}).lower(1.0).compile()


class _Decay(js.AbstractDynamicObject):
    k: object
    name: str = "decay"

    def init_state(self):
        return {"x": jax.numpy.ones(2)}

    def drift(self, t, y, args):
        return {"x": -self.k * y["x"]}


def _final(k, solver, **kw):
    sol = js.simulate(_Decay(k), {"x": jax.numpy.ones(2)}, 1.0, solver=solver, rtol=1e-6,
                      atol=1e-6, outputs=False, **kw)  # fmt: skip
    return sol.ys["x"][-1, 0]


def _traced_warnings(fn, *args) -> list:
    """The `ReplayedDecisionsWarning`s raised while tracing `fn(*args)` (nothing is compiled)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.make_jaxpr(fn)(*args)
    return [w for w in caught if issubclass(w.category, js.ReplayedDecisionsWarning)]


@pytest.mark.parametrize("hoisted", [True, False])
def test_replayed_decisions_warned_only_for_diffrax_gradients_with_hoisting(monkeypatch, hoisted):
    # `loops_hoisted()` reads `XLA_FLAGS` (the threshold this process would hoist with); tracing
    # is enough, as the warning is given at trace time.
    monkeypatch.setenv("XLA_FLAGS", DEFAULT if hoisted else "")
    import diffrax as dfx

    k = jax.numpy.asarray(0.5)
    diffrax_tsit5 = js.Tsit5().to_diffrax()
    grad_diffrax = jax.grad(lambda k: _final(k, diffrax_tsit5))
    warned = [
        _traced_warnings(grad_diffrax, k),
        _traced_warnings(jax.jit(jax.grad(lambda k: _final(k, dfx.Tsit5()))), k),
        _traced_warnings(jax.vmap(grad_diffrax), jax.numpy.full(3, 0.5)),
        _traced_warnings(
            jax.grad(lambda ks: jax.vmap(lambda k: _final(k, diffrax_tsit5))(ks).sum()),
            jax.numpy.full(3, 0.5),
        ),  # fmt: skip
    ]
    # jaxsim's own pair on the clocked driver (`dtmax` routes there) runs in diffrax's loop.
    warned.append(_traced_warnings(jax.grad(lambda k: _final(k, js.Tsit5(), dtmax=0.25)), k))
    assert [len(w) == 1 for w in warned] == [hoisted] * 5
    if hoisted:
        assert "JAXSIM_SMALL_LOOPS" in str(warned[0][0].message)
    # Never: jaxsim's own core (it records the steps), a forward run, forward mode.
    assert not _traced_warnings(jax.grad(lambda k: _final(k, js.Tsit5())), k)
    assert not _traced_warnings(lambda k: _final(k, diffrax_tsit5), k)
    fwd = jax.jacfwd(lambda k: _final(k, diffrax_tsit5, adjoint=dfx.ForwardMode()))
    assert not _traced_warnings(fwd, k)


# The child of the replay case: the day-long J2 orbit with 48 thrust windows (50 parameters) of
# `benchmarks/bench_lean.py`, whose gradient through `Dopri8().to_diffrax()` (diffrax's
# checkpointing adjoint, which decides the steps again in the backward pass) came out 69-7700 %
# off with hoisting on (`docs/engine.md`, "Loop speed on the CPU"). jaxsim's own core records the
# steps: its reverse gradient must agree with forward sensitivities with hoisting on, and the
# diffrax path must be warned about.
_REPLAY_CHILD = r"""
import json, warnings
import jax, jax.numpy as jnp, numpy as np
import jaxsim as js
from benchmarks import bench_orbit_adaptive as orbit
from benchmarks.bench_lean import N_WINDOWS, RTOL, THRUST, thrust_model

cls = thrust_model()
r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
p0 = jnp.concatenate([jnp.array([orbit.MU, orbit.J2]), jnp.full(N_WINDOWS, THRUST)])

def loss(p, solver, **kw):
    m = cls(p[0], p[1], p[2:])
    sol = js.simulate(m, m.init_state(r0, v0), orbit.T1, solver=solver, rtol=RTOL, atol=RTOL,
                      outputs=False, max_steps=4096, **kw)
    r = sol.ys["r_BN_N"][-1]
    return r @ r / orbit.R_EARTH**2

reverse = np.asarray(js.jit(jax.grad(lambda p: loss(p, js.Dopri8())))(p0))
sens = np.asarray(js.jit(jax.grad(lambda p: loss(p, js.Dopri8(), adjoint=js.ForwardSensitivity())))(p0))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    jax.make_jaxpr(jax.grad(lambda p: loss(p, js.Dopri8().to_diffrax())))(p0)
print(json.dumps({
    "hoisted": js.small_loops().effective,
    "error": float(np.max(np.abs(reverse - sens)) / np.max(np.abs(sens))),
    "warned": [w.category.__name__ for w in caught],
}))
"""
# Reverse (discrete adjoint) against forward sensitivities of the same run: the two differentiate
# the same steps differently (sensitivities are integrated under the step control), which at
# rtol 1e-12 leaves about 1e-10 (`benchmarks/results/lean.md`); a replayed decision gives O(1).
REPLAY_GRADIENT_TOL = 1e-8


def test_own_adjoint_right_with_hoisting_where_a_replay_goes_wrong():
    env = dict(os.environ, JAXSIM_SMALL_LOOPS="1")
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", _REPLAY_CHILD], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["hoisted"]
    assert out["error"] < REPLAY_GRADIENT_TOL, out
    assert out["warned"] == ["ReplayedDecisionsWarning"]
