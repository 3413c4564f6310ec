"""Public model contract: `AbstractDynamicObject`, `System` and the `merge_derived` helper.

A model on the engine (e.g. `effectors.Spacecraft`) subclasses `AbstractDynamicObject`; `derived`
overrides use `merge_derived(outputs, energy)` to combine the two dicts recorded at the samples.
The implementation is `jaxsim._dynamic_object`.
"""

from ._dynamic_object import (
    AbstractDynamicObject as AbstractDynamicObject,
    System as System,
    merge_derived as merge_derived,
)


__all__ = ["AbstractDynamicObject", "System", "merge_derived"]
