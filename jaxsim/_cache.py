"""jaxsim's cache folder: JAX's persistent compilation cache and jaxsim's compiled programs.

A fresh process pays for compiling every program again; with the cache a restart loads them
from disk instead. Importing jaxsim sets it up (`configure`):

- the folder is `$JAXSIM_CACHE_DIR`, else the user's cache directory (`$XDG_CACHE_HOME/jaxsim`
  or `~/.cache/jaxsim` on Linux, `~/Library/Caches/jaxsim` on macOS, `%LOCALAPPDATA%/jaxsim` on
  Windows), one subfolder per JAX version (`jax-0.10.2/`);
- `xla/` is JAX's persistent compilation cache (`jax_compilation_cache_dir`), with every entry
  cached (`jax_persistent_cache_min_compile_time_secs=0`: building a model runs about a hundred
  small eager operations, each compiled in well under JAX's default threshold of 1 s). It is set
  only when the user has not chosen a JAX cache folder (`JAX_COMPILATION_CACHE_DIR` or
  `jax.config.update("jax_compilation_cache_dir", ...)` before importing jaxsim), and then for
  every JAX program of the process, not only jaxsim's;
- `programs/` holds jaxsim's compiled simulation programs (`jaxsim._program_cache`): a restart
  skips tracing, lowering and compiling them.

Opt out with the environment variable `JAXSIM_CACHE=0` (before importing jaxsim) or
`jaxsim.disable_cache()` (before the first compile). A folder that cannot be written turns the
cache off. The folder can be deleted at any time; `programs/` keeps the most recently written
`MAX_PROGRAMS` files (`jaxsim._program_cache`), JAX prunes nothing in `xla/`.
"""

import os
import sys
import time
from pathlib import Path

import jax


# When jaxsim was imported [ns since the epoch]: source files written later may differ from the
# code this process runs (`jaxsim._program_cache` then stores nothing keyed by them).
IMPORTED_AT_NS = time.time_ns()
_OFF = ("0", "false", "no", "off")
# JAX's default of `jax_persistent_cache_min_compile_time_secs` [s]; jaxsim lowers it to 0 only
# when the user left it there.
_JAX_DEFAULT_MIN_COMPILE_TIME_S = 1.0

# What `configure` decided: the jaxsim folder (None: off) and whether jaxsim set JAX's cache folder.
_state = {"dir": None, "set_xla": False}


def default_dir() -> Path:
    """The cache folder used when `JAXSIM_CACHE_DIR` is not set (the user's cache directory)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jaxsim"


def configure() -> Path | None:
    """Set up the cache at import (module docstring); returns the folder in use or None (off)."""
    if os.environ.get("JAXSIM_CACHE", "1").strip().lower() in _OFF:
        _state.update(dir=None, set_xla=False)
        return None
    root = Path(os.environ.get("JAXSIM_CACHE_DIR") or default_dir())
    folder = root / f"jax-{jax.__version__}"
    try:  # a read-only home (e.g. some compute nodes): no cache, and no warning per compile
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        writable = os.access(folder, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        _state.update(dir=None, set_xla=False)
        return None
    _state.update(dir=folder, set_xla=False)
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(folder / "xla"))
        if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME_S:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        _state["set_xla"] = True
    return folder


def cache_dir() -> Path | None:
    """The folder of jaxsim's cache in this process, or None when it is off.

    Compiled simulation programs go to its `programs/` subfolder; JAX's persistent compilation
    cache to `xla/` unless the user chose another JAX cache folder (`jax_compilation_cache_dir`).
    Set `JAXSIM_CACHE_DIR` to move it, `JAXSIM_CACHE=0` (or call `jaxsim.disable_cache()`) to turn
    it off.
    """
    return _state["dir"]


def disable_cache() -> None:
    """Turn jaxsim's cache off for the rest of the process (the environment variable
    `JAXSIM_CACHE=0` does the same from the start).

    Compiled programs are no longer read from or written to the cache folder; if jaxsim set JAX's
    persistent compilation cache folder, it is unset. Call it before the first compile: JAX opens
    its cache at the first compile of the process.
    """
    if _state["set_xla"]:
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update(
            "jax_persistent_cache_min_compile_time_secs", _JAX_DEFAULT_MIN_COMPILE_TIME_S
        )
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
    _state.update(dir=None, set_xla=False)
    from . import _program_cache

    _program_cache.clear_memory()


def program_dir() -> Path | None:
    """Where compiled simulation programs are stored (None: the cache is off)."""
    folder = _state["dir"]
    return None if folder is None else folder / "programs"
