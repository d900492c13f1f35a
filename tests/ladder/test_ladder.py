"""LadderRunner against the simulator (virtual driver, virtual clock): where a ladder stops and what it stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig, WindowResult
from sweep.ladder.parts import LadderHooks
from sweep.ladder.runner import LadderOutcome, LadderRunner
from sweep.ladder.wiring import ROOT, make_driver, make_launcher, model_path
from sweep.launchers.base import ServerHandle, StopReport
from sweep.profile import RateArrival, load_profile
from sweep.store import ConfigRecord, Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream

SMOKE = ROOT / "profiles" / "smoke.yaml"


def _runner(store: Store, tmp_path: Path, overrides: dict[str, object] | None = None,
            hooks: LadderHooks | None = None) -> LadderRunner:
    """A runner of the smoke profile on the in-process simulator, with a study of its own in `store`."""
    prof = load_profile(SMOKE, {"server.launcher": "sim", **(overrides or {})})
    study_id = store.create_study("ladder", prof.name, prof.model_dump_json(), prof.fingerprint(), "grid", True,
                                  "virtual", None)
    launcher = make_launcher(prof, "sim", "virtual", tmp_path / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    return LadderRunner(prof, launcher, make_driver(prof, "virtual", launcher), store, study_id, specs, "virtual",
                        hooks)


def _config_row(store: Store, outcome: LadderOutcome) -> ConfigRecord:
    return next(c for c in store.server_configs(1) if c.id == outcome.config_id)


def _runs(store: Store) -> list[tuple[int, str, str | None]]:
    return [(r.concurrency, r.status, r.phase) for r in store.study_runs(1)]


def test_a_ladder_within_the_sla_runs_every_step_and_finds_its_knee(sqlite_store: Store, tmp_path: Path) -> None:
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4], "ladder_max": 4})  # no climbing on past 4
    outcome = runner.run(ServerConfig(max_running_requests=8))
    assert (outcome.status, outcome.stop_reason) == ("completed", "ladder complete")
    assert [s.concurrency for s in outcome.steps] == [2, 4] and all(s.stats.passes_sla for s in outcome.steps)
    assert outcome.knee is not None and outcome.knee.point is not None and outcome.knee.point.concurrency == 4
    assert outcome.value == pytest.approx(outcome.steps[-1].stats.goodput_tps)
    row = _config_row(sqlite_store, outcome)
    assert (row.get("status"), row.get("stop_reason")) == ("completed", "ladder complete")
    assert _runs(sqlite_store) == [(2, "completed", "final"), (4, "completed", "final")]


def test_an_sla_miss_on_a_saturated_server_stops_the_ladder(sqlite_store: Store, tmp_path: Path) -> None:
    """Four running slots against 32 users: the queue never empties, TTFT misses the SLA, 128 is never tried."""
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 8, 32, 128]})
    outcome = runner.run(ServerConfig(max_running_requests=4))
    assert [s.concurrency for s in outcome.steps] == [2, 8, 32]
    assert not outcome.steps[-1].stats.passes_sla
    assert outcome.stop_reason.startswith("stopped after concurrency 32: SLA failed (TTFT")
    assert "queue never empties" in outcome.stop_reason
    assert outcome.status == "completed" and outcome.knee is not None and outcome.knee.point is not None
    assert outcome.knee.point.concurrency == 8  # the last step that met the SLA
    assert [c for c, _, _ in _runs(sqlite_store)] == [2, 8, 32]
    assert _config_row(sqlite_store, outcome).stop_reason == outcome.stop_reason


def test_a_server_that_cannot_start_is_infeasible_and_climbs_nothing(sqlite_store: Store, tmp_path: Path) -> None:
    runner = _runner(sqlite_store, tmp_path)
    outcome = runner.run(ServerConfig(max_running_requests=8, mem_fraction_static=0.05))
    assert (outcome.status, outcome.stop_reason, outcome.steps) == ("infeasible", "launch oom", [])
    assert outcome.failure is not None and "Not enough memory" in outcome.failure
    row = _config_row(sqlite_store, outcome)
    assert row.get("status") == "infeasible" and str(row.get("failure_reason")).startswith("oom: Not enough memory")
    assert _runs(sqlite_store) == []


def test_a_step_where_every_request_fails_fails_the_configuration(sqlite_store: Store, tmp_path: Path) -> None:
    """A 10 ms request timeout: every request times out, which is a broken server, not saturation."""
    runner = _runner(sqlite_store, tmp_path, {"window.request_timeout_s": 0.01, "ladder": [2, 4]})
    outcome = runner.run(ServerConfig(max_running_requests=8))
    assert outcome.status == "failed" and [s.concurrency for s in outcome.steps] == [2]
    assert outcome.failure is not None and outcome.failure.startswith("errors: every request at concurrency 2 failed")
    assert "timeout" in outcome.failure
    row = _config_row(sqlite_store, outcome)
    assert (row.get("status"), row.get("failure_reason")) == ("failed", outcome.failure)
    assert [c for c, _, _ in _runs(sqlite_store)] == [2]


def test_should_stop_prunes_the_rest_of_the_ladder(sqlite_store: Store, tmp_path: Path) -> None:
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4, 8]})
    seen: list[tuple[int, int]] = []

    def prune(i: int, step: LadderStep) -> bool:
        seen.append((i, step.concurrency))
        return True

    outcome = runner.run(ServerConfig(max_running_requests=8), should_stop=prune)
    assert seen == [(0, 2)] and [s.concurrency for s in outcome.steps] == [2]
    assert outcome.stop_reason.startswith("pruned after concurrency 2")


def test_an_orchestrator_failure_mid_ladder_aborts_the_attempt(sqlite_store: Store, tmp_path: Path) -> None:
    """Ctrl-C during a ladder is not the configuration's fault: its row is aborted (redone on resume)."""
    def interrupted(config: ServerConfig, concurrency: int, step: LadderStep) -> None:
        raise KeyboardInterrupt

    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4]}, LadderHooks(on_step=interrupted))
    with pytest.raises(KeyboardInterrupt):
        runner.run(ServerConfig(max_running_requests=8))
    (row,) = sqlite_store.server_configs(1)
    assert row.get("status") == "aborted" and str(row.get("failure_reason")).startswith("orchestrator: interrupted")


