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

The prior as the screen (issue 29): where the simulator has a calibrated preset for the profile's GPU and model
(`sglang_sim.fidelity.calibrated_preset`) and every searched knob is one it models, the margin replaces the real
quarter-window screen of the whole grid: only what the prior ranks within the margin of its leader is measured, and
a real screen runs among those only when there are more of them than the finals take (`needs_screen`: screening's
own cut, `Screening.kept`, of the survivors). Each dropped configuration is stored with its simulated goodput and
the reason. Where the prior cannot rank (`cannot_rank` says why, one line), nothing is dropped and the study screens
as it would without a prior. The prior also predicts each configuration's knee (`knee_concurrency`): final steps far
from it run short windows (sweep.ladder.far_windows).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sglang_sim.fidelity import MODELLED_FLAGS, POLICY_AS, calibrated_preset
from sweep.core.types import JSON, KNOB_NAMES, FlagScalar, ServerConfig
from sweep.profile import Profile
from sweep.profile.grid import grid
from sweep.profile.search import PRIOR_STARTUP_TRIALS
from sweep.store import PriorRecord, Store
from sweep.views.plan import PlanPriorFigures
from sweep.views.plan import probes as plan_probes
from sweep.views.read_model import read_study

if TYPE_CHECKING:
    import optuna

    from sglang_sim.params import ModelPreset

PRIOR_SUFFIX = ":prior-sim"  # the simulated study's name: the real study's name + this
ENQUEUED_ATTR = "prior_enqueued"  # on the real Optuna study: how many prior trials were queued (queued once)
RANK_ATTR = "prior_rank"  # on a queued trial: its rank in the prior
# The prior's measured windows are at most this long (virtual time): the simulator has no window-to-window noise
# to average out, and 120 s holds ~1,000 requests at the lowest interactive step; 900 s windows made interactive's
# prior take half an hour of CPU before the first launch.
PRIOR_WINDOW_S = 120.0
DROPPED_ATTR = "prior_dropped"  # on a trial the sampler proposed and the prior's margin dropped: not measured


def prior_name(study_name: str) -> str:
    """The simulated study that is `study_name`'s prior."""
    return study_name + PRIOR_SUFFIX


def sim_profile(profile: Profile) -> Profile:
    """The profile the prior runs: the same workload, ladder, window, SLA and space on the simulator, every
    configuration of the grid once, and SGLang's defaults when the study measures them (for their predicted knee),
    without screening, budget, pruner, soak, cross-check or prior; windows at most PRIOR_WINDOW_S."""
    search = profile.search.model_copy(update={
        "prior": "none", "prior_margin": None, "sampler": "grid", "n_trials": None, "time_budget_s": None,
        "screening": profile.search.screening.model_copy(update={"enabled": False}), "baseline": False,
        "pruning": False})
    window = profile.window.model_copy(update={"measure_seconds": min(profile.window.measure_seconds,
                                                                       PRIOR_WINDOW_S)})
    return profile.model_copy(update={
        "search": search.model_copy(update={"baseline": profile.search.baseline}), "window": window,
        "server": profile.server.model_copy(update={"launcher": "sim"}),
        "soak": profile.soak.model_copy(update={"enabled": False}),
        "crosscheck": profile.crosscheck.model_copy(update={"enabled": False})})


def unmodelled_varying(space: dict[str, list[FlagScalar]]) -> list[str]:
    """The searched flags with more than one value that the simulator does not model (sglang_sim.fidelity
    .MODELLED_FLAGS): the prior ranks configurations that differ only in them alike, so it says so."""
    return [name for name, values in space.items() if len(values) > 1 and name not in MODELLED_FLAGS]


