"""The search space as a grid: each knob's and flag's profile value (list or range) as explicit values, its size."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from sweep.core.types import KNOB_NAMES, FlagScalar, KnobValue
from sweep.profile.flags import FlagRange, condition_of, values_of
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


def grid(space: Space) -> dict[str, list[FlagScalar]]:
    """The search space as explicit value lists, knobs the profile leaves open omitted, then the flags (a range
    without a step, for tpe / gp only, as its two ends)."""
    out: dict[str, list[FlagScalar]] = {}
    for knob in KNOB_NAMES:
        vals = expand(getattr(space, knob))
        if vals is not None:
            out[knob] = list(vals)
    for name, dim in space.flag_dims().items():
        flag_vals = values_of(dim)
        if flag_vals is None and isinstance(dim, FlagRange):
            flag_vals = [dim.low, dim.high]
        out[name] = flag_vals or []
    return out


def conditions(space: Space) -> dict[str, dict[str, list[FlagScalar]]]:
    """flag -> {other dimension: the values under which the flag is searched}, for the conditional flags."""
    return {n: c for n, d in space.flag_dims().items() if (c := condition_of(d))}


def applies(condition: dict[str, list[FlagScalar]], values: Mapping[str, FlagScalar | None]) -> bool:
    """Whether a conditional flag is searched in a configuration with these values (every `when` holds)."""
    return all(values.get(other) in wanted for other, wanted in condition.items())


def grid_size(space: Space) -> int:
    return int(np.prod([len(v) for v in grid(space).values()])) if grid(space) else 1