class _UngracefulStop:
    """The simulator's launcher, but its stop had to SIGKILL the server and a leftover process."""

    def __init__(self, inner: object):
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def stop(self, handle: ServerHandle) -> StopReport:
        self.inner.stop(handle)  # type: ignore[attr-defined]
        return StopReport(graceful=False, seconds=30.0, killed_leftovers=[4242])


def test_what_the_stop_found_is_kept_in_the_stop_reason(sqlite_store: Store, tmp_path: Path) -> None:
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2], "ladder_max": 2})
    runner.launcher = _UngracefulStop(runner.launcher)  # type: ignore[assignment]
    outcome = runner.run(ServerConfig(max_running_requests=8))
    assert outcome.stop_reason == ("ladder complete; killed leftover pids [4242]; "
                                   "server ignored SIGTERM for the drain budget and was killed")
    assert _config_row(sqlite_store, outcome).stop_reason == outcome.stop_reason


def test_a_judged_window_is_a_one_step_soak_with_its_verdict_as_the_reason(sqlite_store: Store,
                                                                           tmp_path: Path) -> None:
    """The soak's path: one open-loop window (phase soak), the judge's line stored, the stop's findings kept."""
    runner = _runner(sqlite_store, tmp_path)
    runner.launcher = _UngracefulStop(runner.launcher)  # type: ignore[assignment]
    judged: list[int] = []

    def judge(result: WindowResult, stats: RunStats) -> str:
        judged.append(stats.n_completed)
        return f"verdict over {stats.n_completed} requests"

    window = runner.profile.window.model_copy(update={"measure_seconds": 5})
    arrival = RateArrival(kind="poisson", rate=4.0, max_in_flight=6)
    outcome = runner.run_judged(ServerConfig(max_running_requests=8), 6, window, arrival, judge, complete="soaked")
    assert len(judged) == 1 and judged[0] > 0
    assert outcome.knee is None and outcome.status == "completed"
    assert outcome.stop_reason.startswith("soaked; killed leftover pids [4242]")
    (run,) = sqlite_store.study_runs(1)
    assert (run.get("phase"), run.get("concurrency"), run.get("status")) == ("soak", 6, "completed")
    assert run.get("reason") == f"verdict over {judged[0]} requests"


def test_a_step_whose_every_request_the_drain_cut_is_not_a_broken_server(sqlite_store: Store, tmp_path: Path) -> None:
    """Issue 28 §5: 3,000-token replies (~19 s each) in a 3 s window with no drain: nothing failed, every request was
    still running at the window's edge. The ladder stops on the drain, not on "every request failed"."""
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4], "window.drain_seconds": 0, "window.warmup_requests": 0,
                                              "workload.output_len": {"kind": "uniform", "low": 3000, "high": 3001}})
    outcome = runner.run(ServerConfig(max_running_requests=8))
    assert outcome.status == "infeasible" and outcome.failure is None  # no knee, but not a failed configuration
    assert outcome.stop_reason.startswith("stopped: every request at concurrency 2 was still running when the drain")
    (step,) = outcome.steps
    assert step.stats.n_cut == step.stats.n_started > 0 and step.stats.n_errors == 0