def cannot_rank(profile: Profile, model: ModelPreset) -> str | None:
    """Why the simulator cannot screen this profile's space (one line), None when it can: no calibrated preset
    for the profile's GPU (server.sim_gpu) and model, or a searched knob whose values it does not tell apart."""
    if calibrated_preset(profile.server.sim_gpu, model) is None:
        return (f"the simulator has no calibrated preset for {profile.server.sim_gpu} with the model "
                f"{model.name} (docs/calibration.md)")
    policies = profile.search.space.schedule_policy or []
    alike = sorted({POLICY_AS.get(p, p) for p in policies if p in POLICY_AS} & {POLICY_AS.get(p, p) for p in policies
                                                                                if p not in POLICY_AS})
    aliased = [p for p in policies if p in POLICY_AS]
    if aliased and len(policies) > 1:
        return (f"search.space.schedule_policy varies over {', '.join(aliased)}, whose ordering the simulator does "
                f"not model{' (scheduled as ' + ', '.join(alike) + ')' if alike else ''}")
    blind = unmodelled_varying(grid(profile.search.space))
    if blind:
        return (f"{', '.join(blind)} {'vary' if len(blind) > 1 else 'varies'} across the space and the simulator "
                "does not model " + ("them" if len(blind) > 1 else "it"))
    return None


def params_of(config: ServerConfig, space: dict[str, list[FlagScalar]]) -> dict[str, JSON]:
    """A configuration as the real study's trial parameters (the searched knobs, and the flags it sets)."""
    return {k: getattr(config, k) if k in KNOB_NAMES else config.flags[k] for k in space
            if k in KNOB_NAMES or k in config.flags}


def ranking(store: Store, prior_study_id: int, prior_study: str, space: dict[str, list[FlagScalar]],
            margin: float | None) -> list[PriorRecord]:
    """The prior study's configurations, best simulated knee goodput first (infeasible last, in grid order), each
    with its simulated knee's load, and marked dropped, with the reason, when `margin` is set and it is infeasible
    or more than `margin` below the simulated best."""
    model = read_study(store, prior_study_id)
    best_of: dict[str, tuple[ServerConfig, float | None, float | None]] = {}
    for c in model.configs:
        knee = model.knees.get(c.id)
        value = knee.goodput_tps if knee is not None else None
        load = (knee.offered_rps or float(knee.concurrency)) if knee is not None else None
        seen = best_of.get(c.config.key())
        if seen is None or (value is not None and (seen[1] is None or value > seen[1])):
            best_of[c.config.key()] = (c.config, value, load)
    defaults = best_of.pop(ServerConfig().key(), None) if space else None
    order = sorted(best_of.values(), key=lambda cv: (cv[1] is None, -(cv[1] or 0.0)))
    top = max((v for _, v, _ in order if v is not None), default=None)
    out = [] if defaults is None else [PriorRecord(
        rank=0, label="SGLang defaults", knobs_json="{}", sim_goodput_tps=defaults[1], margin=margin,
        prior_study=prior_study, knee_concurrency=defaults[2])]
    for i, (config, value, load) in enumerate(order, 1):
        reason = None if margin is None else drop_reason(value, top, margin)
        out.append(PriorRecord(rank=i, label=config.label(), knobs_json=json.dumps(params_of(config, space)),
                               sim_goodput_tps=value, dropped=reason is not None, margin=margin,
                               prior_study=prior_study, knee_concurrency=load, reason=reason))
    return out


def drop_reason(value: float | None, top: float | None, margin: float) -> str | None:
    """Why the prior's margin drops a configuration of simulated knee goodput `value` (None: it is kept)."""
    if value is None or top is None:
        return "infeasible on the simulator (no passing step)"
    if value < (1.0 - margin) * top:
        return (f"simulated knee goodput {value:.0f} tok/s is {1 - value / top:.0%} below the simulated best "
                f"{top:.0f} (beyond the prior's {margin:.0%} error margin)")
    return None


def defaults_beyond_margin(ranked: Sequence[PriorRecord]) -> str | None:
    """Why SGLang's defaults cannot tie the winner by the prior's margin (`drop_reason` on the defaults' simulated
    knee goodput against the simulated best), None when they can (or the prior has no margin or no defaults)."""
    defaults = next((r for r in ranked if r.rank == 0), None)
    margin = defaults.margin if defaults is not None else None
    top = max((r.sim_goodput_tps for r in ranked if r.rank > 0 and r.sim_goodput_tps is not None), default=None)
    if defaults is None or margin is None or top is None:
        return None
    return drop_reason(defaults.sim_goodput_tps, top, margin)


