"""Numbers, both ways: a stored or parsed value (typed `object`: a database row, a JSON document) as a number
without a cast (`as_int`, `as_float`: what `int(v)` and `float(v)` do at run time, typed for mypy; anything
that is no number raises TypeError, as they do), and numbers as people read them, one rule for every table and
line: thousands separators, never scientific notation (`number` a measured value of unknown size, a table
cell; `fixed` one with a known number of decimals, a report column)."""

from __future__ import annotations

import math
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


def number(v: float) -> str:
    """`10,300`, `4,986`, `19.79`, `0.85`, `0.0000123`: integers and anything of 1,000 or more whole with
    thousands separators, smaller values to four significant figures, never `1.03e+04`."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return "∞" if v > 0 else ("-∞" if v < 0 else "nan")
    a = abs(v)
    if a >= 999.95:
        return f"{v:,.0f}"
    if a == 0 or a >= 1e-4:
        return f"{v:.4g}"  # in [1e-4, 1000) Python's g never switches to an exponent
    return f"{v:.{min(3 - math.floor(math.log10(a)), 12)}f}".rstrip("0")


def fixed(v: float, nd: int = 0) -> str:
    """A value with `nd` decimals and thousands separators: `12,345.68`."""
    if not math.isfinite(v):
        return number(v)
    return f"{v:,.{nd}f}"
