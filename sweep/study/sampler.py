"""The search space: each knob's profile value as an explicit list, the grid they span, the sampler over it.

Light to import (Optuna is loaded only to make a sampler): the progress line and the live page count the grid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep.core.types import FlagScalar, ServerConfig
from sweep.profile import Profile
from sweep.profile.flags import FlagRange
from sweep.profile.grid import applies, conditions, grid, grid_size
from sweep.profile.search import Space

if TYPE_CHECKING:
    import optuna


def sampler_kind(profile: Profile) -> str:
    """The sampler the profile names, `auto` resolved: the grid when it fits the trial budget and every dimension is
    finite (a flag's range without a step is continuous), TPE otherwise."""
    kind = profile.search.sampler
    if kind == "auto":
        n = profile.search.n_trials
        continuous = any(isinstance(d, FlagRange) and d.step is None for d in profile.search.space.flag_dims().values())
        kind = "grid" if not continuous and (n is None or grid_size(profile.search.space) <= n) else "tpe"
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


def suggest(trial: optuna.Trial, space: Space, grid_values: dict[str, list[FlagScalar]] | None = None) -> ServerConfig:
    """One configuration from the trial. Knobs and listed flags are categorical over their explicit values; a flag's
    range without a step (tpe / gp) is suggest_int / suggest_float, on a log scale with `log`; a conditional flag is
    suggested only where its `when` holds (the grid sampler suggests it everywhere: left out where it does not hold).
    Flags the space fixes (one value) are marked `fixed` (labels leave them out)."""
    values = grid_values if grid_values is not None else grid(space)
    dims, conds = space.flag_dims(), conditions(space)
    chosen: dict[str, FlagScalar | None] = {}  # optuna types a categorical choice as possibly None
    for name in sorted(values, key=lambda n: n in conds):  # unconditional first: a `when` reads them
        if name in conds and not isinstance(trial.study.sampler, _grid_sampler()) and not applies(conds[name], chosen):
            continue
        dim = dims.get(name)
        if isinstance(dim, FlagRange) and dim.step is None:
            if isinstance(dim.low, int) and isinstance(dim.high, int) and not isinstance(dim.low, bool):
                chosen[name] = trial.suggest_int(name, dim.low, dim.high, log=dim.log)
            else:
                chosen[name] = trial.suggest_float(name, float(dim.low), float(dim.high), log=dim.log)
        else:
            chosen[name] = trial.suggest_categorical(name, values[name])
    chosen = {k: v for k, v in chosen.items() if k not in conds or applies(conds[k], chosen)}
    fixed = frozenset(n for n in dims if len(values.get(n, ())) == 1 and n not in conds)
    return ServerConfig.of(chosen, fixed=fixed)


def _grid_sampler() -> type:
    import optuna

    return optuna.samplers.GridSampler
