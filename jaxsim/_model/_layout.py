"""The flat state: one static layout maps a state pytree to one vector and back.

The drivers carry the state between steps (and the stage loops between stages) as one flat
vector: on the CPU runtime a loop carry costs a copy per leaf per iteration, and a flat vector
also gives every leaf a static address (an offset and a size, like MuJoCo's `qpos` addresses)
that code working on the whole state can use. The pytree exists at the API boundary: `y0`
given by the user, the drift's arguments, and the saved samples.

A state whose leaves mix dtypes (or holds non-floating leaves) has no layout (`StateLayout.of`
returns None) and the drivers carry it as a pytree.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu


class StateLayout(eqx.Module):
    """Offsets, shapes and dtype of the leaves of a state pytree in one flat vector."""

    treedef: jtu.PyTreeDef = eqx.field(static=True)
    shapes: tuple = eqx.field(static=True)
    offsets: tuple = eqx.field(static=True)
    paths: tuple = eqx.field(static=True)
    dtype: jnp.dtype = eqx.field(static=True)
    size: int = eqx.field(static=True)

    @classmethod
    def of(cls, tree) -> "StateLayout | None":
        """The layout of `tree` (arrays or shape-dtype structs), or None if its leaves mix dtypes."""
        with_paths, treedef = jtu.tree_flatten_with_path(tree)
        leaves = [leaf for _, leaf in with_paths]
        dtypes = {jnp.result_type(x) for x in leaves}
        if len(dtypes) != 1 or not jnp.issubdtype(next(iter(dtypes)), jnp.inexact):
            return None
        shapes = tuple(tuple(jnp.shape(x)) for x in leaves)
        sizes = [math.prod(s) for s in shapes]
        offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
        paths = tuple(jtu.keystr(p) for p, _ in with_paths)
        return cls(treedef, shapes, offsets, paths, next(iter(dtypes)), sum(sizes))

    def flatten(self, tree) -> jax.Array:
        """The flat vector of `tree` (leaves in layout order)."""
        leaves = self.treedef.flatten_up_to(tree)
        if not leaves:
            return jnp.zeros((0,), self.dtype)
        return jnp.concatenate([jnp.reshape(x, (-1,)).astype(self.dtype) for x in leaves])

    def unflatten(self, v) -> object:
        """The pytree of flat vector `v` (static slices)."""
        leaves = [
            jnp.reshape(v[o : o + math.prod(s)], s)
            for o, s in zip(self.offsets, self.shapes, strict=True)
        ]
        return jtu.tree_unflatten(self.treedef, leaves)

    def address(self, path: str) -> slice:
        """The slice of the leaf at `path` (as `jax.tree_util.keystr` writes it, e.g.
        `"['hub']['sigma_BN']"`)."""
        try:
            i = self.paths.index(path)
        except ValueError:
            raise KeyError(
                f"StateLayout.address: no leaf at {path!r}; the leaves are {list(self.paths)}."
            ) from None
        return slice(self.offsets[i], self.offsets[i] + math.prod(self.shapes[i]))
