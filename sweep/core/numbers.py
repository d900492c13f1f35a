"""A stored or parsed value (typed `object`: a database row, a JSON document) as a number, without a cast: what
`int(v)` and `float(v)` do at run time, typed for mypy. Anything that is no number raises TypeError, as they do."""

from __future__ import annotations

from typing import SupportsFloat, SupportsIndex, SupportsInt


def as_int(value: object) -> int:
    """`int(value)`: a number (numpy's and Decimal included) or the text of one."""
    if isinstance(value, int | float | str):  # what a database hands back: the quick path
        return int(value)
    if isinstance(value, SupportsInt | SupportsIndex):
        return int(value)
    raise TypeError(f"int() argument must be a string or a number, not {type(value).__name__!r}")


def as_float(value: object) -> float:
    """`float(value)`: a number (numpy's and Decimal included) or the text of one."""
    if isinstance(value, int | float | str):
        return float(value)
    if isinstance(value, SupportsFloat | SupportsIndex):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not {type(value).__name__!r}")
