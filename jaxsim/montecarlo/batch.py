"""Batches: `run_batch` evaluates a member function over chunks of members with `jax.vmap` (one
compiled program for all chunks, optionally sharded over devices) and returns a `BatchResult`
(the member records, `jaxsim.montecarlo._records`).

Also here: the member sources (`Dispersions` + key, or stacked parameters), the sharding and
compile-cache helpers, the worker threads that run chunks concurrently, progress reporting and
`member_range`.
"""

import hashlib
import math
import os
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np
from jaxtyping import PRNGKeyArray, PyTree

from .._compilation._jit import compiler_options, program
from .._drivers._progress import Bar
from ._records import (
    _SEP,
    RAISED as RAISED,
    BatchResult as BatchResult,
    _finite,
    _normalize,
    _result_code,
)
from .dispersions import Dispersions, _check_key, _is_typed_key, _sample_members
from .distributions import AbstractDistribution


__all__ = ["BatchResult", "member_range", "run_batch"]

# What a member raising at run time surfaces as: `eqx.error_if` (a `throw=True` solve, a model's
# check) and failing host callbacks raise a JaxRuntimeError, or (while dispatching) a ValueError,
# whose text carries the callback's error. Only those are isolated per member: errors at trace
# time (a bug in `fn`) and other run-time errors (e.g. out of memory) propagate.
_RUNTIME_ERRORS = (jax.errors.JaxRuntimeError, ValueError, RuntimeError)
_RUNTIME_MARKS = ("EquinoxRuntimeError", "CpuCallback error", "GpuCallback error")
_CAUSE_CHARS = 500  # longest cause kept per raised member (the first line of the error)


def _units(source) -> dict:
    """`{"params/<path>": unit}` of the dispersions that declare one."""
    if source.disp is None:
        return {}
    leaves = jax.tree_util.tree_flatten_with_path(
        source.disp.tree, is_leaf=lambda x: isinstance(x, AbstractDistribution)
    )[0]
    units = {}
    for path, leaf in leaves:
        unit = getattr(leaf, "unit", "")
        if unit:
            keys = [str(getattr(p, "key", getattr(p, "idx", p))) for p in path]
            units[_SEP.join(["params", *keys])] = unit
    return units


# ----------------------------------------------------------------------------------------------
# Running: the compiled chunk program
# ----------------------------------------------------------------------------------------------


