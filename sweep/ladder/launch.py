"""One configuration row's server from spawn to stop: the only place the store learns how a launch went.

The ladder and the soak both launch through `Launch`: the LaunchRecord goes into the row the moment the
process exists (a resume after kill -9 during a minutes-long start still finds and kills it), what ran goes
in once it is ready, a failed start is recorded (infeasible for an out-of-memory, failed otherwise), and the
`with` block stops the server, keeping what the stop found (leftovers killed, SIGTERM ignored, GPU memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Literal

from sglang_sim.params import MemoryPlan
from sweep.core.errors import LaunchError
from sweep.core.types import ServerConfig
from sweep.launchers.base import Launcher, LaunchRecord, ServerHandle, ServerInfo, StopReport
from sweep.launchers.prediction import infeasible_reason
from sweep.store import Store


@dataclass(frozen=True)
class ServerEvent:
    """A server of the study started, came up, failed to, or stopped: one line each in an overnight log."""

    what: Literal["launching", "ready", "failed", "stopped"]
    config: ServerConfig
    phase: str  # the phase whose ladder the server is for: screen | final | soak
    seconds: float | None = None  # ready: its start-up; failed: the time it took to fail
    detail: str = ""  # failed: the failure's class (oom, crash, timeout, ...); stopped: what the stop had to do

    def line(self) -> str:
        """The event as one plain line, e.g. "ready mrr=64 mem=0.8 (final) after 143 s"."""
        took = "" if self.seconds is None else f" after {self.seconds:.0f} s"
        why = f": {self.detail}" if self.detail else ""
        return f"{self.what} {self.config.label()} ({self.phase}){took}{why}"


ServerCallback = Callable[[ServerEvent], None]


class SpawnLog:
    """The on_spawn callback of one launch: each spawned server's LaunchRecord goes into its server_configs
    row at once, so a resume after kill -9 during a minutes-long start still finds and kills that server."""

    def __init__(self, store: Store, config_id: int):
        self.store = store
        self.config_id = config_id
        self.record: LaunchRecord | None = None

    def __call__(self, record: LaunchRecord) -> None:
        self.record = record
        self.store.update_attempt(self.config_id, log_path=record.log_path,
                                        server_info={"sweep_launch": record.as_dict()})

    def server_info(self, handle: ServerHandle) -> ServerInfo:
        """The ready server's /server_info knobs with the launch record kept beside them."""
        info = dict(handle.server_info or {})
        if self.record is not None:
            info["sweep_launch"] = self.record.as_dict()
        return info


def launch_status(exc: LaunchError) -> str:
    """A configuration's status after a failed start: out of memory (real or predicted) is infeasible, anything
    else failed."""
    return "infeasible" if exc.reason in ("oom", "predicted_infeasible") else "failed"


def stop_notes(report: StopReport) -> str:
    """What stopping the server had to do, as "; "-led clauses for the configuration's stop_reason."""
    notes = ""
    if report.killed_leftovers:
        notes += f"; killed leftover pids {report.killed_leftovers}"
    if not report.graceful:
        notes += "; server ignored SIGTERM for the drain budget and was killed"
    if report.gpu_mem_released is False:
        notes += "; GPU memory did not return to its pre-launch level after stop"
    return notes


class Launch:
    """Start `config` for the row `config_id` (`start`), then `with launch as handle:` stops it at the end.

    With a `predict` (sweep.launchers.prediction.Predictor) the memory plan is stored on the row first; a plan that
    says the server will not start skips the launch (status infeasible, `predicted infeasible: ...` with the
    numbers) unless `skip_infeasible` is off. The server's own pool lands beside the prediction once it is up."""

    def __init__(self, launcher: Launcher, store: Store, config_id: int,
                 predict: Callable[[ServerConfig], MemoryPlan] | None = None, skip_infeasible: bool = True):
        self.launcher = launcher
        self.store = store
        self.config_id = config_id
        self.predict = predict
        self.skip_infeasible = skip_infeasible
        self.handle: ServerHandle | None = None
        self.stopped: StopReport | None = None

    def _predicted(self, config: ServerConfig) -> None:
        """Store the prediction; raise LaunchError(predicted_infeasible) for a plan that won't start, if skipping."""
        if self.predict is None:
            return
        plan = self.predict(config)
        self.store.update_attempt(self.config_id, predicted_pool_tokens=max(plan.pool_tokens, 0),
                                  predicted_starts=plan.starts, predicted_startup_s=round(plan.startup_s, 1))
        if plan.starts or not self.skip_infeasible:
            return
        reason = infeasible_reason(plan)
        self.store.update_attempt(self.config_id, status="infeasible", failure_reason=reason)
        raise LaunchError(reason, reason="predicted_infeasible")

    def start(self, config: ServerConfig) -> ServerHandle:
        """Predict, then start and record the server; a LaunchError is recorded on the row, then raised."""
        self._predicted(config)
        spawned = SpawnLog(self.store, self.config_id)
        try:
            handle = self.launcher.start(config, on_spawn=spawned)
        except LaunchError as exc:
            if exc.host_fault:  # not the configuration's verdict: the caller aborts the attempt and it is re-queued
                raise
            self.store.update_attempt(self.config_id, status=launch_status(exc),
                                            failure_reason=f"{exc.reason}: {exc}", log_path=exc.log_path)
            raise
        # The knobs of the server that ran: an attached server's are its own (from /server_info), not the request.
        ran = handle.config.columns() if handle.config != config else {}
        pool = (handle.server_info or {}).get("max_total_num_tokens")
        self.store.update_attempt(self.config_id, argv=handle.argv, startup_s=handle.startup_s,
                                  log_path=handle.log_path, server_info=spawned.server_info(handle),
                                  pool_tokens=int(pool) if isinstance(pool, int | float) else None, **ran)
        self.handle = handle
        return handle

    def __enter__(self) -> ServerHandle:
        if self.handle is None:
            raise RuntimeError("Launch.start() first")
        return self.handle

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.handle is not None:
            self.stopped = self.launcher.stop(self.handle)

    def notes(self) -> str:
        """The stop's findings for stop_reason ("" before the stop, or when it was clean)."""
        return stop_notes(self.stopped) if self.stopped is not None else ""
