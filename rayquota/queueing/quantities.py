"""Exact parsing and formatting of Kubernetes resource quantities.

Every amount inside the engine is an ``int`` counted in *milli-units* of its
resource (``"500m"`` cpu -> 500, ``"2"`` gpus -> 2000, ``"1Ki"`` memory ->
1_024_000). Integers keep the accounting exact: usage added and removed in
any order returns to exactly zero, which floats cannot promise.
"""

from __future__ import annotations

import re
from fractions import Fraction

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject."""


def parse_quantity(value: str | int) -> int:
    """Parse a Kubernetes quantity into integer milli-units.

    Fractions of a milli-unit round up, as the API server does. Negative
    quantities are rejected: quotas and requests are never negative.
    """
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}: expected a string or an integer")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f"invalid quantity {value!r}: must not be negative")
        return value * MILLI
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}: expected a string or an integer")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}: not a Kubernetes quantity")
    if match["sign"] == "-":
        raise QuantityError(f"invalid quantity {value!r}: must not be negative")
    amount = Fraction(match["number"])
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 64:
            raise QuantityError(f"invalid quantity {value!r}: exponent out of range")
        amount *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        amount *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    milli = amount * MILLI
    whole = milli.numerator // milli.denominator
    return whole if whole == milli else whole + 1


def _is_bytes(resource: str) -> bool:
    return resource.endswith("memory") or resource.endswith("storage") or resource.startswith("hugepages-")


def format_quantity(milli: int, resource: str = "") -> str:
    """Render milli-units the way a person writes them: ``16``, ``500m``, ``4Gi``."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if _is_bytes(resource) and units:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            size = _BINARY[suffix]
            if units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)
