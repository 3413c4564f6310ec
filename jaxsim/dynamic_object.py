"""Public model contract: `AbstractDynamicObject`, `System`, the `merge_derived` helper and
`ArrayCommand` (a command read as an array in `command_spec`).

A model on the engine (e.g. `effectors.Spacecraft`) subclasses `AbstractDynamicObject`; `derived`
overrides use `merge_derived(outputs, energy)` to combine the two dicts recorded at the samples.
"""

from ._model._dynamic_object import (
    AbstractDynamicObject as AbstractDynamicObject,
    ArrayCommand as ArrayCommand,
    System as System,
    merge_derived as merge_derived,
)


__all__ = ["AbstractDynamicObject", "ArrayCommand", "System", "merge_derived"]
