"""One server configuration through launch, warm-up and the concurrency ladder, every step stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from launchers.base import Launcher, ServerHandle
from sweep.errors import LaunchError, ServerDied
from sweep.knee import KneeResult, StepPoint, find_knee
from sweep.measure import compute_stats
from sweep.profile import Profile
from sweep.store import Store
from sweep.types import RequestSpec, ServerConfig, WindowResult


class Driver(Protocol):
    simulated: bool

    def run_window(self, handle: ServerHandle, specs: Sequence[RequestSpec], concurrency: int,
                   window: Any) -> WindowResult: ...


@dataclass
class LadderOutcome:
    """What one configuration's ladder produced."""

    config: ServerConfig
    config_id: int
    status: str  # completed | failed | infeasible
    steps: list[dict[str, Any]] = field(default_factory=list)  # stats per completed step
    knee: KneeResult | None = None
    stop_reason: str = ""
    failure: str | None = None

    @property
    def value(self) -> float | None:
        """The trial value: the knee's goodput (output tok/s), None when infeasible."""
        if self.knee is None or self.knee.point is None:
            return None
        return self.knee.point.goodput_tps


StepCallback = Callable[[ServerConfig, int, dict[str, Any]], None]


def step_points(steps: Sequence[dict[str, Any]]) -> list[StepPoint]:
    """Stats rows (dicts with the runs-table columns) to knee inputs."""
    return [StepPoint(concurrency=int(s["concurrency"]), goodput_rps=s["goodput_rps"] or 0.0,
                      goodput_tps=s["goodput_tps"] or 0.0, throughput_tps=s["output_tps"] or 0.0,
                      ttft_p99_ms=s["ttft_p99_ms"] or 0.0, retractions=s["retractions"] or 0,
                      passes=bool(s["passes_sla"])) for s in steps]


def saturated(stats: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
    """The server's own signals that more load only lengthens the queue; None when not saturated."""
    signs = []
    if (stats.get("queue_len_mean") or 0) >= 1.0:
        signs.append(f"queue never empties (mean {stats['queue_len_mean']:.1f})")
    if (stats.get("kv_usage_max") or 0) >= 0.95:
        signs.append(f"KV usage {stats['kv_usage_max']:.2f}")
    if previous is not None and (stats.get("retractions") or 0) > (previous.get("retractions") or 0):
        signs.append(f"retractions rising ({previous.get('retractions') or 0} -> {stats['retractions']})")
    return "; ".join(signs) if signs else None


class LadderRunner:
    """Launches one configuration, climbs the profile's ladder on that instance, stops the server."""

    def __init__(self, profile: Profile, launcher: Launcher, driver: Driver, store: Store, study_id: int,
                 specs: Sequence[RequestSpec], driver_name: str, on_step: StepCallback | None = None,
                 on_launch: Callable[[ServerHandle], None] | None = None):
        self.profile = profile
        self.launcher = launcher
        self.driver = driver
        self.store = store
        self.study_id = study_id
        self.specs = specs
        self.driver_name = driver_name
        self.on_step = on_step
        self.on_launch = on_launch

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final",
            ladder: Sequence[int] | None = None) -> LadderOutcome:
        """Run the whole ladder for `config`; launch failures are recorded, never raised."""
        steps_wanted = list(ladder or self.profile.ladder)
        config_id = self.store.create_server_config(self.study_id, config, self.launcher.kind, [], trial_number)
        self.store.update_server_config(config_id, status="running")
        try:
            handle = self.launcher.start(config)
        except LaunchError as exc:
            status = "infeasible" if exc.reason == "oom" else "failed"
            self.store.update_server_config(config_id, status=status, failure_reason=f"{exc.reason}: {exc}",
                                            log_path=exc.log_path)
            return LadderOutcome(config, config_id, status, failure=str(exc), stop_reason=f"launch {exc.reason}")
        self.store.update_server_config(config_id, argv=handle.argv, startup_s=handle.startup_s,
                                        log_path=handle.log_path, server_info=handle.server_info)
        outcome = LadderOutcome(config, config_id, "completed")
        if self.on_launch:
            self.on_launch(handle)
        try:
            self._climb(handle, config, config_id, steps_wanted, outcome, phase)
        finally:
            report = self.launcher.stop(handle)
            if report.killed_leftovers:
                outcome.stop_reason += f"; killed leftover pids {report.killed_leftovers}"
        outcome.knee = find_knee(step_points(outcome.steps), self.profile.search.flatten_threshold)
        if outcome.status == "completed" and outcome.knee.point is None:
            outcome.status = "infeasible"
        self.store.update_server_config(config_id, status=outcome.status, stop_reason=outcome.stop_reason,
                                        failure_reason=outcome.failure)
        return outcome

    def _climb(self, handle: ServerHandle, config: ServerConfig, config_id: int, ladder: list[int],
               outcome: LadderOutcome, phase: str) -> None:
        fingerprint = self.profile.fingerprint()
        previous: dict[str, Any] | None = None
        for concurrency in ladder:
            run_id = self.store.create_run(self.study_id, config_id, concurrency, fingerprint,
                                           handle.simulated, self.driver_name, phase=phase)
            try:
                result = self.driver.run_window(handle, self.specs, concurrency, self.profile.window)
            except ServerDied as exc:
                self.store.mark_run(run_id, "failed", str(exc))
                outcome.status, outcome.failure = "failed", str(exc)
                outcome.stop_reason = f"server died at concurrency {concurrency}"
                return
            stats = compute_stats(result, self.profile.sla)
            status = "completed" if result.aborted is None else "failed"
            self.store.finish_run(run_id, stats, result.records, result.samples, result.window_start,
                                  status=status, reason=result.aborted)
            row = dict(stats, concurrency=concurrency, run_id=run_id)
            if self.on_step:
                self.on_step(config, concurrency, row)
            if result.aborted is not None:
                outcome.status, outcome.failure = "failed", result.aborted
                outcome.stop_reason = f"{result.aborted} at concurrency {concurrency}"
                return
            outcome.steps.append(row)
            if not stats["passes_sla"]:
                why = saturated(stats, previous)
                if why:
                    outcome.stop_reason = (f"stopped after concurrency {concurrency}: SLA failed "
                                           f"({stats['sla_failures']}) and the server is saturated: {why}")
                    return
            previous = stats
        outcome.stop_reason = outcome.stop_reason or "ladder complete"
