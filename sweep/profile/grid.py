"""The search space as a grid: each knob's profile value (list or range) as explicit values, and the grid's size."""

from __future__ import annotations

import math

import numpy as np

from sweep.core.types import KNOB_NAMES, KnobValue
from sweep.profile.search import FloatRange, IntRange, KnobValues, Space


def expand(values: KnobValues) -> list[KnobValue] | None:
    """A knob's profile value (list or range) as the explicit list of values to search."""
    if values is None:
        return None
    if isinstance(values, list):
        return list(values)
    if isinstance(values, IntRange):
        return list(range(values.low, values.high + 1, values.step))
    if isinstance(values, FloatRange):
        if values.step is None:
            return [values.low, values.high]
        n = int(math.floor((values.high - values.low) / values.step + 1e-9)) + 1
        return [round(values.low + i * values.step, 6) for i in range(n)]
    raise TypeError(f"unsupported search value {values!r}")


def grid(space: Space) -> dict[str, list[KnobValue]]:
    """The search space as explicit value lists, knobs the profile leaves open omitted."""
    out: dict[str, list[KnobValue]] = {}
    for knob in KNOB_NAMES:
        vals = expand(getattr(space, knob))
        if vals is not None:
            out[knob] = vals
    return out


def grid_size(space: Space) -> int:
    return int(np.prod([len(v) for v in grid(space).values()])) if grid(space) else 1
