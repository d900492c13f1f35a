"""The search space: each knob's profile value as an explicit list, the grid they span, the sampler over it.

Light to import (Optuna is loaded only to make a sampler): the progress line and the live page count the grid.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sweep.core.types import KNOB_NAMES, ServerConfig
from sweep.profile import FloatRange, IntRange, Profile, Space

if TYPE_CHECKING:
    import optuna


def expand(values: Any) -> list[Any] | None:
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


def grid(space: Space) -> dict[str, list[Any]]:
    """The search space as explicit value lists, knobs the profile leaves open omitted."""
    out = {}
    for knob in KNOB_NAMES:
        vals = expand(getattr(space, knob))
        if vals is not None:
            out[knob] = vals
    return out


def grid_size(space: Space) -> int:
    return int(np.prod([len(v) for v in grid(space).values()])) if grid(space) else 1


def make_sampler(profile: Profile) -> optuna.samplers.BaseSampler:
    """The sampler the profile names; `auto` is the grid when it fits the trial budget, TPE otherwise."""
    import optuna

    space = grid(profile.search.space)
    kind = profile.search.sampler
    seed = profile.workload.seed
    if kind == "auto":
        n = profile.search.n_trials
        kind = "grid" if n is None or grid_size(profile.search.space) <= n else "tpe"
    if kind == "grid":
        return optuna.samplers.GridSampler(space or {"_": [0]}, seed=seed)
    if kind == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    # Constraints come from Trial.set_constraint (Optuna 5; constraints_func is deprecated there).
    # constant_liar: with several workers, a running trial counts as a poor result so others look elsewhere.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


def suggest(trial: optuna.Trial, space: dict[str, list[Any]]) -> ServerConfig:
    """One configuration from the trial; every knob is categorical over its explicit values."""
    knobs = {k: trial.suggest_categorical(k, v) for k, v in space.items()}
    return ServerConfig(**knobs)
