"""`Dispersions`: a pytree of distributions (and constants) sampled per member from one key, and
the checks of that key.

Parameter `p` of member `i` is drawn from `fold_in(fold_in(key, hash(p)), i)`, so its draw does
not depend on the number of members, the chunk size, the device count or the other parameters.
"""

import zlib
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np
from jaxtyping import PyTree

from .distributions import AbstractDistribution


__all__ = ["Dispersions"]


def _is_dist(x) -> bool:
    return isinstance(x, AbstractDistribution)


def _path_id(path) -> int:
    """A stable 31-bit id of a pytree path (the per-parameter `fold_in` data)."""
    return zlib.crc32(jtu.keystr(path).encode()) & 0x7FFFFFFF


def _check_key(where: str, key):
    if key is None:
        raise ValueError(
            f"{where}: `key` (a jax.random key) is required with dispersions; got None."
        )
    dtype = getattr(key, "dtype", None)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    legacy = dtype == jnp.uint32 and np.shape(key) == (2,)
    if not (typed and np.shape(key) == ()) and not legacy:
        raise ValueError(
            f"{where}: `key` must be one jax.random key (`jax.random.key(seed)`); got "
            f"{type(key).__name__} of shape {np.shape(key)} and dtype {dtype}."
        )
    return key


def _is_typed_key(key) -> bool:
    return jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key)


class Dispersions(eqx.Module):
    """A pytree of distributions (and constants), sampled per member from one key.

    **Arguments:**

    - `tree`: a pytree (usually a dict) whose leaves are `AbstractDistribution`s or constants
      (numbers/arrays, repeated for every member).

    The parameter at path `path` of member `i` is drawn from the key
    `fold_in(fold_in(key, h), i)`, `h` a hash of `jax.tree_util.keystr(path)`: a member's draw
    depends on neither `n`, the chunk size, the device count nor the other parameters of the
    tree (adding a dispersion leaves the existing ones' draws unchanged). The distributions avoid
    reductions and `dot`s, whose rounding XLA may vary with the batch size, so the draws are
    bitwise reproducible.

    !!! example

        ```python
        disp = mc.Dispersions({"mass": mc.percent(750.0, 5.0), "omega_BN_B": mc.Normal(w0, 5e-4)})
        params = disp.sample(jr.key(0), 100)      # {"mass": (100,), "omega_BN_B": (100, 3)}
        params_17 = disp.sample_member(jr.key(0), 17)
        ```
    """

    tree: Any

    def __init__(self, tree: PyTree):
        leaves = jtu.tree_leaves(tree, is_leaf=_is_dist)
        if not leaves:
            raise ValueError(
                f"Dispersions: `tree` must hold at least one distribution; got {tree!r}."
            )
        paths = jtu.tree_flatten_with_path(tree, is_leaf=_is_dist)[0]

        def convert(path, leaf):
            if _is_dist(leaf):
                return leaf
            try:
                return jnp.asarray(leaf, dtype=float) if not hasattr(leaf, "dtype") else leaf
            except (TypeError, ValueError):
                raise ValueError(
                    f"Dispersions: `tree{jtu.keystr(path)}` must be a distribution or a numeric "
                    f"constant; got {leaf!r}."
                ) from None

        ids = [_path_id(p) for p, _ in paths]
        if len(set(ids)) != len(ids):  # a crc32 collision would correlate two parameters
            raise ValueError(
                f"Dispersions: `tree` paths {[jtu.keystr(p) for p, _ in paths]} collide in their "
                "hash; rename one of them."
            )
        self.tree = jtu.tree_map_with_path(convert, tree, is_leaf=_is_dist)

    def sample_member(self, key, i):
        """The parameters of member `i` (no leading axis)."""
        key = _check_key("Dispersions", key)

        def draw(path, leaf):
            if _is_dist(leaf):
                return leaf.sample(jr.fold_in(jr.fold_in(key, _path_id(path)), i))
            return leaf

        return jtu.tree_map_with_path(draw, self.tree, is_leaf=_is_dist)

    def sample_members(self, key, members):
        """The parameters of the members `members` (integer array), stacked on a leading axis."""
        members = jnp.asarray(members)
        return _sample_members(self, _check_key("Dispersions", key), members)

    def sample(self, key, n: int):
        """The parameters of members `0 .. n-1`, stacked on a leading axis of length `n`."""
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"Dispersions: `n` must be an integer >= 1; got {n!r}.")
        return self.sample_members(key, jnp.arange(int(n)))


@eqx.filter_jit
def _sample_members(disp, key, members):
    return jax.vmap(lambda i: disp.sample_member(key, i))(members)
