"""Wiring: profile -> workload -> launcher + driver -> ladder/search -> store -> report. No statistics here."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Protocol

from sweep.analysis.winner import Winner
from sweep.core.errors import NotFound, ProfileError, UsageError, WorkloadError
from sweep.ladder.environment import EnvironmentRecorder, normalise_env
from sweep.ladder.launch import ServerCallback
from sweep.ladder.parts import LadderHooks, StartCallback, StepCallback
from sweep.ladder.runner import LadderOutcome, LadderRunner
from sweep.ladder.step_inputs import refuse_short_dataset
from sweep.ladder.wiring import (
    ROOT,
    make_driver,
    make_launcher,
    model_path,
    predictor,
    resolve_driver,
    resolve_launcher_kind,
    server_model,
)
from sweep.launchers.placement import WorkerSeat, detect
from sweep.profile import Profile
from sweep.profile.context_len import server_context
from sweep.profile.grid import grid
from sweep.report.document import ReportFiles, write_report
from sweep.store import PriorRecord, Store
from sweep.study import prior
from sweep.study.dashboard import tell_winner
from sweep.study.doctor import require_engine
from sweep.study.liveness import WorkerIdentity, sweep_version
from sweep.study.recovery import alone, on_fenced, on_requeued, worker_ended
from sweep.study.resources import refuse_oversized
from sweep.study.resume import open_study, reuse_outcome, soak_done
from sweep.study.search import Search, StudyResult
from sweep.study.tiebreak import study_knees
from sweep.views.answer import Answer, build_answer, winner_records
from sweep.views.context import ConfigFailure, study_context
from sweep.views.footprint import study_footprint
from sweep.views.plan import PlanPriorFigures
from sweep.views.read_model import read_study
from sweep.workload.lexicon import for_model
from sweep.workload.stream import Stream, open_stream, stream_facts

__all__ = ["KneeRun", "Orchestrator"]
TrialCallback = Callable[[LadderOutcome], None]


class Console(Protocol):
    """Where the orchestrator's lines go: a rich Console, or anything with its print."""

    def print(self, msg: str, /) -> None: ...


@dataclass(frozen=True)
class KneeRun:
    study_id: int
    study_name: str
    result: StudyResult
    report: ReportFiles
    simulated: bool
    driver: str
    winner: Winner | None = None  # the study's winner from the store (covers trials of earlier processes)
    failures: list[ConfigFailure] = field(default_factory=list)  # configurations that failed or never started
    measured: bool = True  # whether any configuration got a completed measured step
    no_winner: str = ""  # why no winner is named (the read model's WinnerDecision.why_none; "" when one is)
    answer: Answer | None = None  # the per-tier final answer (sweep.views.answer), as the report's top shows it


def refuse_several_configs(profile: Profile) -> None:
    """Attach measures the one server that is running: a study of several configurations would measure it again
    under each label (the knobs of an attached server are its own, not the search's)."""
    from sweep.profile.grid import grid_size

    search = profile.search
    configs = grid_size(search.space) + (1 if search.baseline and search.mode != "coupled" else 0)
    if search.mode == "coupled":
        configs *= len(profile.ladder)  # one launch per step, each a configuration of its own
    if configs > 1:
        raise UsageError(f"launcher attach measures one running server, but this study has {configs} "
                         "configurations (each would re-measure that server under another label): use `sweep ladder "
                         "--launcher attach`, or give each knob of search.space one value and set "
                         "search.baseline=false")


def refuse_open_loop_sessions(profile: Profile) -> None:
    """The virtual driver runs sessions closed-loop only: an open-loop arrival (or the winner's soak, a Poisson run)
    with workload.sessions is refused before the database or the report folder is made."""
    if profile.workload.sessions is None:
        return
    why = ("arrival.kind " + profile.arrival.kind if profile.arrival.open_loop
           else "soak.enabled (the winner's soak is an open-loop Poisson run)" if profile.soak.enabled else None)
    if why is not None:
        raise WorkloadError(f"sessions under an open-loop arrival run on the HTTP driver only ({why}); the virtual "
                            "driver runs them closed-loop: pass --driver http, or use arrival.kind closed"
                            + (" and soak.enabled: false" if profile.soak.enabled else ""))