class _Source:
    """Where member parameters come from: `Dispersions` + key, or stacked parameter arrays."""

    def __init__(self, where: str, params, key, n):
        self.disp = params if isinstance(params, Dispersions) else None
        if self.disp is not None:
            self.key = _check_key(where, key)
            if not isinstance(n, int | np.integer) or n < 1:
                raise ValueError(
                    f"{where}: `n` (number of members) must be an integer >= 1 with dispersions; "
                    f"got {n!r}."
                )
            self.n = int(n)
            self.params = None
            return
        if key is not None:
            raise ValueError(
                f"{where}: `key` applies to `Dispersions` only; got a key with `params` of type "
                f"{type(params).__name__} (sample it first, or pass a Dispersions)."
            )
        leaves = jtu.tree_leaves(params)
        if not leaves:
            raise ValueError(
                f"{where}: `params` must be a Dispersions or a non-empty pytree of arrays with a "
                f"leading member axis; got {params!r}."
            )
        try:
            params = jtu.tree_map(np.asarray, params)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{where}: `params` leaves must be numeric arrays; got {err}."
            ) from None
        lengths = {np.shape(x)[0] if np.ndim(x) else None for x in jtu.tree_leaves(params)}
        if None in lengths or len(lengths) != 1:
            shapes = [np.shape(x) for x in jtu.tree_leaves(params)]
            raise ValueError(
                f"{where}: `params` leaves must share a leading member axis; got shapes {shapes}."
            )
        (length,) = lengths
        if n is not None and n != length:
            raise ValueError(
                f"{where}: `n` must equal the leading axis of `params` ({length}); got {n!r}."
            )
        self.n, self.params, self.key = int(length), params, None

    def digest(self) -> str:
        """sha256 of the key and the dispersions (or of the parameter arrays)."""
        h = hashlib.sha256()
        if self.disp is not None:
            leaves, treedef = jtu.tree_flatten(self.disp)
            h.update(str(treedef).encode())
            data = jr.key_data(self.key) if _is_typed_key(self.key) else self.key
            h.update(np.asarray(data).tobytes())
        else:
            leaves, treedef = jtu.tree_flatten(self.params)
            h.update(str(treedef).encode())
        for leaf in leaves:
            arr = np.asarray(leaf)
            h.update(f"{arr.dtype}{arr.shape}".encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def chunk_input(self, members: np.ndarray):
        return jtu.tree_map(lambda x: x[members], self.params)


def _mesh_sharding(where: str, devices, mesh, axis_name):
    if devices is not None and mesh is not None:
        raise ValueError(f"{where}: give `devices` or `mesh`, not both.")
    if devices is not None:
        devices = list(devices)
        if not devices:
            raise ValueError(f"{where}: `devices` must be a non-empty sequence; got [].")
        mesh = jax.sharding.Mesh(np.asarray(devices), ("members",))
    if mesh is None:
        return None, 1
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ValueError(f"{where}: `mesh` must be a jax.sharding.Mesh; got {type(mesh).__name__}.")
    axis = mesh.axis_names[0] if axis_name is None else axis_name
    if axis not in mesh.axis_names:
        raise ValueError(
            f"{where}: `axis_name` must be one of the mesh axes {mesh.axis_names}; got {axis!r}."
        )
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    return sharding, int(mesh.shape[axis])


def _setup(where: str, fn, params, key, n, devices, mesh, axis_name):
    """Check `fn`; return the member source and the sharding: `(source, sharding, n_dev)`."""
    if not callable(fn):
        raise ValueError(f"{where}: `fn` must be callable; got {type(fn).__name__}.")
    source = _Source(where, params, key, n)
    sharding, n_dev = _mesh_sharding(where, devices, mesh, axis_name)
    return source, sharding, n_dev


# Compiled chunk programs per member function, so that a second batch with the same `fn` (another
# key, other dispersion values, more members) reuses the compilation when the chunk shapes agree.
_PROGRAMS: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_SAMPLERS: dict = {}


def _check_member_outputs(out) -> None:
    """A member's outputs are arrays (or numbers): any other leaf (a string, an object) would be
    carried through unchecked, so it is refused, naming its path."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(out):
        if isinstance(leaf, jax.Array | np.ndarray | np.generic | int | float | complex | bool):
            continue
        raise TypeError(
            f"run_batch: the member function's output at {jax.tree_util.keystr(path) or 'the top'}"
            f" must be an array or a number; got {type(leaf).__name__} {leaf!r:.60}."
        )


def _compile(fn, sharding):
    """`(jit(vmap(member)), schema)`: `(params) -> (params, outputs, result, finite)`, and a dict
    whose `"schema"` the trace sets to the `Solution.info`s of the outputs (`_normalize`)."""
    schema: dict = {}

    def member(params):
        results: list = []
        infos: list = []
        raw = fn(params)
        _check_member_outputs(raw)
        out = _normalize(raw, results, infos)
        schema["schema"] = tuple(infos)
        return _normalize(params, []), out, _result_code(results), _finite(out)

    options = compiler_options()
    batched = program(jax.vmap(member), options)  # traced as hoisted where compiled so
    if sharding is None:
        return jax.jit(batched, compiler_options=options), schema
    jitted = jax.jit(
        batched, in_shardings=(sharding,), out_shardings=sharding, compiler_options=options
    )
    return jitted, schema


def _sampler(sharding):
    """The sampling program of a chunk: `(disp, key, members) -> params` (the one of
    `Dispersions.sample` when unsharded, so that both draw bitwise the same values)."""
    if sharding is None:
        return _sample_members
    if sharding not in _SAMPLERS:
        replicated = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
        batched = jax.vmap(lambda d, k, i: d.sample_member(k, i), in_axes=(None, None, 0))
        _SAMPLERS[sharding] = jax.jit(
            batched, in_shardings=(replicated, replicated, sharding), out_shardings=sharding
        )
    return _SAMPLERS[sharding]


class _Program:
    """The compiled chunk program of `fn` for one source: `run(members) -> (params, outputs,
    result, finite)` for the (padded) member indices `members`.

    Dispersions are sampled by a program of their own, apart from `fn`: fused into the
    simulation, XLA could evaluate the same expressions with a different rounding, and a member's
    parameters would then differ in the last bit from `Dispersions.sample`'s.
    """

    def __init__(self, fn, source: _Source, sharding):
        self.source, self.sharding = source, sharding
        try:
            cache = _PROGRAMS.setdefault(fn, {})
        except TypeError:  # not weak-referenceable: compile for this run only
            cache = {}
        if sharding not in cache:
            cache[sharding] = _compile(fn, sharding)
        self.call, self._schema = cache[sharding]
        self.sample = _sampler(sharding) if source.disp is not None else None
        self.compiled = None

    def compile(self, members: np.ndarray):
        """Compile the chunk program for chunks shaped like `members` (and the sampler, by
        drawing them) on this thread; `run` then calls that executable.

        Before chunks run on worker threads: the compile (and the trace, where a bug in `fn`
        raises) happens once, here, and the threads call one executable that does not depend on
        their thread-local JAX settings (e.g. a `jax.default_matmul_precision` context around
        `run_batch`), so their results are bitwise those of `call`.
        """
        self.compiled = self.call.lower(self.inputs(members)).compile()

    def inputs(self, members: np.ndarray):
        """The parameters of the (padded) members, as the chunk program takes them."""
        if self.sample is not None:
            idx = jnp.asarray(members)
            if self.sharding is not None:
                idx = jax.device_put(idx, self.sharding)
            return self.sample(self.source.disp, self.source.key, idx)
        x = self.source.chunk_input(members)
        if self.sharding is not None:
            x = jax.device_put(x, self.sharding)
        return x

    def run(self, members: np.ndarray):
        call = self.call if self.compiled is None else self.compiled
        return call(self.inputs(members))

    @property
    def schema(self) -> tuple:
        """The `Solution.info`s of the outputs, `((path, RunInfo), ...)` (set by the trace)."""
        return self._schema.get("schema", ())

    def shapes(self, members: np.ndarray):
        """`jax.eval_shape` of `run(members)`: `(params, outputs, result, finite)` shapes."""
        return jax.eval_shape(self.call, self.inputs(members))


def _pad(chunk: np.ndarray, size: int) -> np.ndarray:
    """`chunk` padded to `size` members with copies of its last member."""
    return np.concatenate([chunk, np.full(size - chunk.size, chunk[-1], dtype=chunk.dtype)])


def _raised_at_run_time(err: Exception) -> bool:
    if isinstance(err, eqx.EquinoxRuntimeError):
        return True
    return isinstance(err, _RUNTIME_ERRORS) and any(m in str(err) for m in _RUNTIME_MARKS)


def _cause(err: Exception) -> str:
    """A one-line cause of a run-time error: Equinox's message (`eqx.error_if`, e.g. a solve with
    `throw=True`) when there is one, else the error's first line."""
    text = str(err)
    found = re.search(r"EquinoxRuntimeError: (.+)", text)
    if found:
        line = found.group(1).strip()
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        line = lines[0] if lines else type(err).__name__
    return line[:_CAUSE_CHARS]


