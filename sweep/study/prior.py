"""The simulator as a prior for the real search (`search.prior: sim`, issue 21 §4).

Before the real study measures anything, the same study runs on the simulator (launcher sim, virtual driver, on
the CPU) as a separate study in the same database, `<name>:prior-sim`, labelled simulated like any simulated
study. Its configurations ranked by simulated knee goodput (infeasible ones last) are stored with the real study
(study_priors) and become the real study's first trials, in that order, through Optuna's `enqueue_trial`:

- grid sampler: the whole grid, in the simulated order. The set of configurations measured is exactly the
  grid's; only the order changes (what a time budget, or a person stopping early, gets first).
- tpe / gp: the simulator's top PRIOR_STARTUP_TRIALS (10; at most n_trials) replace the sampler's random start-up
  trials; the sampler carries on from their real results.

`search.prior_margin` (default none: nothing dropped) screens on the prior: a configuration the simulator ranks
more than `margin` below its best, or finds infeasible, is never measured. Suggested margin 0.25, from the held-out
error bands of docs/calibration.md: held-out throughput is within 7% per configuration (mean absolute error 3-5%),
so two configurations the simulator puts 25% apart would need errors of opposite sign above 12% each (beyond any
held-out figure) to swap; the 10-15% under-prediction reported on another workload shape is systematic (every
configuration alike), so it moves the simulated best with the rest and does not enter the margin.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sglang_sim.fidelity import MODELLED_FLAGS
from sweep.core.types import KNOB_NAMES, FlagScalar, ServerConfig
from sweep.profile import Profile
from sweep.profile.search import PRIOR_STARTUP_TRIALS
from sweep.store import PriorRecord, Store
from sweep.views.read_model import read_study

if TYPE_CHECKING:
    import optuna

PRIOR_SUFFIX = ":prior-sim"  # the simulated study's name: the real study's name + this
ENQUEUED_ATTR = "prior_enqueued"  # on the real Optuna study: how many prior trials were queued (queued once)
RANK_ATTR = "prior_rank"  # on a queued trial: its rank in the prior
DROPPED_ATTR = "prior_dropped"  # on a trial the sampler proposed and the prior's margin dropped: not measured


def prior_name(study_name: str) -> str:
    """The simulated study that is `study_name`'s prior."""
    return study_name + PRIOR_SUFFIX


def sim_profile(profile: Profile) -> Profile:
    """The profile the prior runs: the same workload, ladder, window, SLA and space on the simulator, every
    configuration of the grid once (no screening, baseline, budget, pruner, soak or cross-check, no prior)."""
    search = profile.search.model_copy(update={
        "prior": "none", "prior_margin": None, "sampler": "grid", "n_trials": None, "time_budget_s": None,
        "screening": profile.search.screening.model_copy(update={"enabled": False}), "baseline": False,
        "pruning": False})
    return profile.model_copy(update={
        "search": search, "server": profile.server.model_copy(update={"launcher": "sim"}),
        "soak": profile.soak.model_copy(update={"enabled": False}),
        "crosscheck": profile.crosscheck.model_copy(update={"enabled": False})})


def unmodelled_varying(space: dict[str, list[FlagScalar]]) -> list[str]:
    """The searched flags with more than one value that the simulator does not model (sglang_sim.fidelity
    .MODELLED_FLAGS): the prior ranks configurations that differ only in them alike, so it says so."""
    return [name for name, values in space.items() if len(values) > 1 and name not in MODELLED_FLAGS]


def params_of(config: ServerConfig, space: dict[str, list[FlagScalar]]) -> dict[str, object]:
    """A configuration as the real study's trial parameters (the searched knobs, and the flags it sets)."""
    return {k: getattr(config, k) if k in KNOB_NAMES else config.flags[k] for k in space
            if k in KNOB_NAMES or k in config.flags}


def ranking(store: Store, prior_study_id: int, prior_study: str, space: dict[str, list[FlagScalar]],
            margin: float | None) -> list[PriorRecord]:
    """The prior study's configurations, best simulated knee goodput first (infeasible last, in grid order), each
    marked dropped when `margin` is set and it is infeasible or more than `margin` below the simulated best."""
    model = read_study(store, prior_study_id)
    best_of: dict[str, tuple[ServerConfig, float | None]] = {}
    for c in model.configs:
        knee = model.knees.get(c.id)
        value = knee.goodput_tps if knee is not None else None
        seen = best_of.get(c.config.key())
        if seen is None or (value is not None and (seen[1] is None or value > seen[1])):
            best_of[c.config.key()] = (c.config, value)
    order = sorted(best_of.values(), key=lambda cv: (cv[1] is None, -(cv[1] or 0.0)))
    top = max((v for _, v in order if v is not None), default=None)
    out = []
    for i, (config, value) in enumerate(order, 1):
        dropped = margin is not None and (value is None or top is None or value < (1.0 - margin) * top)
        out.append(PriorRecord(rank=i, label=config.label(), knobs_json=json.dumps(params_of(config, space)),
                               sim_goodput_tps=value, dropped=dropped, margin=margin, prior_study=prior_study))
    return out


def kept(prior: Sequence[PriorRecord]) -> list[PriorRecord]:
    """The configurations of the prior the real study measures, best first."""
    return [r for r in prior if not r.dropped]


def dropped_params(prior: Sequence[PriorRecord]) -> list[dict[str, object]]:
    """The trial parameters of every configuration the prior's margin drops."""
    return [r.knobs() for r in prior if r.dropped]


def enqueue(study: optuna.Study, prior: Sequence[PriorRecord], count: int) -> int:
    """Queue the prior's `count` best kept configurations as the study's next trials, once per study (a resumed or
    joined study is not queued twice); how many this call queued."""
    if ENQUEUED_ATTR in study.user_attrs:
        return 0
    chosen = kept(prior)[:count]
    for r in chosen:
        study.enqueue_trial(r.knobs(), user_attrs={RANK_ATTR: r.rank})
    study.set_user_attr(ENQUEUED_ATTR, len(chosen))
    return len(chosen)


def queued_count(prior: Sequence[PriorRecord], sampler: str, total: int) -> int:
    """How many prior trials lead the study: grid, every kept configuration (within the trial count); tpe/gp, the
    top STARTUP_TRIALS."""
    n = min(total, len(kept(prior)))
    return n if sampler == "grid" else min(n, PRIOR_STARTUP_TRIALS)

