"""Public construction-time validation helpers (for models built on the engine, e.g. `effectors`).

Every check raises `ValueError` in the package's form
``"<Class>: `<arg>` <expected> [unit]; got <value>."``, naming the class, the argument, its unit and
the offending value; value checks run only on concrete arrays (tracers pass the shape checks only).

`spans_checked()` tells a model input that covers a limited time span (it declares
`time_span_checks(t0, t1)`) whether the program being traced is one of
`simulate`'s, whose run times were checked against the span before the run: the input then needs
no run-time check (a host callback, which keeps the program out of JAX's persistent cache).
"""

from ._model._arguments import match_tree as match_tree
from ._model._spans import spans_checked as spans_checked
from ._model._validation import (
    as_array as as_array,
    check_inertia as check_inertia,
    check_name as check_name,
    check_nonnegative as check_nonnegative,
    check_orthonormal as check_orthonormal,
    check_positive as check_positive,
    check_unique_names as check_unique_names,
    check_unit_vectors as check_unit_vectors,
    fail as fail,
    is_concrete as is_concrete,
)


__all__ = [
    "as_array",
    "check_inertia",
    "check_name",
    "check_nonnegative",
    "check_orthonormal",
    "check_positive",
    "check_unique_names",
    "check_unit_vectors",
    "fail",
    "is_concrete",
    "match_tree",
    "spans_checked",
]