class Orchestrator:
    """Runs a profile's study end to end; every step lands in the store before the next begins."""

    def __init__(self, profile: Profile, db_url: str, out_dir: Path, launcher_kind: str | None = None,
                 driver: str | None = None, console: Console | None = None, client_procs: int = 1,
                 seat: WorkerSeat | None = None, check_resources: bool = True):
        self.profile = profile
        self.check_resources = check_resources  # refuse a study whose footprint exceeds the machine (knee)
        self.seat = seat or WorkerSeat()
        self.client_procs = client_procs
        self.db_url = db_url
        self.kind = resolve_launcher_kind(profile, launcher_kind)
        self.driver_name = resolve_driver(self.kind, driver)
        if self.kind == "attach" and not profile.server.url:
            raise ProfileError("server.url is required with launcher attach")
        if self.kind == "attach":
            refuse_several_configs(profile)
        # The model the servers run (and the launch prediction sizes): one line, exit 2, before anything launches
        self.model = None if self.kind == "attach" else server_model(profile)
        if profile.crosscheck.enabled and self.driver_name == "virtual":
            if driver == "virtual":
                raise UsageError("a cross-check compares clients over real sockets: use --driver http (or auto)")
            self.driver_name = "http"
        if self.driver_name == "virtual":
            from sweep.launchers.virtual import refuse_faults

            refuse_faults(profile.server.extra_args)  # before the database is touched
            refuse_open_loop_sessions(profile)
        self.simulated = self.kind == "sim"
        self.out_dir = out_dir
        self.console = console
        self.on_server: ServerCallback | None = None  # each launch's launching, ready/failed and stopped

    @cached_property
    def store(self) -> Store:
        """The results database, opened (and created) on first use: after every input check has passed."""
        return Store(self.db_url)

    def say(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def open_study(self, study_name: str | None, resume: bool) -> tuple[int, str]:
        """The study's id and name: created, or (resume) found and cleaned of what dead workers left."""
        return open_study(self.store, self.profile, study_name, resume, self.simulated, self.driver_name, self.say)

    def join(self, study_name: str, on_step: StepCallback | None = None, on_step_start: StartCallback | None = None,
             on_trial: TrialCallback | None = None) -> KneeRun:
        """Join an existing study as one more worker and measure until its work is done."""
        existing = self.store.get_study_by_name(study_name)
        if existing is None:
            raise NotFound(f"no study named {study_name} in {self.store.shown}: create it with "
                             "`sweep study create` or `sweep sweep`")
        require_engine(self.profile, self.kind)
        self.open_study(study_name, resume=True)
        return self._work(existing.id, study_name, on_step, on_step_start, on_trial)

    def knee(self, study_name: str | None = None, resume: bool = False, on_step: StepCallback | None = None,
             on_step_start: StartCallback | None = None, on_trial: TrialCallback | None = None,
             on_prior: Callable[[PlanPriorFigures], None] | None = None) -> KneeRun:
        """One study end to end (`on_prior`: told what the plan reads of the simulated prior once it has ranked the
        space, where it can screen: the terminal's bars plan with its survivors and knees from then on)."""
        # Input first (the dataset, --out): a bad one is one line and nothing written, no study left running.
        # Requests are made on demand and never repeat on one server (sweep.workload.stream); replay only when asked.
        # Made before the study row, so a dataset that cannot serve one ladder writes nothing.
        specs = open_stream(self.profile.workload, base_dir=ROOT, lexicon=for_model(model_path(self.profile)),
                            context_len=server_context(self.profile))
        refuse_short_dataset(self.profile, specs)
        if self.profile.crosscheck.enabled:  # a reference that cannot run is one clear line before anything is stored
            from sweep.ladder.crosscheck_step import choose_reference

            choose_reference(self.profile, model_path(self.profile), for_model(model_path(self.profile)))
        require_engine(self.profile, self.kind)  # sglang missing: one line now, not a crash per configuration
        check_writable_dir(self.out_dir)
        if self.check_resources:
            refuse_oversized(study_footprint(self.profile), self.db_url)
        if self.simulated:
            self.say("[bold yellow]SIMULATED[/]: no GPU with SGLang here; using sweep's simulated SGLang server "
                     f"({self.model.name if self.model else '?'} on {self.profile.server.sim_gpu}), driver {self.driver_name}. "
                     "Numbers are labelled simulated everywhere.")
        study_id, study_name = self.open_study(study_name, resume)
        try:
            if self.profile.search.prior == "sim":
                ranked = self.run_prior(study_id, study_name)
                figures = prior.plan_figures(ranked) if self.prior_cannot_rank() is None else None
                if on_prior is not None and figures is not None:
                    on_prior(figures)
            return self._work(study_id, study_name, on_step, on_step_start, on_trial, specs)
        except BaseException as exc:
            # Stopped by a signal or an orchestrator error: the study is resumable, and says it stopped.
            with contextlib.suppress(Exception):
                self.store.finish_study(study_id, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
            raise

    def _work(self, study_id: int, study_name: str, on_step: StepCallback | None = None,
              on_step_start: StartCallback | None = None, on_trial: TrialCallback | None = None,
              specs: Stream | None = None) -> KneeRun:
        """Measure trials of the study as one of its workers until its work is done, then write the report."""
        if specs is None:
            specs = open_stream(self.profile.workload, base_dir=ROOT, lexicon=for_model(model_path(self.profile)),
                            context_len=server_context(self.profile))
            refuse_short_dataset(self.profile, specs)
        seat = self.seat
        identity = WorkerIdentity.this_process()
        worker_id = self.store.register_worker(
            study_id, seat.label or f"{identity.host}:{identity.pid}", identity.host, identity.pid, identity.started,
            seat.gpus_text(), sweep_version(), self.profile.fingerprint())
        identity = replace(identity, worker_id=worker_id)
        log_dir = self.out_dir / study_name / "logs" / (seat.label or "")
        launcher = make_launcher(self.profile, self.kind, self.driver_name, log_dir, seat)
        env = normalise_env(launcher.environment(), self.profile, self.simulated)
        facts = stream_facts(specs)  # stored with the study: entries fitted to the context, a trace's own timing
        if "dataset_fit" in facts:
            env["dataset_fit"] = facts["dataset_fit"]
        if "trace" in facts:
            env["trace"] = facts["trace"]
        record = EnvironmentRecorder(self.store, study_id, env, self.simulated, self.say)
        driver = make_driver(self.profile, self.driver_name, launcher, self.client_procs)
        ranking = self.store.study_prior(study_id) if self.profile.search.prior == "sim" else []
        guess = (prior.predicted_knee(ranking, grid(self.profile.search.space))
                 if ranking and self.prior_cannot_rank() is None else None)
        crosscheck = None
        if self.profile.crosscheck.enabled:
            from sweep.ladder.crosscheck_step import CrossChecker

            crosscheck = CrossChecker(self.profile, self.store, study_id, specs, model_path(self.profile),
                                      for_model(model_path(self.profile)), say=self.say)
        hooks = LadderHooks(on_step=on_step, on_launch=record.on_launch, on_step_start=on_step_start,
                            on_server=self.on_server, crosscheck=crosscheck,
                            predict=predictor(self.model, self.kind, self.profile, record.env),
                            placement=detect(self.kind if self.driver_name != "virtual" else "virtual", self.profile,
                                             seat.gpus, worker_id), predicted_knee=guess)
        runner = LadderRunner(self.profile, launcher, driver, self.store, study_id, specs, self.driver_name, hooks)
        search = Search(self.profile, runner, self.db_url, study_name, on_trial=on_trial, worker=identity,
                        on_requeued=on_requeued(self.store, study_id, self.say),
                        ended=lambda wid: worker_ended(self.store, study_id, wid),
                        alone=lambda: alone(self.store, study_id, worker_id),
                        on_fenced=on_fenced(self.store, worker_id, self.say),
                        prior_ranking=ranking, knees_of=study_knees(self.store, study_id))
        requeued = search.requeue_interrupted()
        if requeued:
            self.say(f"resume: {requeued} interrupted trial(s) queued again")

        def soak() -> None:
            from sweep.ladder.soak import run_soak

            winner = read_study(self.store, study_id).winner
            if winner is None or soak_done(self.store, study_id):
                return
            self.say(f"soak: {self.profile.soak.duration_s:.0f} s of Poisson arrivals at the winner's knee rate")
            verdict = run_soak(self.profile, runner, winner)
            self.say(f"soak verdict: {verdict.summary()}")

        try:
            result = search.run(reuse=lambda cfg, phase: reuse_outcome(self.store, self.profile, study_id, cfg, phase),
                                soak=soak if self.profile.soak.enabled else None)
        except BaseException:
            # the error that stopped the study is the one reported: marking the worker failed on a full disk or a
            # lost database fails too, for the same reason, and must not replace it (recovery marks it lost later)
            with contextlib.suppress(Exception):
                self.store.set_worker_status(worker_id, "failed")
            raise
        finally:
            self.simulated = record.simulated  # a launched server may have said it is the simulator
        self.store.set_worker_status(worker_id, "done")
        if result.stopped_reason:
            self.say(f"search stopped early: {result.stopped_reason}")
        return self.conclude(study_id, study_name, result)

    def run_prior(self, study_id: int, study_name: str) -> list[PriorRecord]:
        """search.prior sim: the same study on the simulator first (sweep.study.prior), its ranking stored with
        this study; once per study (a resumed study keeps the ranking it stored)."""
        stored = self.store.study_prior(study_id)
        if stored:
            return stored
        name = prior.prior_name(study_name)
        why_not = self.prior_cannot_rank()
        if why_not is not None:
            self.say(f"prior: not a screen here: {why_not}; it only orders the trials, and the study screens as "
                     "without a prior")
        self.say(f"prior: the same study on the simulator first (study {name}, simulated, virtual driver, CPU)")
        sim = Orchestrator(prior.sim_profile(self.profile), self.db_url, self.out_dir, "sim", "virtual", self.console,
                           check_resources=False)
        run = sim.knee(name, resume=self.store.get_study_by_name(name) is not None)
        space = grid(self.profile.search.space)
        ranked = prior.ranking(self.store, run.study_id, name, space,
                               self.profile.search.prior_margin if why_not is None else None)
        self.store.write_prior(study_id, ranked)
        cut = sum(r.dropped for r in ranked)
        survivors = len(prior.kept(ranked))
        self.say(f"prior: {len(prior.ranked_configs(ranked))} configurations ranked on the simulator; measuring them "
                 "best first" + (f", {cut} dropped (more than {self.profile.search.prior_margin:.0%} below the "
                                 "simulated best or infeasible)" if cut else ""))
        if cut and self.profile.search.screening.enabled:
            self.say(f"prior: {survivors} within its margin: " + (
                ("a probe of each, one window at its predicted knee's step" if prior.probes(self.profile, ranked)
                 else "a real screen among them") if prior.needs_screen(self.profile, ranked) else
                "no real screen (no more than the finals take): final ladders straight away"))
        return ranked

    def prior_cannot_rank(self) -> str | None:
        """Why the simulated prior cannot screen this study (sweep.study.prior.cannot_rank); None when it can."""
        if self.model is None:
            return "launcher attach: no model is launched to simulate"
        return prior.cannot_rank(self.profile, self.model)

    def conclude(self, study_id: int, study_name: str, result: StudyResult) -> KneeRun:
        """The study's report and winner, from the store (so they cover every process's trials); the study is
        marked completed."""
        ctx = study_context(self.store, study_id)
        answer = build_answer(self.store, ctx)
        winners = winner_records(answer, ctx.decision)  # the one stored fact every reader names (study_winners)
        self.store.write_winners(study_id, winners)
        tell_winner(self.db_url, ctx.study.optuna_study_name or study_name, winners[0])  # optuna-dashboard's view
        report = write_report(ctx, self.out_dir / ctx.study.name, answer)
        winner = ctx.winner
        self.store.finish_study(study_id, "completed", winner_config_id=winner.id if winner else None,
                                report_path=str(report.markdown))
        why = ctx.decision.why_none() if ctx.decision is not None else ""
        return KneeRun(study_id, study_name, result, report, self.simulated, self.driver_name, winner,
                       list(ctx.failures), ctx.measured, why, answer)


def check_writable_dir(path: Path) -> None:
    """--out exists or can be made, and takes a file; UsageError (one line, exit 2) otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None
