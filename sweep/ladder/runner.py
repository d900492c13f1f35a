"""One server configuration through launch, warm-up and the concurrency ladder, every step stored."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import replace

from sweep.analysis.early_stop import window_test
from sweep.analysis.ladder_steps import LadderStep, knee_on_short, steps_knee
from sweep.analysis.loads import load_words
from sweep.analysis.measure import compute_stats
from sweep.analysis.run_stats import RunStats
from sweep.analysis.tiers import StoredRequest
from sweep.core import interrupt
from sweep.core.errors import Fenced, LaunchError, ServerDied
from sweep.core.types import ServerConfig
from sweep.drivers import Driver
from sweep.ladder.climb_on import NextWindow, measure_again, next_climb, resolved_max_running
from sweep.ladder.far_windows import far_plan, short_failing_end, unrefined_near
from sweep.ladder.launch import Launch, ServerEvent, launch_status
from sweep.ladder.near_knee import descend
from sweep.ladder.parts import (
    Climb,
    LadderHooks,
    LadderOutcome,
    StepJudge,
    StepStart,
    StopCheck,
    orchestrator_failure,
)
from sweep.ladder.recorder import Recorder
from sweep.ladder.refine import REFINE_PHASE, refine, step_bracket
from sweep.ladder.step_inputs import StepInputs
from sweep.ladder.step_verdicts import error_kinds, offered_rate, saturated, window_failure
from sweep.launchers.base import Launcher, ServerHandle
from sweep.profile import Arrival, Profile, RateArrival, TraceArrival, Window
from sweep.profile.phases import climbs_on, near_knee_start, phase_window, refines
from sweep.store import Store
from sweep.workload.stream import Requests, StreamExhausted

SUSPENDED_AGAIN = 2  # a step whose window sweep's own suspension spoiled is measured again at most this often


class LadderRunner:
    """Launches one configuration, climbs the profile's ladder on that instance, stops the server."""

    def __init__(self, profile: Profile, launcher: Launcher, driver: Driver, store: Store, study_id: int,
                 specs: Requests, driver_name: str, hooks: LadderHooks | None = None):
        self.profile = profile
        self.launcher = launcher
        self.driver = driver
        self.store = store
        self.study_id = study_id
        self.specs = specs
        self.inputs = StepInputs(profile, specs, driver)  # the stream continued step to step, the cache flushed
        self.driver_name = driver_name
        self.hooks = hooks if hooks is not None else LadderHooks()
        self.attempt: int | None = None  # the server_configs row of the launch in progress (or the last one)

    def window_elapsed(self) -> float | None:
        """Seconds into the current window on the driver's clock; None where the driver cannot say."""
        return self.driver.window_elapsed()

    def window_for(self, phase: str) -> Window:
        return phase_window(self.profile, phase)

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final",
            ladder: Sequence[int] | None = None, should_stop: StopCheck | None = None,
            refine: bool = True) -> LadderOutcome:
        """Run the ladder for `config` (coupled mode: one launch per step); launch failures are recorded. `refine`
        False: a final ladder that brackets its knee is not refined (search.baseline_refine)."""
        steps_wanted = list(ladder or self.profile.ladder)
        self.inputs.begin()
        if self.profile.search.mode == "coupled":
            return self._run_coupled(config, trial_number, phase, steps_wanted, should_stop)
        window = self.window_for(phase)
        near = phase == "screen" and self.profile.search.screening.near_knee
        guess = (self.hooks.predicted_knee(config) if self.hooks.predicted_knee is not None
                 and (phase == "final" or near) else None)
        start = near_knee_start(self.profile, steps_wanted, guess) if near else 0  # the steps far below it: skipped
        return self._run_one(config, trial_number, Climb(
            tuple(steps_wanted[start:]), phase, window, climb_on=climbs_on(self.profile, phase), refine=refine,
            far=far_plan(self.profile, window, guess, refine) if phase == "final" else None,
            skipped=tuple(steps_wanted[:start]), predicted_knee=guess), should_stop)

    def run_again(self, config: ServerConfig, loads: Sequence[int], trial_number: int | None = None,
                  phase: str = "final") -> LadderOutcome:
        """A tie's re-measure (search.tie_break, search.screening.ties): one launch, a window of `phase` at each of
        `loads` at full length (the final window), no climbing on, refinement or short windows. A final one is
        stored as final windows of a launch of its own, which the read model joins to the configuration's first
        final launch (sweep.views.read_model.config_steps)."""
        self.inputs.begin()
        climb = Climb(tuple(loads), phase, self.window_for("final"), complete="measured again (tie-break)",
                      again=True)
        return self._run_one(config, trial_number, climb, None)

    def run_probe(self, config: ServerConfig, load: int, trial_number: int | None = None) -> LadderOutcome:
        """The probe screen (search.screening.probe): one launch, one screen window of the probe's length at `load`
        (the step of the prior's predicted knee), nothing past it; its knee is that window when it passes."""
        self.inputs.begin()
        climb = Climb((load,), "screen", self.window_for("probe"), complete="probed at the predicted knee",
                      again=True)
        return self._run_one(config, trial_number, climb, None)

    def run_judged(self, config: ServerConfig, concurrency: int, window: Window, arrival: Arrival, judge: StepJudge,
                   complete: str) -> LadderOutcome:
        """One launch, one window of `arrival` at most `concurrency` in flight (phase soak), its run's reason
        `judge`'s verdict; the configuration's stop_reason `complete` when the window ran."""
        self.inputs.begin()
        return self._run_one(config, None, Climb((concurrency,), "soak", window, arrival, judge, complete), None)

    def _run_coupled(self, config: ServerConfig, trial_number: int | None, phase: str, ladder: list[int],
                     should_stop: StopCheck | None) -> LadderOutcome:
        """The article's experiment: --max-running-requests = client concurrency, relaunched per step."""
        total = LadderOutcome(config, 0, "completed")
        for i, c in enumerate(ladder):
            step_cfg = replace(config, max_running_requests=c)
            one = self._run_one(step_cfg, trial_number, Climb((c,), phase, self.window_for(phase)), None)
            total.config_id = total.config_id or one.config_id
            if one.status == "failed" or not one.steps:
                total.status, total.failure = ("failed", one.failure) if one.status == "failed" else (
                    total.status, total.failure)
                total.stop_reason = f"coupled step c={c}: {one.stop_reason or one.status}"
                break
            total.steps += one.steps  # each names its own launch (server_config_id)
            if should_stop and should_stop(i, one.steps[-1]):
                total.stop_reason = f"pruned after concurrency {c}"
                break
        self._rank(total)
        if total.knee is not None and total.knee.index is not None:
            total.config_id = total.steps[total.knee.index].server_config_id or total.config_id
        total.stop_reason = total.stop_reason or "coupled ladder complete"
        return total

    def _run_one(self, config: ServerConfig, trial_number: int | None, climb: Climb,
                 should_stop: StopCheck | None) -> LadderOutcome:
        """Launch once, climb, stop the server; every step lands in the store."""
        config_id = self.store.create_server_config(self.study_id, config, self.launcher.kind, [], trial_number,
                                                    placement=self.hooks.placement)
        self.attempt = config_id
        self.store.update_attempt(config_id, status="running")
        try:
            return self._launch_and_climb(config, config_id, climb, should_stop)
        except Fenced:  # another worker took the attempt over: its row is theirs to write, the server is stopped
            raise
        except BaseException as exc:
            # Not the configuration's fault (a signal, the database, the disk): the attempt is aborted, and the
            # search re-queues its trial so the resume measures it again. Best effort: the store may be the
            # failure, and then the resume's abort_running does the same.
            with contextlib.suppress(Exception):
                self.store.abort_config(config_id, f"orchestrator: {orchestrator_failure(exc)}")
            raise

    def _launch_and_climb(self, config: ServerConfig, config_id: int, climb: Climb,
                          should_stop: StopCheck | None) -> LadderOutcome:
        launch = Launch(self.launcher, self.store, config_id, self.hooks.predict, self.profile.server.skip_infeasible)
        self._server(ServerEvent("launching", config, climb.phase))
        t0 = time.monotonic()
        try:
            handle = launch.start(config)
        except LaunchError as exc:
            self._server(ServerEvent("failed", config, climb.phase, time.monotonic() - t0, exc.reason))
            if exc.host_fault:  # the port range or the disk, not the configuration: aborted and measured again
                raise
            return LadderOutcome(config, config_id, launch_status(exc), failure=str(exc),
                                 stop_reason=f"launch {exc.reason}")
        self._server(ServerEvent("ready", handle.config, climb.phase, handle.startup_s))
        outcome = LadderOutcome(config, config_id, "completed")
        if self.hooks.on_launch:
            self.hooks.on_launch(handle)
        with launch:
            # Steps are labelled with what ran (an attached server's own knobs), as the configuration row is.
            self._climb(handle, handle.config, config_id, climb, outcome, should_stop)
            if (climb.judge is None and not climb.again and outcome.status == "completed"
                    and not outcome.stop_reason.startswith("pruned")):
                self._past_the_ladder(handle, config_id, climb, outcome)
        outcome.stop_reason += launch.notes()
        self._server(ServerEvent("stopped", handle.config, climb.phase, detail=launch.notes().lstrip("; ")))
        if climb.judge is None:
            self._rank(outcome)
        self.store.update_attempt(config_id, status=outcome.status, stop_reason=outcome.stop_reason,
                                        failure_reason=outcome.failure)
        return outcome

    def _server(self, event: ServerEvent) -> None:
        if self.hooks.on_server is not None:
            self.hooks.on_server(event)

    def _past_the_ladder(self, handle: ServerHandle, config_id: int, climb: Climb, outcome: LadderOutcome) -> None:
        """After the ladder, on the same warm server: measure a near-knee screen's skipped steps downward where none
        passes (sweep.ladder.near_knee), climb on past a passing top step, refine the bracket, and measure a flagged
        peak again (sweep.ladder.climb_on); a window that cannot complete ends what follows, the windows measured so
        far stand."""
        def one_window(c: int) -> LadderOutcome:  # a step a near-knee screen skipped (sweep.ladder.near_knee)
            scratch = LadderOutcome(handle.config, config_id, "completed")
            self._climb(handle, handle.config, config_id, Climb((c,), climb.phase, climb.window), scratch)
            return scratch

        usable = descend(self.profile, climb, outcome, one_window)
        if climb.climb_on:
            mrr = resolved_max_running(handle.server_info) or handle.config.max_running_requests
            climbed: list[LadderStep] = []
            while usable and (nxt := next_climb(self.profile, outcome.steps, mrr)) is not None:
                done, usable = self._one_more(handle, config_id, climb, outcome, nxt, "climbing on")
                climbed += done
            if climbed and usable:
                top = max(climbed, key=lambda s: s.load)
                outcome.stop_reason += (f"; climbed on past the ladder's top to {load_words(top.concurrency, top.offered_rps)}"
                                        f" ({'fails' if not top.stats.passes_sla else 'passes: the cap'})")
        refined = climb.refine and refines(self.profile, climb.phase)
        near_short = climb.far is not None and climb.far.near_short  # far_plan: only on a ladder refined here
        if near_short and step_bracket(outcome.steps) is None:  # nothing to refine: near steps full, as near "full"
            usable = usable and self._full_again(handle, config_id, climb, outcome, unrefined_near(
                outcome.steps, climb.far), "a short step near the predicted knee, nothing to refine")
        if not near_short or step_bracket(outcome.steps) is None:  # else the refinement's full windows come first
            usable = usable and self._full_knee(handle, config_id, climb, outcome)
        if usable and refined:
            self._refine(handle, config_id, climb, outcome)
            usable = self._full_knee(handle, config_id, climb, outcome)
            end = short_failing_end(outcome.steps) if near_short else None
            usable = usable and self._full_again(handle, config_id, climb, outcome, [end] if end else [],
                                                 "the bracket's failing end was a short window")
        while usable and (again := measure_again(outcome.steps)) is not None:
            _, usable = self._one_more(handle, config_id, climb, outcome, again, "measuring again", far=False)
            if usable:
                outcome.stop_reason += (f"; measured {again.at()} again: its window was flagged by the client's "
                                        "self-check")

    def _full_knee(self, handle: ServerHandle, config_id: int, climb: Climb, outcome: LadderOutcome) -> bool:
        """A knee that lands on a far step's short window is measured again at full length before it is the answer
        (sweep.ladder.far_windows); whether the server can take another window."""
        for _ in range(len(outcome.steps)):
            if (short := knee_on_short(outcome.steps, self.profile.search.flatten_threshold)) is None:
                return True
            if not self._full_again(handle, config_id, climb, outcome, [short], "the knee landed on its short window"):
                return False
        return True

    def _full_again(self, handle: ServerHandle, config_id: int, climb: Climb, outcome: LadderOutcome,
                    steps: Sequence[LadderStep], why: str) -> bool:
        """Short windows measured again at full length, each noted with `why`; whether the server can take more."""
        for step in steps:
            nxt = NextWindow(step.concurrency, step.offered_rps, step.phase)
            _, usable = self._one_more(handle, config_id, climb, outcome, nxt, "measuring again", far=False)
            if not usable:
                return False
            outcome.stop_reason += f"; measured {nxt.at()} again at full length: {why}"
        return True

    def _one_more(self, handle: ServerHandle, config_id: int, climb: Climb, outcome: LadderOutcome,
                  nxt: NextWindow, what: str, far: bool = True) -> tuple[list[LadderStep], bool]:
        """One window past the ladder (climbing on, measuring again; `far`: short where far from the predicted
        knee): the steps it stored, and whether the server can take another (False: the window did not complete,
        the note says why)."""
        arrival = self.profile.rate_arrival(nxt.rate) if nxt.rate is not None else None
        scratch = LadderOutcome(handle.config, config_id, "completed")
        self._climb(handle, handle.config, config_id, Climb((nxt.concurrency,), nxt.phase, climb.window, arrival,
                                                             far=climb.far if far else None), scratch)
        outcome.steps += scratch.steps
        if scratch.status == "completed" and scratch.steps:
            return list(scratch.steps), True
        outcome.stop_reason += f"; {what} stopped at {nxt.at()}: {scratch.failure or scratch.stop_reason or scratch.status}"
        return list(scratch.steps), False

    def _refine(self, handle: ServerHandle, config_id: int, climb: Climb, outcome: LadderOutcome) -> None:
        """Bisect the outcome's bracket on the running server (sweep.ladder.refine) and store its SLA boundary."""

        by_rate = self.profile.rate_ladder
        ladder = list(outcome.steps)

        def run_window(load: float) -> tuple[list[LadderStep], str | None]:
            scratch = LadderOutcome(handle.config, config_id, "completed")
            if by_rate:  # the bisected rate; the window labelled with the concurrency of the ladder step below it
                label = max((s.concurrency for s in ladder if s.load <= load), default=ladder[0].concurrency)
                window = Climb((label,), REFINE_PHASE, climb.window, self.profile.rate_arrival(load))
            else:
                window = Climb((int(load),), REFINE_PHASE, climb.window)
            self._climb(handle, handle.config, config_id, window, scratch)
            done = scratch.status == "completed" and bool(scratch.steps)
            return scratch.steps, None if done else (scratch.failure or scratch.stop_reason or scratch.status)

        def requests_of(run_id: int) -> list[StoredRequest]:
            return [r.judged() for r in self.store.requests_for_run(run_id)]

        arrival = self.profile.arrival
        scaled = isinstance(arrival, TraceArrival) and bool(arrival.scales)  # a trace's time-scale ladder
        r = refine(self.profile.refine, self.profile.sla, outcome.steps, run_window, requests_of, by_rate,
                   "arrival.scales (the trace's time scales)" if scaled else "arrival.rates")
        outcome.steps += r.steps
        outcome.boundary = r.boundary
        outcome.stop_reason += r.note
        if r.boundary is not None:
            b = r.boundary
            self.store.update_attempt(config_id, boundary_concurrency=b.concurrency, boundary_ci_low=b.ci_low,
                                            boundary_ci_high=b.ci_high, boundary_shape=b.shape)

    def _rank(self, outcome: LadderOutcome) -> None:
        """The ladder's knee; a ladder that ran to the end without one is infeasible."""
        outcome.knee = steps_knee(outcome.steps, self.profile.search.flatten_threshold)
        if outcome.status == "completed" and outcome.knee.point is None:
            outcome.status = "infeasible"

    def _climb(self, handle: ServerHandle, config: ServerConfig, config_id: int, climb: Climb,
               outcome: LadderOutcome, should_stop: StopCheck | None = None) -> None:
        fingerprint = self.profile.fingerprint()
        previous: RunStats | None = None
        ladder, phase = climb.ladder, climb.phase
        crosscheck = self.hooks.crosscheck if climb.judge is None else None
        i, again = 0, 0  # again: windows of this step set aside because sweep itself was suspended in them
        while i < len(ladder):
            concurrency = ladder[i]
            interrupt.check()  # a stop signal whose KeyboardInterrupt was swallowed still stops before the next step
            arrival = climb.arrival or self.profile.step_arrival(concurrency)
            offered = (offered_rate(self.profile, arrival) if climb.judge is None else
                       float(arrival.rate) if phase == "soak" and isinstance(arrival, RateArrival) else None)
            at = load_words(concurrency, offered)  # "concurrency 16", or a rate ladder's "12.50 req/s"
            window, short = (climb.window, False) if climb.far is None else climb.far.window_for(
                offered if offered is not None and self.profile.rate_ladder else concurrency)
            expected = window.warmup_seconds + window.measure_seconds + window.drain_seconds
            run_id = self.store.create_run(self.study_id, config_id, concurrency, fingerprint,
                                           handle.simulated, self.driver_name, phase=phase, placement=self.hooks.placement,
                                           offered_rps=offered, planned_measure_s=window.measure_seconds,
                                           short_window=short)
            if self.hooks.on_step_start:
                self.hooks.on_step_start(StepStart(config, concurrency, phase, expected, self.window_elapsed))
            specs, not_flushed = self.inputs.before_step(handle, concurrency, window, arrival)
            if crosscheck is not None:
                crosscheck.before_window(handle)
            # a streaming driver hands over each request that ended: stored in batches while the window runs
            recorder = Recorder(self.store, run_id) if self.driver.streams else None
            # a failing step's window stops once its verdict is decided (never the soak's: sweep.analysis.early_stop)
            early = window_test(self.profile, window) if climb.judge is None and recorder is not None else None
            try:
                if recorder is not None:
                    extra = {"early_stop": early} if early is not None else {}
                    result = self.driver.run_window(handle, specs, concurrency, window, arrival=arrival,
                                                    sink=recorder, **extra)
                    result, unstored = recorder.finish(result)
                else:
                    result = self.driver.run_window(handle, specs, concurrency, window, arrival=arrival)
                    unstored = result.records
            except ServerDied as exc:
                self.store.mark_run(run_id, "failed", str(exc))
                outcome.status, outcome.failure = "failed", str(exc)
                outcome.stop_reason = f"server died at {at}"
                return
            except StreamExhausted as exc:  # a dataset without replay ran out: this configuration stops, not the study
                self.store.mark_run(run_id, "aborted", str(exc))
                outcome.status, outcome.failure = "failed", f"dataset_exhausted: {exc}"
                outcome.stop_reason = f"the dataset ran out at concurrency {concurrency}"
                return
            finally:
                if recorder is not None:
                    recorder.close_files()
            stats = self.inputs.after_step(result, compute_stats(result, self.profile.sla,
                                                                   min_requests=self.profile.window.min_requests))
            if result.suspended_s > 0 and result.aborted is None and again < SUSPENDED_AGAIN:
                # sweep's own client did not run for part of the window (SIGSTOP, a VM pause, swap): the requests in
                # flight held its pause, not the server's latency. Set the window aside and measure the step again.
                self.store.mark_run(run_id, "aborted", f"sweep's client was suspended {result.suspended_s:.1f} s "
                                    "inside the window: its latencies are not the server's; measured again")
                again += 1
                continue
            again = 0
            status = "completed" if result.aborted is None else "failed"
            note = f"prefix cache not emptied before this step: {not_flushed}" if not_flushed else None
            reason = climb.judge(result, stats) if climb.judge is not None else result.aborted or note
            self.store.finish_run(run_id, stats, unstored, result.samples, result.window_start,
                                  status=status, reason=reason)
            row = LadderStep(run_id, concurrency, phase, stats, config_id, offered, short)
            if self.hooks.on_step:
                self.hooks.on_step(config, concurrency, row)
            if crosscheck is not None and result.aborted is None and result.stopped_early is None:
                # (a window stopped early is a decided fail: a reference window beside its partial figures says nothing)
                crosscheck.after_window(handle, config_id, concurrency, run_id, stats, phase, window,
                                             arrival=arrival, specs=specs)
            if result.aborted is not None:
                outcome.status, outcome.failure = "failed", window_failure(self.launcher, handle, result.aborted, concurrency)
                outcome.stop_reason = f"{result.aborted} at {at}"
                return
            outcome.steps.append(row)
            if not stats.n_completed and stats.n_started and stats.n_cut == stats.n_started and not result.stopped_early:
                # Nothing failed: every request outlived the drain (issue 28 §5): the window's edge, not the server
                outcome.stop_reason = (f"stopped: every request at {at} was still running when the drain ended "
                                       f"(drain_seconds {window.drain_seconds:g} s is shorter than a request)")
                return
            if not stats.n_completed and stats.n_started and not result.stopped_early:
                # Not saturation: a server that fails every request is broken at this load, not queueing.
                broken = f"every request at {at} failed ({error_kinds(result.records)})"
                outcome.stop_reason = f"stopped: {broken}"
                if len(outcome.steps) == 1 and not climb.skipped:  # (skipped steps: measured downward first)
                    outcome.status, outcome.failure = "failed", f"errors: {broken}"
                return
            if not stats.passes_sla:
                why = saturated(stats, previous)
                if why:
                    outcome.stop_reason = (f"stopped after {at}: SLA failed "
                                           f"({stats.sla_failures}) and the server is saturated: {why}")
                    return
            previous = stats
            if should_stop is not None and i + 1 < len(ladder) and should_stop(i, row):
                outcome.stop_reason = f"pruned after {at}: goodput trails earlier ladders"
                return
            i += 1
        outcome.stop_reason = outcome.stop_reason or climb.complete