def _fill(shapes, valid: int):
    """Arrays of `valid` members with the shapes/dtypes of `shapes` (minus their leading axis):
    NaN for floats, 0 for integers, False for booleans."""

    def full(s):
        if jnp.issubdtype(s.dtype, jnp.inexact):
            value = np.nan
        elif s.dtype == bool:
            value = False
        else:
            value = 0
        return np.full((valid, *s.shape[1:]), value, dtype=s.dtype)

    return jtu.tree_map(full, shapes)


def _run_members(program: "_Program", members: np.ndarray, size: int):
    """Host results of `members` (at most `size`) through the chunk program, and
    `{member: cause}` of those that raised at run time.

    When the chunk raises (one member failing with `throw=True` aborts the whole compiled
    call), it is split in halves, each run again through the same compiled program (padded), down
    to the single members that raise; members of a chunk compute independently of each other
    (`vmap` lanes), so the others' results are bitwise those of an error-free chunk. A raising
    member gets `RAISED`, NaN outputs and `ok = False`; its parameters are kept.
    """
    padded = _pad(members, size)
    try:
        return _host_chunk(program.run(padded), members.size), {}
    except Exception as err:
        if not _raised_at_run_time(err):
            raise
        if members.size == 1:
            cause = _cause(err)
        else:
            half = members.size // 2
            first, errors_a = _run_members(program, members[:half], size)
            second, errors_b = _run_members(program, members[half:], size)
            return _concat([first, second], True), {**errors_a, **errors_b}
    _, outputs, code, finite = _fill(program.shapes(padded), 1)
    params = _host_chunk(_normalize(program.inputs(padded), []), 1)
    code[:] = RAISED
    return (params, outputs, code, finite), {int(members[0]): cause}


