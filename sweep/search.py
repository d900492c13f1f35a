"""The Optuna study: one trial is one server configuration; its value is the knee's goodput."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from sweep.ladder import LadderOutcome, LadderRunner, orchestrator_failure
from sweep.profile import FloatRange, IntRange, Profile, Space
from sweep.types import ServerConfig

KNOBS = ("max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy")
FEASIBLE_ATTR = "feasible"
CONSTRAINT_ATTR = "constraint"  # <= 0 feasible, > 0 infeasible (Optuna's convention)
# Why a trial did not yield a measured configuration. An orchestrator failure (signal, database, disk: the
# trial is FAIL) is retried on resume; a configuration failure (the server crashed, OOMed, hung: the trial is
# COMPLETE and infeasible) is a result and is not.
FAILURE_ATTR = "failure"
ORCHESTRATOR_FAILURE = "orchestrator"
CONFIGURATION_FAILURE = "configuration"
REQUEUED_ATTR = "requeued_from"  # on a re-queued copy: the number of the FAIL trial it redoes


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
    for knob in KNOBS:
        vals = expand(getattr(space, knob))
        if vals is not None:
            out[knob] = vals
    return out


def grid_size(space: Space) -> int:
    return int(np.prod([len(v) for v in grid(space).values()])) if grid(space) else 1


def make_sampler(profile: Profile) -> optuna.samplers.BaseSampler:
    """The sampler the profile names; `auto` is the grid when it fits the trial budget, TPE otherwise."""
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
    return optuna.samplers.TPESampler(seed=seed, multivariate=True)


def suggest(trial: optuna.Trial, space: dict[str, list[Any]]) -> ServerConfig:
    """One configuration from the trial; every knob is categorical over its explicit values."""
    knobs = {k: trial.suggest_categorical(k, v) for k, v in space.items()}
    return ServerConfig(**knobs)


ReuseFn = Callable[[ServerConfig, str], "LadderOutcome | None"]


@dataclass
class StudyResult:
    outcomes: list[LadderOutcome] = field(default_factory=list)  # every trial of this process (screen or final)
    finals: list[LadderOutcome] = field(default_factory=list)  # long-window ladders of promoted configurations
    stopped_reason: str = ""

    def winner(self) -> LadderOutcome | None:
        """The feasible configuration with the highest knee goodput (among final measurements when screening)."""
        pool = self.finals or self.outcomes
        feasible = [o for o in pool if o.value is not None]
        return max(feasible, key=lambda o: o.value or 0.0) if feasible else None


def promoted(values: list[tuple[dict[str, Any], float]], keep: float, min_keep: int) -> list[dict[str, Any]]:
    """Successive halving's cut: the top `keep` share (at least min_keep) of feasible screened configurations."""
    ranked = sorted(values, key=lambda pv: -pv[1])
    n = max(min_keep, math.ceil(keep * len(ranked)))
    seen: list[dict[str, Any]] = []
    for params, _ in ranked:
        if params not in seen:
            seen.append(params)
        if len(seen) >= n:
            break
    return seen


