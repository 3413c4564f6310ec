r"""Commands tagged with their unit: `Quantity(value, unit)` in `simulate`'s `args`.

A command given as a plain array is read in the unit that the model declares for it
(`units()["args"]`, e.g. `"N m"` for a wheel's `motor_torque`); a plain array carries no unit, so
nothing can be checked. A demanding caller tags the value, `args={"rw": {"motor_torque":
jaxsim.Quantity(u, "N m")}}`: `simulate` compares the tag with the declared unit at the call and
refuses a different one by name (the argument, the unit declared, the unit given), then passes the
plain value on, so the model, flight software and events read arrays as before.

Units are compared as products of symbols with integer powers: `"N m"`, `"N*m"`, `"m N"` and
`"N·m"` are one unit, as are `"rad/s"` and `"rad s^-1"`, or `"kg m^2"` and `"kg*m**2"`. There is
no conversion: `"mN m"` is another symbol (a value a thousand times too large if read as N m), and
so is `"kg m^2/s^2"` for `"J"`; both are refused. `"-"`, `"1"` and `""` are dimensionless.

**Reference:** BIPM, *The International System of Units (SI)*, 9th ed., 2019, sec. 5.4
(products of units written with a space or a half-high dot, quotients with a solidus or negative
powers).
"""

import functools
import re
from typing import Any

import equinox as eqx
from jaxtyping import ArrayLike


_DIMENSIONLESS = ("", "-", "1")
_TOKEN = re.compile(r"([^\W\d_][^\W\d]*|°|%)(?:\^([+-]?\d+))?")


def parse_unit(unit: str, where: str = "unit") -> tuple:
    """`unit` as a sorted tuple `((symbol, power), ...)` (powers non-zero); a `ValueError` naming
    `where` when it is not a product of symbols with integer powers."""
    if not isinstance(unit, str):
        raise TypeError(f"{where} must be a unit string such as 'N m'; got {type(unit).__name__}.")
    try:
        return _parsed(unit)
    except ValueError as err:
        raise ValueError(f"{where} {err}") from None


@functools.lru_cache(maxsize=1024)
def _parsed(unit: str) -> tuple:
    """`parse_unit` of a string (kept: `simulate` compares the same units at every call)."""
    text = unit.strip().replace("**", "^").replace("·", " ").replace("*", " ")
    text = text.replace("(", " ").replace(")", " ")
    powers: dict[str, int] = {}
    numerator, *denominators = text.split("/")
    for part, sign in [(numerator, 1)] + [(d, -1) for d in denominators]:
        for token in part.split():
            if token in _DIMENSIONLESS:
                continue
            m = _TOKEN.fullmatch(token)
            if m is None:
                raise ValueError(
                    "must be a product of unit symbols with integer powers (e.g. 'N m', "
                    f"'rad/s', 'kg m^2'); got {unit!r} (cannot read {token!r})."
                )
            symbol, power = m.group(1), int(m.group(2) or 1)
            powers[symbol] = powers.get(symbol, 0) + sign * power
        if part.strip() == "" and sign < 0:
            raise ValueError(f"has an empty denominator: {unit!r}.")
    return tuple(sorted((s, p) for s, p in powers.items() if p != 0))


def same_unit(a: str, b: str) -> bool:
    """Whether the unit strings `a` and `b` name the same product of symbols and powers."""
    return parse_unit(a) == parse_unit(b)


class Quantity(eqx.Module):
    """A command value with its unit, for `simulate`'s `args`.

    **Arguments:**

    - `value`: the command (a number or an array; traced values are fine: `jit`, `vmap` and
      `grad` see `value` as a leaf).
    - `unit`: its unit, e.g. `"N m"` (static: part of the tree structure, not traced).

    `simulate` refuses a `Quantity` whose unit differs from the one the model declares for that
    command (`units()["args"]`), naming the argument and both units, and passes `value` on. Where
    the model declares no unit (or nothing reads the entry but a discrete model or an event),
    the unit is not checked and `value` is passed on alike.
    """

    value: Any
    unit: str = eqx.field(static=True)

    def __init__(self, value: ArrayLike, unit: str):
        parse_unit(unit, "Quantity: `unit`")
        self.value = value
        self.unit = unit


def is_quantity(x) -> bool:
    return isinstance(x, Quantity)
