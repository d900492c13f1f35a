"""The search space: each knob's profile value as an explicit list, the grid they span, the sampler over it.

Light to import (Optuna is loaded only to make a sampler): the progress line and the live page count the grid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep.core.types import KnobValue, ServerConfig
from sweep.profile import Profile
from sweep.profile.grid import grid, grid_size

if TYPE_CHECKING:
    import optuna


def sampler_kind(profile: Profile) -> str:
    """The sampler the profile names, `auto` resolved: the grid when it fits the trial budget, TPE otherwise."""
    kind = profile.search.sampler
    if kind == "auto":
        n = profile.search.n_trials
        kind = "grid" if n is None or grid_size(profile.search.space) <= n else "tpe"
    return kind


def make_sampler(profile: Profile) -> optuna.samplers.BaseSampler:
    """The sampler the profile names; `auto` is the grid when it fits the trial budget, TPE otherwise."""
    import optuna

    space = grid(profile.search.space)
    kind = sampler_kind(profile)
    seed = profile.workload.seed
    if kind == "grid":
        return optuna.samplers.GridSampler(space or {"_": [0]}, seed=seed)
    if kind == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    # Constraints come from Trial.set_constraint (Optuna 5; constraints_func is deprecated there).
    # constant_liar: with several workers, a running trial counts as a poor result so others look elsewhere.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


def suggest(trial: optuna.Trial, space: dict[str, list[KnobValue]]) -> ServerConfig:
    """One configuration from the trial; every knob is categorical over its explicit values."""
    knobs = {k: trial.suggest_categorical(k, v) for k, v in space.items()}
    return ServerConfig.from_mapping(knobs)