def _round_up(a: int, b: int) -> int:
    return -(-a // b) * b


def _check_chunk_size(where, chunk_size, n, n_dev, required=False):
    if chunk_size is None:
        if required:
            raise ValueError(f"{where}: `chunk_size` (members per chunk) is required; got None.")
        return _round_up(n, n_dev)
    if not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"{where}: `chunk_size` must be an integer >= 1; got {chunk_size!r}.")
    if chunk_size % n_dev:
        raise ValueError(
            f"{where}: `chunk_size` must be a multiple of the {n_dev} devices that share each "
            f"chunk; got {chunk_size}."
        )
    return int(chunk_size)


def _check_workers(where, workers):
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise ValueError(
            f"{where}: `workers` (chunks run at the same time) must be an integer >= 1 or None; "
            f"got {workers!r}."
        )
    return int(workers)


def usable_cores() -> int:
    """The CPU cores this process may run on: its CPU affinity where the platform reports it
    (a container or `taskset` may allow fewer than the machine has), else `os.cpu_count()`."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not reported on this platform
        return os.cpu_count() or 1


def _resolve_workers(workers: int | None, sharding, n_chunks: int) -> int:
    """The number of chunks run at the same time: `workers`, by default (`None`) one per CPU
    core on the CPU backend without sharding, else 1; at most `n_chunks`; 1 when new threads
    would not see this thread's float64 mode (see `_x64_of_new_threads`)."""
    if workers is None:
        if sharding is not None or jax.default_backend() != "cpu":
            return 1
        workers = usable_cores()
    workers = max(1, min(workers, n_chunks))
    if workers > 1 and _x64_of_new_threads() != bool(jax.config.jax_enable_x64):
        return 1
    return workers


def _x64_of_new_threads() -> bool:
    """`jax_enable_x64` as a new thread sees it: JAX's configuration contexts are thread-local,
    so under `with jax.enable_x64(False):` worker threads would sample and pass float64
    parameters to a program compiled for float32 (the chunks then run on the calling thread)."""
    seen = []
    probe = threading.Thread(target=lambda: seen.append(bool(jax.config.jax_enable_x64)))
    probe.start()
    probe.join()
    return seen[0]


class _Progress:
    """Progress reporting: a callable `progress(done, total)`, or the bar of `progress=True`
    (`jaxsim._drivers._progress.Bar`, shared with `simulate`: "compiling" until the first chunk is done,
    then members done, members per second and failures)."""

    def __init__(self, progress, total: int, desc: str):
        self.callback = progress if callable(progress) else None
        self.bar = None
        self.total = total
        if progress is True:
            self.bar = Bar(desc, total, "members")
        elif progress not in (False, None) and self.callback is None:
            raise ValueError(
                f"{desc}: `progress` must be a bool or a callable (done, total); got {progress!r}."
            )

    def compiled(self):
        if self.bar is not None:
            self.bar.status("running")

    def adopted(self, done: int, failed: int):
        """Members finished before this call (a resumed campaign's committed chunks): shown at
        once and left out of the rate."""
        if self.bar is not None:
            self.bar.start_at(done, f"{done} adopted, {failed} failed")
        if self.callback is not None:
            self.callback(done, self.total)

    def update(self, done: int, step: int, failed: int):
        if self.bar is not None:
            self.bar.update(done, f"{failed} failed")
        if self.callback is not None:
            self.callback(done, self.total)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _host_chunk(raw, valid: int):
    """Chunk outputs to numpy, dropping padded members."""
    return jtu.tree_map(lambda x: np.asarray(x)[:valid], raw)