def needs_screen(profile: Profile, ranked: Sequence[PriorRecord]) -> bool:
    """Whether the real quarter-window screen runs: screening on, and no prior screening the space (no ranking, or
    no margin), or more configurations survive the margin than screening's cut of them keeps for the finals."""
    if not profile.search.screening.enabled:
        return False
    if not ranked or profile.search.prior_margin is None:
        return True
    n = len(kept(ranked))
    return n > profile.search.screening.kept(n)


def probes(profile: Profile, ranked: Sequence[PriorRecord]) -> bool:
    """Whether the real screen is the probe screen (search.screening.probe): on, a real screen among the survivors
    (`needs_screen`) of a prior that screens (a ranking with its margin: not where it `cannot_rank`), on a closed-loop
    ladder with a warm server per configuration (not coupled mode, not a rate ladder: sweep.views.plan.probes, the
    same rule on the profile alone)."""
    return (plan_probes(profile) and bool(ranked) and ranked[0].margin is not None
            and needs_screen(profile, ranked))


def record_of(ranked: Sequence[PriorRecord], space: dict[str, list[FlagScalar]],
              ) -> Callable[[ServerConfig], PriorRecord | None]:
    """A configuration -> the prior's record of it (SGLang's defaults: rank 0); None for one it did not rank."""
    by_knobs = {json.dumps(r.knobs(), sort_keys=True): r for r in ranked if r.rank > 0}
    defaults = next((r for r in ranked if r.rank == 0), None)

    def record(config: ServerConfig) -> PriorRecord | None:
        if config == ServerConfig():
            return defaults
        return by_knobs.get(json.dumps(params_of(config, space), sort_keys=True))

    return record


def predicted_knee(ranked: Sequence[PriorRecord], space: dict[str, list[FlagScalar]],
                   ) -> Callable[[ServerConfig], float | None]:
    """A configuration -> the prior's predicted knee (its simulated knee's load); None for one it did not rank."""
    record = record_of(ranked, space)

    def guess(config: ServerConfig) -> float | None:
        r = record(config)
        return None if r is None else r.knee_concurrency

    return guess


def simulated_goodput(ranked: Sequence[PriorRecord], space: dict[str, list[FlagScalar]],
                      ) -> Callable[[ServerConfig], float | None]:
    """A searched configuration -> the prior's simulated knee goodput (tok/s); None for one it did not rank or found
    infeasible, and for SGLang's defaults (search.screening.ties_order screen_and_prior reads it)."""
    record = record_of(ranked, space)

    def value(config: ServerConfig) -> float | None:
        r = record(config)
        return None if r is None or r.rank == 0 else r.sim_goodput_tps

    return value


def kept(prior: Sequence[PriorRecord]) -> list[PriorRecord]:
    """The configurations of the prior the real study measures, best first (rank 0, SGLang's defaults, is measured
    as the baseline, not as a trial)."""
    return [r for r in prior if not r.dropped and r.rank > 0]


def ranked_configs(prior: Sequence[PriorRecord]) -> list[PriorRecord]:
    """The prior's ranking of the searched space (without rank 0, SGLang's defaults)."""
    return [r for r in prior if r.rank > 0]


def dropped_params(prior: Sequence[PriorRecord]) -> list[dict[str, JSON]]:
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


def plan_figures(ranked: Sequence[PriorRecord], seconds: float = 0.0) -> PlanPriorFigures | None:
    """What the plan (sweep.views.plan.study_plan) reads of a prior that ran: each survivor's predicted knee, best
    first, and the defaults'; None without a ranking."""
    if not ranked:
        return None
    knees = tuple(r.knee_concurrency for r in kept(ranked))
    defaults = next((r.knee_concurrency for r in ranked if r.rank == 0), None)
    return PlanPriorFigures(survivor_knees=knees, defaults_knee=defaults, seconds=seconds,
                            ranked=len(ranked_configs(ranked)),
                            defaults_beyond=defaults_beyond_margin(ranked) is not None)
