"""The Optuna study: one trial is one server configuration; its value is the knee's goodput."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import optuna

from sweep.analysis.ladder_steps import LadderStep
from sweep.core.errors import Fenced
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome, LadderRunner
from sweep.profile import Profile
from sweep.profile.grid import grid, grid_size
from sweep.profile.phases import probe_load
from sweep.store import PriorRecord
from sweep.study import liveness, prior
from sweep.study.liveness import WorkerIdentity
from sweep.study.sampler import make_sampler, sampler_kind, suggest
from sweep.study.study_result import Budget, StudyResult, promoted
from sweep.study.tiebreak import KneesOf, Measured, recut, tied_with_leader
from sweep.study.trial_guard import (
    CONFIGURATION_FAILURE,
    FAILURE_ATTR,
    ORCHESTRATOR_FAILURE,
    REQUEUED_ATTR,
    TrialGuard,
    storage_error,
    storage_error_behind,
)

FEASIBLE_ATTR = "feasible"
TIED_ATTR = "tied"  # on a `<name>:screen-again` / `:tiebreak` study: what it measures again, [{params, load}], once
CONSTRAINT_ATTR = "constraint"  # <= 0 feasible, > 0 infeasible (Optuna's convention)
# Why a trial did not yield a measured configuration: sweep.study.trial_guard (re-exported here, where the
# trial attributes are read).
__all__ = ["CONSTRAINT_ATTR", "CONFIGURATION_FAILURE", "FAILURE_ATTR", "FEASIBLE_ATTR", "ORCHESTRATOR_FAILURE",
           "REQUEUED_ATTR", "Budget", "Search", "StudyResult", "promoted", "storage_error"]

ReuseFn = Callable[[ServerConfig, str], "LadderOutcome | None"]


class Search:
    """Drives an Optuna study over the profile's space, resumable from RDB storage, shared by any number of workers.

    Each phase is an Optuna study of its own: the screen (or the whole search without screening) is the
    study named `study_name`; the final ladders of the promoted configurations are `<name>:final`; the soak
    is `<name>:soak` (one trial). A worker takes trials from a phase until the phase's work is all claimed,
    then waits for the others' running trials (one of them may die and be queued again) before moving on.
    """

    def __init__(self, profile: Profile, runner: LadderRunner, storage_url: str, study_name: str,
                 clock: Callable[[], float] = time.monotonic,
                 on_trial: Callable[[LadderOutcome], None] | None = None,
                 worker: WorkerIdentity | None = None, on_requeued: liveness.Requeued | None = None,
                 wait: Callable[[float], None] = time.sleep, ended: Callable[[int], bool] | None = None,
                 alone: Callable[[], bool] | None = None, on_fenced: Callable[[Fenced], None] | None = None,
                 prior_ranking: Sequence[PriorRecord] = (), knees_of: KneesOf | None = None):
        self.profile = profile
        self.prior = list(prior_ranking)  # the simulated prior's ranking (search.prior: sim), best first
        self.knees_of = knees_of  # the study's knees by phase from the store: screen ties and the tie-break read them
        self.dropped = prior.dropped_params(self.prior)  # configurations the prior's margin keeps from measuring
        # the real screen: off where the prior's margin left no more than the finals take (sweep.study.prior)
        self.screens = prior.needs_screen(profile, self.prior)
        # the probe screen: one window per survivor at its predicted knee's step (search.screening.probe)
        self.probing = prior.probes(profile, self.prior)
        self.predicted = prior.predicted_knee(self.prior, grid(profile.search.space)) if self.probing else None
        self.runner = runner
        self.space = grid(profile.search.space)
        self.clock = clock
        self.on_trial = on_trial
        self.worker = worker or WorkerIdentity.this_process()
        self.on_requeued = on_requeued
        self.wait = wait
        self.ended = ended  # worker id -> whether that worker has stopped (so any trial it holds is orphaned)
        self.alone = alone  # whether no other worker of the study may be alive (then an unowned trial is dead)
        self.on_fenced = on_fenced  # told once per trial this worker lost while it was suspended (it goes on)
        self.study_name = study_name
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sp = profile.search
        self.grace_s = sp.grace_s or 4 * sp.heartbeat_s
        self.storage = liveness.optuna_storage(storage_url, sp.heartbeat_s, sp.grace_s, on_requeued)
        self.guard = TrialGuard(self.storage, runner)  # a trial's failures: retried, a result, or fenced
        pruner: optuna.pruners.BasePruner = (optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)
                                             if sp.pruning else optuna.pruners.NopPruner())
        self.study = optuna.create_study(study_name=study_name, storage=self.storage, direction="maximize",
                                         sampler=make_sampler(profile), pruner=pruner, load_if_exists=True)

    def requeue_interrupted(self) -> int:
        """Re-queue, once each, the trials whose configuration an orchestrator failed to measure.

        A trial a dead worker left RUNNING becomes FAIL and is queued again (liveness.requeue_dead): only when
        its worker is certainly dead, so a live worker's trial, here or on another host, is never touched. A
        FAIL trial that is an orchestrator failure (a signal, the database, the disk) and has no copy yet gets
        one. A configuration failure (the server crashed, OOMed or hung) is a COMPLETE trial with a violated
        constraint: never re-queued. A trial that died before any parameter or grid point was chosen needs no
        copy: the sampler picks that point again.
        """
        n = 0
        for study in self._phase_studies():
            n += liveness.requeue_dead(self.storage, study, self.grace_s, self.on_requeued, self.ended, self.alone)
            # The failing worker queues its own copy; this is for one that could not (its database failed). Only
            # with no other worker alive: a live one may be writing the copy of a trial it just failed.
            if self.alone is None or self.alone():
                n += liveness.requeue_orchestrator_failures(study)
        return n

    def _phase_studies(self) -> list[optuna.Study]:
        out = [self.study]
        names = {s.study_name for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False)}
        for suffix in (":baseline", ":screen-again", ":final", ":tiebreak", ":soak"):
            if self.study_name + suffix in names:
                out.append(optuna.load_study(study_name=self.study_name + suffix, storage=self.storage))
        return out

    def n_trials(self) -> int:
        """The first phase's trial count: n_trials, else the grid; a grid the prior's margin cut, what it kept."""
        n = self.profile.search.n_trials or grid_size(self.profile.search.space)
        if self.dropped and sampler_kind(self.profile) == "grid":
            n = min(n, len(prior.kept(self.prior)))
        return n

    def queue_prior(self) -> int:
        """Queue the prior's best configurations as the first phase's next trials (once per study); how many."""
        if not self.prior:
            return 0
        return prior.enqueue(self.study, self.prior,
                             prior.queued_count(self.prior, sampler_kind(self.profile), self.n_trials()))

    def _complete(self) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE
                and not t.user_attrs.get(liveness.SURPLUS_ATTR)]

    def _phase_study(self, suffix: str, param: str, n: int) -> optuna.Study:
        """The study of a fixed list of n work items: trial k (k < n) measures item k, whichever worker asks."""
        return optuna.create_study(study_name=self.study_name + suffix, storage=self.storage, direction="maximize",
                                   sampler=optuna.samplers.GridSampler({param: list(range(n))}), load_if_exists=True)

    def _begin(self, study: optuna.Study, trial: optuna.Trial, total: int) -> None:
        """Claim the trial for this worker; a trial created after the phase's work ran out is dropped as surplus."""
        trial.set_user_attr(liveness.WORKER_ATTR, self.worker.attr())
        frozen = liveness.stored_trial(self.storage, study, trial.number)
        if "fixed_params" in frozen.system_attrs:
            return  # a queued copy of a dead worker's trial: always real work
        earlier = [t for t in study.get_trials(deepcopy=False) if t.number < trial.number]
        if liveness.work_items(earlier) >= total:
            trial.set_user_attr(liveness.SURPLUS_ATTR, True)
            raise optuna.TrialPruned("surplus: every work item of this phase is claimed")

    def _drain(self, study: optuna.Study, total: int, objective: Callable[[optuna.Trial], float],
               may_start: Callable[[], bool], wait_others: bool = True) -> None:
        """Run trials of one phase until its `total` work items are claimed; then wait out the others' trials
        (unless not `wait_others`: nothing later depends on them, so this worker moves on)."""
        while True:
            liveness.fail_stale(study)
            liveness.requeue_dead(self.storage, study, self.grace_s, self.on_requeued, self.ended, self.alone)
            trials = study.get_trials(deepcopy=False)
            waiting = any(t.state == optuna.trial.TrialState.WAITING for t in trials)
            if (waiting or liveness.work_items(trials) < total) and may_start():
                self.guard.fenced = None
                try:
                    with self.guard.quiet_when_fenced():
                        study.optimize(objective, n_trials=1, catch=())
                except UnboundLocalError as exc:  # Optuna's own, hiding a storage error: that error is the one said
                    hidden = storage_error_behind(exc)
                    if hidden is None:
                        raise
                    raise hidden from None
                except Exception as exc:
                    # Optuna could not tell a trial another worker took over (mid-window, or after the verdict)
                    self.guard.fenced = self.guard.fenced or self.guard.told_too_late(study, exc)
                    if self.guard.fenced is not None:
                        fenced, self.guard.fenced = self.guard.fenced, None
                        if self.on_fenced is not None:
                            self.on_fenced(fenced)
                        continue
                    reported = storage_error(exc)
                    if reported is exc:
                        raise
                    raise reported from exc
                continue
            if wait_others and any(t.state == optuna.trial.TrialState.RUNNING for t in trials):
                self.wait(min(self.profile.search.heartbeat_s, 5.0))  # another worker's trial may yet die
                continue
            return  # every item is measured, or this worker's budget is spent and the rest is left to others

    def run(self, reuse: ReuseFn | None = None, soak: Callable[[], None] | None = None) -> StudyResult:
        """Run trials until the grid, the trial count or the time budget is spent; then the finals if screening,
        then the soak (one trial, on whichever worker asks first) when `soak` is given."""
        result = StudyResult()
        budget = Budget(self.profile.search.time_budget_s, self.clock(), self.clock)
        if self.measures_baseline():
            self._baseline(result, reuse)
        self.queue_prior()
        self._first_phase(result, reuse, budget)
        if self.screens:
            self._finals(result, reuse, budget)
        self._tiebreak(result)
        if soak is not None:
            self._soak(soak)
        return result

    def _first_phase(self, result: StudyResult, reuse: ReuseFn | None, budget: Budget) -> None:
        """The screen (the whole search without screening): the sampler's configurations, one ladder each."""
        phase = "screen" if self.screens else "final"
        total = self.n_trials()

        def measure(trial: optuna.Trial) -> float:
            self._begin(self.study, trial, total)
            return self._measure_suggested(trial, phase, reuse, budget, result)

        self._drain(self.study, total, self.guard.guarded(self.study, measure), lambda: self._room_for_trial(result, budget))

    def _measure_suggested(self, trial: optuna.Trial, phase: str, reuse: ReuseFn | None, budget: Budget,
                           result: StudyResult) -> float:
        """The trial's configuration measured (or reused), each step reported for pruning; the trial value."""
        config = suggest(trial, self.profile.search.space, self.space)
        if self.dropped and dict(trial.params) in self.dropped:  # tpe/gp proposed what the prior's margin drops
            trial.set_user_attr(prior.DROPPED_ATTR, True)
            raise optuna.TrialPruned(f"{config.label()}: the simulated prior ranks it below its margin")
        t0 = self.clock()
        outcome = reuse(config, phase) if reuse else None
        reported: set[int] = set()

        def prune_check(i: int, step: LadderStep) -> bool:
            trial.report(float(step.stats.goodput_tps or 0.0), step=i)
            reported.add(i)
            return self.profile.search.pruning and trial.should_prune()

        load = probe_load(self.profile, self.predicted(config)) if self.predicted and phase == "screen" else None
        if outcome is None and load is not None:
            outcome = self.runner.run_probe(config, load, trial.number)
        elif outcome is None:
            outcome = self.runner.run(config, trial_number=trial.number, phase=phase, should_stop=prune_check)
        budget.durations.append(self.clock() - t0)
        for i, step in enumerate(outcome.steps):
            if i not in reported:
                trial.report(float(step.stats.goodput_tps or 0.0), step=i)
        return self._told(trial, outcome, phase, result.outcomes)

    def _room_for_trial(self, result: StudyResult, budget: Budget) -> bool:
        """Whether another first-phase trial fits the time budget (with screening: and the finals after it)."""
        if result.stopped_reason:
            return False
        left = budget.left()
        if left is None or not budget.durations:
            return True
        screening = self.profile.search.screening
        need = budget.trial_s()
        if self.screens:  # keep room for the finals: each costs ~ a screen / fraction
            need += budget.trial_s() / screening.fraction * screening.min_keep
        if left < need:
            result.stopped_reason = f"time budget: {left:.0f} s left, a trial takes ~{budget.trial_s():.0f} s"
            return False
        return True

    def _told(self, trial: optuna.Trial, outcome: LadderOutcome, phase: str, into: list[LadderOutcome]) -> float:
        """Record a ladder's outcome on its trial and return the trial value."""
        feasible = outcome.value is not None
        trial.set_user_attr(FEASIBLE_ATTR, feasible)
        trial.set_user_attr(CONSTRAINT_ATTR, 0.0 if feasible else 1.0)
        trial.set_constraint("feasible", 0.0 if feasible else 1.0)
        trial.set_user_attr("config_id", outcome.config_id)
        trial.set_user_attr("status", outcome.status)
        if outcome.status == "failed":
            trial.set_user_attr(FAILURE_ATTR, CONFIGURATION_FAILURE)
        trial.set_user_attr("phase", phase)
        # the knob values on every trial (a final trial's only parameter is an index into the promoted list)
        trial.set_user_attr("config", outcome.config.label())
        for knob, value in outcome.config.knobs().items():
            trial.set_user_attr(knob, value)
        trial.set_user_attr("pruned", outcome.stop_reason.startswith("pruned"))
        if outcome.boundary is not None:  # the refined SLA boundary (also on the server_configs row)
            b = outcome.boundary
            trial.set_user_attr("boundary", [b.concurrency, b.ci_low, b.ci_high, b.shape])
        into.append(outcome)
        if self.on_trial:
            self.on_trial(outcome)
        # An infeasible configuration is told as 0 with a violated constraint; the winner is chosen among
        # feasible trials only, so the 0 never competes with a real goodput.
        return float(outcome.value) if outcome.value is not None else 0.0

    def _finals(self, result: StudyResult, reuse: ReuseFn | None, budget: Budget) -> None:
        """Long-window ladders for the screened configurations that made the cut, shared out among workers.

        Every worker computes the cut from the same finished screen; the first to get there stores it on the
        finals study, and every worker measures from that stored list.
        """
        sc = self.profile.search.screening
        values = [(dict(t.params), float(t.value)) for t in self._complete()
                  if t.user_attrs.get(FEASIBLE_ATTR) and t.value is not None]
        cut = promoted(values, sc)
        if self.probing and not cut:  # every probe failed its SLA: the prior's order (its finals find the knees)
            survivors = [r.knobs() for r in prior.kept(self.prior)]
            cut = survivors[:sc.kept(len(survivors))]
        # the screen's ties measured again (a probe screen's one window per survivor already is that re-measure)
        if sc.ties and not self.probing and self.knees_of is not None and self._can_again():
            knees_of = self.knees_of
            sim = (prior.simulated_goodput(self.prior, grid(self.profile.search.space))
                   if sc.ties_order == "screen_and_prior" and self.prior else None)
            again = self._again(":screen-again", lambda: tied_with_leader(knees_of("screen"), sc.ties_max, sim),
                                "screen", result.tiebreaks)
            cut = recut(cut, again) if again else cut
        if not cut:
            return
        study = self._phase_study(":final", "final", len(cut))
        if "promoted" not in study.user_attrs:
            study.set_user_attr("promoted", cut)
        cut = study.user_attrs["promoted"]
        screen_cost = budget.trial_s()

        def measure(trial: optuna.Trial) -> float:
            self._begin(study, trial, len(cut))
            config = ServerConfig.of(cut[int(trial.suggest_categorical("final", list(range(len(cut)))))])
            outcome = reuse(config, "final") if reuse else None
            if outcome is None:
                outcome = self.runner.run(config, phase="final")
            return self._told(trial, outcome, "final", result.finals)

        def may_start() -> bool:
            left = budget.left()
            if left is not None and result.finals and left < screen_cost / sc.fraction:
                result.stopped_reason = f"time budget: {left:.0f} s left before every final ladder ran"
                return False
            return True

        self._drain(study, len(cut), self.guard.guarded(study, measure), may_start)

    def _tiebreak(self, result: StudyResult) -> None:
        """search.tie_break: the leader and every final tied with it, launched again and measured at their knee load
        once more (sweep.study.tiebreak); the read model pools those windows with the finals'."""
        if self.profile.search.tie_break.enabled and self.knees_of is not None and self._can_again():
            knees_of = self.knees_of
            self._again(":tiebreak", lambda: tied_with_leader(knees_of("final")), "final", result.tiebreaks)

    def _can_again(self) -> bool:
        """Whether configurations can be measured again at their knee load: closed-loop ladder searches (a rate
        ladder's knee is a rate; coupled mode relaunches per step)."""
        return not self.profile.rate_ladder and self.profile.search.mode != "coupled"

    def _again(self, suffix: str, tied: Callable[[], list[Measured]], phase: str,
               into: list[LadderOutcome]) -> list[tuple[dict[str, Any], float]]:
        """Measure tied configurations again, each at its knee load on a launch of its own at full length (the phase
        study `<name><suffix>`: its items stored once, shared out among workers like the finals); each item's
        (trial parameters, the window's goodput: 0 when it failed); [] when none is tied."""
        name = self.study_name + suffix
        if name in {s.study_name for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False)}:
            items = optuna.load_study(study_name=name, storage=self.storage).user_attrs.get(TIED_ATTR, [])
        else:
            items = [{"params": m.config.knobs(), "load": m.knee.concurrency} for m in tied()]
        if not items:
            return []
        study = self._phase_study(suffix, "again", len(items))
        if TIED_ATTR not in study.user_attrs:
            study.set_user_attr(TIED_ATTR, items)
        items = study.user_attrs[TIED_ATTR]

        def measure(trial: optuna.Trial) -> float:
            self._begin(study, trial, len(items))
            item = items[int(trial.suggest_categorical("again", list(range(len(items)))))]
            outcome = self.runner.run_again(ServerConfig.of(item["params"]), [int(item["load"])], trial.number, phase)
            return self._told(trial, outcome, phase, into)

        self._drain(study, len(items), self.guard.guarded(study, measure), lambda: True)
        done = {int(t.params["again"]): float(t.value or 0.0) for t in study.get_trials(deepcopy=False)
                if t.state == optuna.trial.TrialState.COMPLETE and "again" in t.params
                and not t.user_attrs.get(liveness.SURPLUS_ATTR)}
        return [(dict(item["params"]), done.get(i, 0.0)) for i, item in enumerate(items)]

    def measures_baseline(self) -> bool:
        """Whether this study measures SGLang's defaults first (search.baseline; never in coupled mode, where
        max_running_requests follows the ladder and there is no 'defaults' ladder)."""
        return self.profile.search.baseline and self.profile.search.mode != "coupled"

    def _baseline(self, result: StudyResult, reuse: ReuseFn | None) -> None:
        """SGLang's defaults (a ServerConfig with every knob None) as configuration 0: one final-phase ladder (the
        winner's window, so their knees compare), one trial of `<name>:baseline` taken by the first worker. It
        competes for the win like any configuration; the report states every winner's gain over it."""
        study = self._phase_study(":baseline", "baseline", 1)

        def measure(trial: optuna.Trial) -> float:
            self._begin(study, trial, 1)
            trial.suggest_categorical("baseline", [0])
            config = ServerConfig()
            outcome = reuse(config, "final") if reuse else None
            if outcome is None:
                beyond = (prior.defaults_beyond_margin(self.prior)
                          if self.profile.search.baseline_refine == "could_tie" else None)
                if beyond is None:
                    outcome = self.runner.run(config, phase="final")
                else:  # they cannot tie the winner by the prior's margin: their knee stays the ladder's
                    outcome = self.runner.run(config, phase="final", refine=False)
                    outcome.stop_reason += f"; not refined (search.baseline_refine could_tie): the prior's {beyond}"
            sink: list[LadderOutcome] = []
            value = self._told(trial, outcome, "final", sink)
            result.baseline = outcome
            return value

        # another worker measuring the defaults holds no one up: the search's configurations do not depend on them
        self._drain(study, 1, self.guard.guarded(study, measure), lambda: True, wait_others=False)

    def _soak(self, soak: Callable[[], None]) -> None:
        """The winner's soak: one trial of `<name>:soak`, run by the first worker that asks, after every final."""
        study = self._phase_study(":soak", "soak", 1)

        def measure(trial: optuna.Trial) -> float:
            self._begin(study, trial, 1)
            trial.suggest_categorical("soak", [0])
            soak()
            return 0.0

        self._drain(study, 1, self.guard.guarded(study, measure), lambda: True)