def _concat(parts, to_host: bool):
    if len(parts) == 1:
        return parts[0]
    cat = np.concatenate if to_host else jnp.concatenate
    return jtu.tree_map(lambda *xs: cat(xs, axis=0), *parts)


def member_range(n: int, process_index: int, process_count: int, chunk_size: int = 1) -> range:
    """The contiguous block of members `0 .. n-1` that process `process_index` of `process_count`
    runs (blocks of whole chunks of `chunk_size`, as even as possible).

    !!! example

        ```python
        # multi-host: after jax.distributed.initialize(), on every host
        mine = mc.member_range(n, jax.process_index(), jax.process_count(), chunk_size)
        res = mc.run_batch(fn, disp, key=key, n=n, members=mine, devices=jax.local_devices())
        ```
    """
    for name, value, low in (
        ("n", n, 1),
        ("process_count", process_count, 1),
        ("chunk_size", chunk_size, 1),
    ):
        if not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"member_range: `{name}` must be an integer >= {low}; got {value!r}.")
    if not isinstance(process_index, int | np.integer) or not 0 <= process_index < process_count:
        raise ValueError(
            f"member_range: `process_index` must be an integer in [0, {process_count}); got "
            f"{process_index!r}."
        )
    n_chunks = math.ceil(n / chunk_size)
    lo = process_index * n_chunks // process_count
    hi = (process_index + 1) * n_chunks // process_count
    return range(min(lo * chunk_size, n), min(hi * chunk_size, n))


