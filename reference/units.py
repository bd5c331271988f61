"""Byte quantities in binary units, as the course's YAML files write them.

Plain integers are bytes. Strings carry a binary unit: ``"80GiB"``, ``"512 MiB"``,
``"1.5GiB"`` (only when that is a whole number of bytes), ``"4096B"``. Decimal units
(``"80GB"``, ``"80 MB"``, ``"80kb"``) are refused on purpose: a GB is 7% smaller than a
GiB, and that silent gap is exactly the kind of error the course teaches people to avoid.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from reference.yaml_words import got

__all__ = ["UnitError", "parse_bytes", "format_bytes", "BINARY_UNITS"]

BINARY_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_BY_LOWER = {name.lower(): (name, size) for name, size in BINARY_UNITS.items()}
# Decimal spellings, mapped to the binary unit the author most likely meant.
_DECIMAL = {"k": "KiB", "kb": "KiB", "m": "MiB", "mb": "MiB", "g": "GiB", "gb": "GiB",
            "t": "TiB", "tb": "TiB"}
_QUANTITY = re.compile(r"\s*([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*")


class UnitError(ValueError):
    """A byte quantity that cannot be read. The message is one line naming where it was."""


def parse_bytes(value: object, where: str) -> int:
    """Bytes from an int or a string with a binary unit; ``where`` names the value in errors."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UnitError(f"{where}: expected bytes as an integer or a string like '80GiB', "
                        f"got {got(value)}")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"{where}: must be >= 0 bytes, got {value}")
        return value
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise UnitError(f"{where}: {value!r} is not a byte quantity; write e.g. 80GiB, "
                        f"512MiB or 4096 (bytes)")
    sign, number, unit = match.groups()
    if unit.lower() in _DECIMAL:
        raise UnitError(f"{where}: {value!r} is a decimal unit; write {number}"
                        f"{_DECIMAL[unit.lower()]} (binary units: KiB=1024 B)")
    if unit and unit.lower() not in _BY_LOWER:
        raise UnitError(f"{where}: {value!r} has an unknown unit {unit!r}; use one of "
                        f"{', '.join(BINARY_UNITS)}")
    try:
        exact = Decimal(number) * _BY_LOWER[unit.lower() or "b"][1]
    except InvalidOperation:  # pragma: no cover - the regex admits only plain decimals
        raise UnitError(f"{where}: {value!r} is not a number") from None
    if sign == "-" and exact != 0:
        raise UnitError(f"{where}: must be >= 0 bytes, got {value!r}")
    if exact != exact.to_integral_value():
        raise UnitError(f"{where}: {value!r} is not a whole number of bytes ({exact} B)")
    return int(exact)


def format_bytes(n: int) -> str:
    """The largest binary unit that divides n exactly ("80GiB"), else two decimals ("1.50KiB")."""
    if n < 0:
        return "-" + format_bytes(-n)
    units = sorted(BINARY_UNITS.items(), key=lambda item: item[1], reverse=True)
    for name, size in units:
        if size > 1 and n >= size and n % size == 0:
            return f"{n // size}{name}"
    for name, size in units:
        if size > 1 and n >= size:
            return f"{n / size:.2f}{name}"
    return f"{n}B"
