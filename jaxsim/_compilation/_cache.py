"""JAX's persistent compilation cache for jaxsim's programs, opt-in.

A fresh process compiles every program again. JAX's persistent compilation cache keeps compiled
programs on disk, so that a restart loads them instead; jaxsim does not turn it on by itself
(`import jaxsim` changes no JAX setting but `jax_enable_x64`). Turn it on with

- `jaxsim.enable_cache()` (or `jaxsim.enable_cache(path)`), or
- the environment variable `JAXSIM_CACHE`, read when jaxsim is imported: `1` (also `true`,
  `yes`, `on`, `enable(d)`, any case) for the default folder, or a folder path (it has a `/`,
  or starts with `~` or `.`); unset, empty or `0` (`false`, `no`, `off`, `disable(d)`) leaves the
  cache off. Another word (e.g. `JAXSIM_CACHE=enbled`) is refused by name with a warning and
  leaves the cache off (write `./enbled` for a folder of that name).

The default folder is the user's cache directory (`$XDG_CACHE_HOME/jaxsim` or `~/.cache/jaxsim`
on Linux, `~/Library/Caches/jaxsim` on macOS, `%LOCALAPPDATA%/jaxsim` on Windows), one subfolder
per JAX version (`jax-0.10.2/`). A JAX cache folder the user chose before (`JAX_COMPILATION_CACHE_DIR`
or `jax.config.update("jax_compilation_cache_dir", ...)`) is kept when no path is given.

Turning it on sets `jax_compilation_cache_dir` for the process (that is where JAX keeps its
cache: the user's other programs may be stored there too, under JAX's own rules). It never
changes JAX's thresholds: JAX stores a program only if it compiled in at least
`jax_persistent_cache_min_compile_time_secs` (default 1 s). jaxsim's top-level simulation
programs (`simulate`, `run_batch`, functions wrapped by `jaxsim.jit`) are stored whatever their
compile time: their compiles run with the threshold at 0 for the calling thread only (JAX's
thread-local setting), so no other program of the process is affected. The small eager
operations of a model's construction stay under JAX's default rule (most are not stored).

A top-level `simulate` checks `throw=True` on the host after the run (`jaxsim._result._host_checks`):
its program then has no host callbacks, which JAX's cache refuses. `progress=True` adds host
callbacks (the reports): such a program is compiled in every process.
"""

import contextlib
import os
import sys
import warnings
from pathlib import Path

import jax


_ON = ("1", "true", "yes", "on", "y", "t", "enable", "enabled")
_OFF = ("", "0", "false", "no", "off", "n", "f", "disable", "disabled", "none")

# The folder `enable_cache` turned on (None: off), and whether it set JAX's cache folder itself.
_state = {"dir": None, "set_xla": False}


def default_dir() -> Path:
    """The default folder: jaxsim's subfolder of the user's cache directory, per JAX version."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jaxsim" / f"jax-{jax.__version__}"


def _reset_jax_cache() -> None:
    # JAX opens its cache at the first compile of a process: a changed folder takes effect after
    # a reset (public API of `jax.experimental.compilation_cache`).
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()


def enable_cache(path: str | os.PathLike | None = None) -> Path:
    """Turn on JAX's persistent compilation cache for this process; returns its folder.

    **Arguments:**

    - `path`: the folder. None: the JAX cache folder already chosen by the user
      (`jax_compilation_cache_dir`), else jaxsim's default folder
      (`~/.cache/jaxsim/jax-<version>` on Linux; `jaxsim.cache_dir()` tells which).

    A restart then loads jaxsim's simulation programs from disk instead of compiling them (the
    first call of the demo model in a second process: `benchmarks/results/restart.md`). JAX's
    compile-time threshold is left as it is for every other program of the process; jaxsim's own
    top-level programs are stored whatever their compile time. The environment variable
    `JAXSIM_CACHE=1` (or a folder path), set before importing jaxsim, does the same at import.
    `jaxsim.disable_cache()` turns it off again.

    Raises `OSError` naming the folder when it cannot be created or written.
    """
    current = jax.config.jax_compilation_cache_dir
    if path is None and current and not _state["set_xla"]:
        folder = Path(current)
    else:
        folder = Path(path) if path is not None else default_dir()
    folder = folder.expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise OSError(
            f"jaxsim.enable_cache: cannot create the cache folder {folder}: {err}"
        ) from err
    if not os.access(folder, os.W_OK):
        raise OSError(f"jaxsim.enable_cache: the cache folder {folder} is not writable.")
    if current != str(folder):
        jax.config.update("jax_compilation_cache_dir", str(folder))
        _reset_jax_cache()
        _state["set_xla"] = True
    _state["dir"] = folder
    return folder


def disable_cache() -> None:
    """Turn off what `jaxsim.enable_cache()` (or `JAXSIM_CACHE`) turned on.

    jaxsim's programs are no longer stored with the threshold at 0; JAX's cache folder is unset if
    jaxsim set it (a folder the user chose stays). Files already written stay on disk.
    """
    if _state["set_xla"]:
        jax.config.update("jax_compilation_cache_dir", None)
        _reset_jax_cache()
    _state.update(dir=None, set_xla=False)


def cache_dir() -> Path | None:
    """The folder of the persistent cache jaxsim turned on (`jaxsim.enable_cache`), or None."""
    return _state["dir"]


def from_environment() -> Path | None:
    """Turn the cache on at import when `JAXSIM_CACHE` asks for it (module docstring).

    A folder that cannot be used warns (`RuntimeWarning`) and leaves the cache off: importing
    jaxsim does not fail for it.
    """
    value = os.environ.get("JAXSIM_CACHE", "").strip()
    if value.lower() in _OFF:
        return None
    if value.lower() not in _ON and not _looks_like_path(value):
        warnings.warn(
            f"JAXSIM_CACHE={value!r} is neither a true/false word (on: {', '.join(_ON)}; off: "
            f"{', '.join(repr(w) for w in _OFF)}) nor a folder path (a path has a '/' or starts "
            f"with '~' or '.': write './{value}' for a folder of that name); the cache stays off.",
            RuntimeWarning,
            2,
        )
        return None
    try:
        return enable_cache(None if value.lower() in _ON else value)
    except OSError as err:
        warnings.warn(f"{err} (JAXSIM_CACHE={value!r}); the cache stays off.", RuntimeWarning, 2)
        return None


def _looks_like_path(value: str) -> bool:
    return value.startswith(("~", ".")) or "/" in value or os.sep in value


@contextlib.contextmanager
def for_jaxsim_programs():
    """Within: programs compiled by this thread are stored whatever their compile time, when
    jaxsim's cache is on (`enable_cache`); otherwise nothing changes.

    Uses JAX's thread-local override of `jax_persistent_cache_min_compile_time_secs` (the
    setting's own context manager); without it (another JAX), JAX's threshold applies.
    """
    setting = _min_compile_time_setting() if _state["dir"] is not None else None
    if setting is None:
        yield
        return
    with setting(0.0):
        yield


def _min_compile_time_setting():
    try:
        from jax._src import config as jax_config

        setting = jax_config.persistent_cache_min_compile_time_secs
    except (ImportError, AttributeError):
        return None
    return setting if callable(setting) else None