def run_batch(
    fn: Callable[[Any], Any],
    params: PyTree,
    *,
    key: PRNGKeyArray | None = None,
    n: int | None = None,
    chunk_size: int | None = None,
    members: Sequence[int] | None = None,
    devices: Sequence[jax.Device] | None = None,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str | None = None,
    progress: bool | Callable[[int, int], None] = False,
    to_host: bool = True,
    workers: int | None = None,
) -> BatchResult:
    r"""Evaluate `fn` for every member, `chunk_size` members at a time with `jax.vmap`.

    All chunks run the same compiled program (the last one is padded with copies of its last
    member, whose results are dropped), several at a time on the CPU (see `workers`). Failed
    members are reported, not raised: see `BatchResult.ok` and `BatchResult.messages`. A member
    that raises at run time (e.g. `simulate(..., throw=True)`) does not abort its chunk: the chunk
    is re-run in halves through the same program to isolate it, and it is reported in
    `BatchResult.errors`.

    **Arguments:**

    - `fn`: `fn(params) -> pytree` for one member (no leading axis), traceable (it runs under
      `jit` and `vmap`); a `Solution` in its output is checked through `Solution.result`.
    - `params`: a `Dispersions` (then `key` and `n` are required), or a pytree of arrays with a
      leading member axis (e.g. `Dispersions.sample(key, n)` or a design of experiments).
    - `key`: the `jax.random` key of the dispersions.
    - `n`: number of members (members `0 .. n-1`).
    - `chunk_size`: members per compiled call (default: all, one chunk); a multiple of the
      device count when sharded. On the CPU, give several chunks (see `workers`).
    - `members`: run only these member indices (e.g. `member_range(...)` on one host of several,
      or the failed members of a previous run); default all.
    - `devices` / `mesh`, `axis_name`: shard each chunk's member axis over these devices (a 1-D
      mesh is built from `devices`), or over the axis `axis_name` of `mesh` (default its first).
    - `progress`: `True` for a `tqdm.auto` bar (the `progress` extra; "compiling" until the
      first chunk is done, then members per second and failures), or a callable
      `progress(done, total)` called after every chunk.
    - `to_host`: copy every chunk's results to numpy as it finishes (default; frees device
      memory). With `False` results stay device arrays (sharded when `devices`/`mesh` is given).
    - `workers`: how many chunks run at the same time, each called from a thread of a pool
      (one compiled program, compiled once before any chunk starts). XLA on the CPU runs a call
      on the calling thread, and a chunk of a small model uses about one core, so threads use
      several cores. Default: on the CPU backend without `devices`/`mesh`, one per CPU core
      this process may use (its CPU affinity), else 1; never more than the number of chunks.
      On the CPU, pass a `chunk_size` giving at least as many chunks as cores (the default
      `chunk_size` is one chunk: one core). Results are bitwise those of `workers=1`, in
      member order; progress is reported from the calling thread, in chunk order. Under a
      thread-local `jax.enable_x64(...)` context the chunks run on the calling thread.

    **Returns:** a `BatchResult`.

    !!! example

        ```python
        res = mc.run_batch(member, disp, key=jr.key(0), n=1024, chunk_size=256)  # 4 chunks
        print(res.n_failed, res.failures()[:3])
        ```
    """
    where = "run_batch"
    source, sharding, n_dev = _setup(where, fn, params, key, n, devices, mesh, axis_name)
    if members is None:
        todo = np.arange(source.n)
    else:
        todo = np.asarray(members, dtype=np.int64).reshape(-1)
        if todo.size == 0 or np.any(todo < 0) or np.any(todo >= source.n):
            raise ValueError(
                f"{where}: `members` must be a non-empty set of indices in [0, {source.n}); got "
                f"{members!r}."
            )
        todo = np.unique(todo)
    size = _check_chunk_size(where, chunk_size, todo.size, n_dev)
    size = min(size, _round_up(todo.size, n_dev))
    workers = _check_workers(where, workers)
    chunks = [todo[start : start + size] for start in range(0, todo.size, size)]
    workers = _resolve_workers(workers, sharding, len(chunks))
    program = _Program(fn, source, sharding)
    reporter = _Progress(progress, int(todo.size), where)

    def run_chunk(chunk):
        """`(results, {member: cause})` of one chunk."""
        if to_host:
            return _run_members(program, chunk, size)
        try:
            raw = jax.block_until_ready(program.run(_pad(chunk, size)))
        except Exception as err:  # isolate the raising members (on the host)
            if not _raised_at_run_time(err):
                raise
            return _run_members(program, chunk, size)
        valid = chunk.size
        return (raw if valid == size else jtu.tree_map(lambda x: x[:valid], raw)), {}

    parts, failed, errors, done = [], 0, {}, 0
    pool = None
    try:
        if workers == 1:
            outcomes = map(run_chunk, chunks)
        else:
            # Compiled here, once, before any chunk starts; the threads call that executable
            # (XLA on the CPU runs a call on the calling thread: one core per chunk in flight).
            program.compile(_pad(chunks[0], size))
            reporter.compiled()
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run_batch")
            futures = [pool.submit(run_chunk, chunk) for chunk in chunks]
            outcomes = (future.result() for future in futures)  # in chunk order
        # Results, failure counts and progress are gathered on this thread, in chunk order.
        for chunk, (part, raised) in zip(chunks, outcomes, strict=True):
            valid = chunk.size
            errors.update(raised)
            _, _, code, finite = part
            failed += valid - int(np.sum((np.asarray(code) == 0) & np.asarray(finite)))
            parts.append(part)
            done += valid
            reporter.update(done, valid, failed)
    finally:
        if pool is not None:  # on an error: drop the chunks not started, wait for the others
            pool.shutdown(wait=True, cancel_futures=True)
        reporter.close()
    params_, outputs, code, finite = _concat(parts, to_host)
    ok = (code == 0) & finite
    return BatchResult(
        members=todo,
        ok=ok,
        result=code,
        params=params_,
        outputs=outputs,
        n_total=source.n,
        complete=todo.size == source.n,
        errors=tuple(sorted(errors.items())),
        schema=program.schema,
        units=tuple(_units(source).items()),
    )