class Search:
    """Drives an Optuna study over the profile's space, resumable from RDB storage."""

    def __init__(self, profile: Profile, runner: LadderRunner, storage_url: str, study_name: str,
                 clock: Callable[[], float] = time.monotonic,
                 on_trial: Callable[[LadderOutcome], None] | None = None):
        self.profile = profile
        self.runner = runner
        self.space = grid(profile.search.space)
        self.clock = clock
        self.on_trial = on_trial
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = optuna.storages.RDBStorage(storage_url, engine_kwargs=_engine_kwargs(storage_url))
        pruner: optuna.pruners.BasePruner = (optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)
                                             if profile.search.pruning else optuna.pruners.NopPruner())
        self.study = optuna.create_study(study_name=study_name, storage=storage, direction="maximize",
                                         sampler=make_sampler(profile), pruner=pruner, load_if_exists=True)
        self.storage = storage
        self.study_id = storage.get_study_id_from_name(study_name)

    def requeue_interrupted(self) -> int:
        """Re-queue, once each, the trials whose configuration the orchestrator failed to measure.

        A trial left RUNNING by a killed orchestrator becomes FAIL (an orchestrator failure). Every FAIL trial
        that is an orchestrator failure (FAILURE_ATTR, or no attr: a kill leaves none) and has no copy yet gets
        one WAITING copy with its parameters and grid point (GridSampler counts a FAIL as visited and would
        never revisit it, nor know which point the copy covers). A configuration failure (the server crashed,
        OOMed or hung) is a COMPLETE trial with a violated constraint: it is never re-queued. A trial that died
        before any parameter or grid point was chosen needs no copy: the sampler picks that point again.
        """
        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            tid = self._trial_id(t.number)
            self.storage.set_trial_user_attr(tid, FAILURE_ATTR, ORCHESTRATOR_FAILURE)
            self.storage.set_trial_state_values(tid, optuna.trial.TrialState.FAIL)
        trials = self.study.get_trials(deepcopy=False)
        copied = {t.user_attrs.get(REQUEUED_ATTR) for t in trials}
        n = 0
        for t in trials:
            if (t.state != optuna.trial.TrialState.FAIL or t.number in copied
                    or t.user_attrs.get(FAILURE_ATTR, ORCHESTRATOR_FAILURE) != ORCHESTRATOR_FAILURE):
                continue
            if not t.params and "grid_id" not in t.system_attrs:
                continue
            self.study.enqueue_trial(t.params, user_attrs={REQUEUED_ATTR: t.number}, skip_if_exists=False)
            waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
            copy = self._trial_id(max(w.number for w in waiting))
            for attr in ("grid_id", "search_space"):
                if attr in t.system_attrs:
                    self.storage.set_trial_system_attr(copy, attr, t.system_attrs[attr])
            n += 1
        return n

    def _trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)

    def n_trials(self) -> int:
        if self.profile.search.n_trials is not None:
            return self.profile.search.n_trials
        return grid_size(self.profile.search.space)

    def _complete(self) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]

    def run(self, reuse: ReuseFn | None = None) -> StudyResult:
        """Run trials until the grid, the trial count or the time budget is spent; then the finals if screening."""
        result = StudyResult()
        started = self.clock()
        budget = self.profile.search.time_budget_s
        screening = self.profile.search.screening
        phase = "screen" if screening.enabled else "final"
        durations: list[float] = []
        remaining = self.n_trials() - len(self._complete())

        def objective(trial: optuna.Trial) -> float:
            try:
                return measure(trial)
            except BaseException as exc:  # the orchestrator's failure: Optuna marks the trial FAIL
                with contextlib.suppress(Exception):  # best effort: the database may be what failed
                    trial.set_user_attr(FAILURE_ATTR, ORCHESTRATOR_FAILURE)
                    trial.set_user_attr("failure_reason", orchestrator_failure(exc))
                raise

        def measure(trial: optuna.Trial) -> float:
            config = suggest(trial, self.space)
            t0 = self.clock()
            outcome = reuse(config, phase) if reuse else None
            reported: set[int] = set()

            def prune_check(i: int, row: dict[str, Any]) -> bool:
                trial.report(float(row.get("goodput_tps") or 0.0), step=i)
                reported.add(i)
                return self.profile.search.pruning and trial.should_prune()

            if outcome is None:
                outcome = self.runner.run(config, trial_number=trial.number, phase=phase, should_stop=prune_check)
            durations.append(self.clock() - t0)
            feasible = outcome.value is not None
            trial.set_user_attr(FEASIBLE_ATTR, feasible)
            trial.set_user_attr(CONSTRAINT_ATTR, 0.0 if feasible else 1.0)
            trial.set_constraint("feasible", 0.0 if feasible else 1.0)
            trial.set_user_attr("config_id", outcome.config_id)
            trial.set_user_attr("status", outcome.status)
            if outcome.status == "failed":
                trial.set_user_attr(FAILURE_ATTR, CONFIGURATION_FAILURE)
            trial.set_user_attr("phase", phase)
            trial.set_user_attr("pruned", outcome.stop_reason.startswith("pruned"))
            for i, step in enumerate(outcome.steps):
                if i not in reported:
                    trial.report(float(step.get("goodput_tps") or 0.0), step=i)
            result.outcomes.append(outcome)
            if self.on_trial:
                self.on_trial(outcome)
            # An infeasible configuration is told as 0 with a violated constraint; the winner is chosen among
            # feasible trials only, so the 0 never competes with a real goodput.
            return float(outcome.value) if outcome.value is not None else 0.0

        def budget_check(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
            if budget is None or not durations:
                return
            left = budget - (self.clock() - started)
            need = max(durations)
            if screening.enabled:  # keep room for the finals: each costs ~ a screen / fraction
                need += max(durations) / screening.fraction * screening.min_keep
            if left < need:
                result.stopped_reason = f"time budget: {left:.0f} s left, a trial takes ~{max(durations):.0f} s"
                study.stop()

        if remaining > 0:
            self.study.optimize(objective, n_trials=remaining, callbacks=[budget_check], catch=())
        if screening.enabled:
            self._finals(result, reuse, started, durations)
        return result

    def _finals(self, result: StudyResult, reuse: ReuseFn | None, started: float, durations: list[float]) -> None:
        """Long-window ladders for the screened configurations that made the cut, best first."""
        sc = self.profile.search.screening
        values = [(dict(t.params), float(t.value)) for t in self._complete()
                  if t.user_attrs.get(FEASIBLE_ATTR) and t.value is not None]
        budget = self.profile.search.time_budget_s
        screen_cost = max(durations) if durations else 0.0
        for params in promoted(values, sc.keep, sc.min_keep):
            config = ServerConfig(**params)
            outcome = reuse(config, "final") if reuse else None
            if outcome is None:
                left = None if budget is None else budget - (self.clock() - started)
                if left is not None and result.finals and left < screen_cost / sc.fraction:
                    result.stopped_reason = f"time budget: {left:.0f} s left before every final ladder ran"
                    break
                outcome = self.runner.run(config, phase="final")
            result.finals.append(outcome)
            if self.on_trial:
                self.on_trial(outcome)


def _engine_kwargs(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 30}}
    return {}
