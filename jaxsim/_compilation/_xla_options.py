"""XLA's small-while-loop hoisting on the CPU, opt-in at `import jaxsim` (`JAXSIM_SMALL_LOOPS=1`).

Off by default, because it applies to every program of the process and changes how some are
rounded: diffrax's checkpointing adjoints replay adaptive steps (and their accept/reject decisions)
in the backward pass and assume the replay repeats the forward pass bit for bit; compiled as one
function, the replay can round differently, decide differently, and give a wrong gradient (69-121 %
off on a day-long J2 gradient through `Dopri8().to_diffrax()`; right with the step times fixed).
jaxsim's own adjoint records the steps and is unaffected; `simulate` warns
(`jaxsim.ReplayedDecisionsWarning`) when opted in and differentiated through a diffrax solver's
adaptive steps. `docs/engine.md`, "Loop speed on the CPU", has the measurements.

On XLA:CPU a loop body runs as a sequence of compiled kernels, one runtime call each (about
10-15 ns apiece); an adaptive step of a small model is mostly such calls (the J2 orbit's Dopri8
step is about 74 kernels). XLA can instead compile a whole small loop into one function: a loop
whose one iteration accesses fewer bytes than the backend option
`xla_cpu_small_while_loop_byte_threshold` (XLA's default is 1 kB), and which holds no operation
that needs the runtime (custom calls, matrix products handed to a library, sorts, ...). jaxsim
raises that threshold to `DEFAULT_THRESHOLD` bytes, which compiles the step loops of jaxsim's
models as one function each (`docs/engine.md`, "Loop speed on the CPU", has the measured figures).

The option cannot be given per program (`jax.jit(..., compiler_options=...)` refuses it); XLA
reads it from the environment variable `XLA_FLAGS` once, when JAX creates its CPU backend, for
every program of the process. So `apply()`, called first thing by `import jaxsim`, adds

    --xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=<bytes>

to `os.environ["XLA_FLAGS"]`, keeping what is there (an existing `--xla_backend_extra_options=`
entry gets the option appended to its comma-separated `key=value` list rather than a second
entry), when `JAXSIM_SMALL_LOOPS` asks for it, unless

- `XLA_FLAGS` already names `xla_cpu_small_while_loop_byte_threshold`: the user's value is kept;
- the environment variable `JAXSIM_SMALL_LOOPS` opts out (`0`, `false`, `no`, `off`): XLA's
  default stays (also when it is unset or empty); `1` (`true`, `yes`, `on`) asks for the default
  threshold, and a whole
  number above 1 is the threshold in bytes;
- JAX's backend already exists (JAX was used before jaxsim was imported): the environment is left
  as it is, because the change could no longer take effect.

`jaxsim.small_loops()` tells which case applied and whether the hoisting works in this process.
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple


ENV = "JAXSIM_SMALL_LOOPS"
OPTION = "xla_cpu_small_while_loop_byte_threshold"
EXTRA = "--xla_backend_extra_options"
# Bytes one loop iteration may access to be compiled as one function. 1 MB hoists the step loops
# measured (the J2 Dopri8 loop, the `combined` spacecraft's RK4 loop and its whole reverse pass, a
# clocked slew); 16 kB and 64 kB hoisted the inner loops of the `combined` gradient but not the
# loop around them, and that gradient then ran slower than with no hoisting (395 and 541 ms
# against 251 ms; 82 ms at 256 kB and 97 ms at 1 MB, where its whole backward pass is hoisted).
DEFAULT_THRESHOLD = 1_000_000
# A loop one iteration of which accesses about 4-8 kB (above XLA's default threshold, 1 kB, far
# below `DEFAULT_THRESHOLD`): `small_loops()` compiles it and looks for the hoisted call.
_PROBE_SIZE = 256
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")
# XLA's tag of a computation compiled as one function (its CPU backend's "small call").
_HOISTED_TAG = "xla_cpu_small_call"

# What `apply()` did at import: `reason`, `threshold`, `requested`.
_state: dict = {}


class SmallLoops(NamedTuple):
    """What `jaxsim.small_loops()` reports about XLA's small-while-loop hoisting.

    **Fields:**

    - `requested`: whether `XLA_FLAGS` asks for a byte threshold above XLA's default (by jaxsim at
      import, or by the user).
    - `threshold`: that threshold [bytes] as `XLA_FLAGS` names it; None when it names none (XLA's
      default, 1 kB).
    - `effective`: whether XLA compiles a small loop as one function in this process (checked on
      a probe loop of a few kB per iteration, compiled once).
    - `reason`: who set it, or why it is not in effect, in one sentence.
    """

    requested: bool
    threshold: int | None
    effective: bool
    reason: str


def _backend_exists() -> bool:
    # JAX has no public query; `backends_are_initialized` is JAX's own check (used by
    # `jax.distributed`). If a future JAX moves it, assume the backend is not created yet: at
    # worst the option is added too late and `small_loops()` reports it as not effective.
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:
        return False
    return bool(backends_are_initialized())


def named_threshold(flags: str) -> int | None:
    """The threshold [bytes] `flags` (an `XLA_FLAGS` value) gives, the last one if several."""
    found = re.findall(rf"{OPTION}=(\d+)", flags)
    return int(found[-1]) if found else None


def _requested_threshold(value: str | None) -> int | None:
    """The threshold `JAXSIM_SMALL_LOOPS=value` asks for; None to opt out."""
    text = (value or "").strip().lower()
    if text in _ON:
        return DEFAULT_THRESHOLD
    if text in _OFF:
        return None
    if text.isdigit() and int(text) > 1:
        return int(text)
    raise ValueError(
        f"jaxsim: the environment variable {ENV}={value!r} is not understood: give 0 (or "
        f"false/no/off) to leave XLA's small-loop hoisting at XLA's default, 1 (true/yes/on) for "
        f"jaxsim's threshold ({DEFAULT_THRESHOLD} bytes), or a threshold in bytes (a whole number "
        f"above 1)."
    )


def with_option(flags: str, threshold: int) -> str:
    """`flags` (an `XLA_FLAGS` value) with `xla_cpu_small_while_loop_byte_threshold=threshold`
    added: appended to the last `--xla_backend_extra_options=` entry's comma-separated list if
    there is one, else as a new entry at the end. Everything else is kept as it is."""
    option = f"{OPTION}={threshold}"
    entries = list(re.finditer(rf"{EXTRA}=(\"[^\"]*\"|'[^']*'|\S*)", flags))
    if not entries:
        return f"{flags} {EXTRA}={option}".strip()
    last = entries[-1]
    value = last.group(1)
    quote = value[0] if value[:1] in ("'", '"') else ""
    inner = value[1:-1] if quote else value
    merged = f"{inner},{option}" if inner else option
    return f"{flags[: last.start(1)]}{quote}{merged}{quote}{flags[last.end(1) :]}"


def apply() -> None:
    """Called by `import jaxsim`: add the option to `XLA_FLAGS` where it can take effect (see the
    module's docstring). Never warns."""
    flags = os.environ.get("XLA_FLAGS", "")
    named = named_threshold(flags)
    if OPTION in flags:
        _state.update(
            threshold=named,
            requested=bool(named),
            reason="your XLA_FLAGS set xla_cpu_small_while_loop_byte_threshold; jaxsim kept it",
        )
        return
    threshold = _requested_threshold(os.environ.get(ENV))
    if threshold is None:
        value = os.environ.get(ENV)
        _state.update(
            threshold=None,
            requested=False,
            reason=(
                f"off by default ({ENV}=1 opts in; it changes the rounding of every program of the "
                "process, which breaks gradients that replay adaptive steps, see the engine "
                "docs): XLA's default threshold (1 kB) applies"
                if not (value or "").strip()
                else f"{ENV}={value} opted out: XLA's default threshold (1 kB) applies"
            ),
        )
        return
    if _backend_exists():
        _state.update(
            threshold=None,
            requested=False,
            reason="JAX's backend was created before jaxsim was imported, so jaxsim left "
            "XLA_FLAGS alone: import jaxsim before using JAX, or set XLA_FLAGS="
            f"{EXTRA}={OPTION}={threshold} before starting Python",
        )
        return
    os.environ["XLA_FLAGS"] = with_option(flags, threshold)
    _state.update(
        threshold=threshold,
        requested=True,
        reason=f"set by jaxsim at import ({ENV}={os.environ.get(ENV)})",
    )


@functools.cache
def _probe_hoisted() -> bool:
    # Compiled once per process (XLA's setting is fixed for the process): a loop over a few kB.
    import jax
    import jax.numpy as jnp
    import numpy as np

    def loop(x, stop):
        return jax.lax.while_loop(
            lambda c: c[0][0] < stop, lambda c: (jnp.sin(c[0]) * 1.5 + 1.0, c[1] + 1), (x, 0)
        )

    text = jax.jit(loop).lower(np.ones(_PROBE_SIZE), 100.0).compile().as_text()
    return _HOISTED_TAG in text


def small_loops() -> SmallLoops:
    """Whether XLA's small-while-loop hoisting is on in this process, and why.

    On the CPU, jaxsim compiles each small loop (a step loop over a few kB of state) as one
    function, instead of one runtime call per kernel, by raising XLA's
    `xla_cpu_small_while_loop_byte_threshold` in `XLA_FLAGS` at `import jaxsim` (1 MB). It is
    process-wide and only takes effect if JAX's backend does not exist yet when jaxsim is imported.
    Opt out with the environment variable `JAXSIM_SMALL_LOOPS=0`, or choose the threshold in
    bytes (`JAXSIM_SMALL_LOOPS=65536`); a threshold already named in your `XLA_FLAGS` is kept.
    `docs/engine.md` ("Loop speed on the CPU") has the measured figures.

    The first call compiles a probe loop (tens of milliseconds), which creates JAX's backend if
    it does not exist yet.

    **Returns:** a `SmallLoops` (`requested`, `threshold`, `effective`, `reason`).
    """
    if not _state:  # jaxsim's import always calls `apply`; this is for a bare module import
        apply()
    import jax

    reason = _state["reason"]
    if jax.default_backend() != "cpu":
        effective = False
        reason += f"; the default backend is {jax.default_backend()}, the option concerns the CPU"
    else:
        effective = _probe_hoisted()
        if _state["requested"] and not effective:
            reason += "; but XLA did not compile the probe loop as one function"
    return SmallLoops(
        requested=_state["requested"],
        threshold=_state["threshold"],
        effective=effective,
        reason=reason,
    )
