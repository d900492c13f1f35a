"""A screen ladder near the prior's predicted knee (search.screening.near_knee, issue 29), on the simulated server:
it skips the steps far below the knee, and where the prediction is too high (its first step fails) it measures the
skipped steps downward on the same server until one passes, so the screen still finds the knee."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.analysis.ladder_steps import steps_knee
from sweep.core.types import ServerConfig
from sweep.ladder.parts import LadderHooks, LadderOutcome
from sweep.ladder.runner import LadderRunner
from sweep.ladder.wiring import make_driver, make_launcher, model_path
from sweep.profile import Profile, load_profile
from sweep.store import Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream
from tests.virtual_ladder import virtual_runner

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
LADDER = [2, 4, 8, 16, 32, 64]
# On the simulator (llama3-8b shape, mrr 64) TPOT P95 is ~11 ms at 16 in flight and ~15 ms at 32: a 13 ms SLA puts
# the real knee at 16.
CONFIG = ServerConfig(max_running_requests=64)


def _profile(**over: object) -> Profile:
    return load_profile(SMOKE, {"ladder": LADDER, "server.launcher": "sim", "window.measure_seconds": 8,
                                "sla.tpot_ms": 13, "search.screening.enabled": True,
                                "search.screening.near_knee": True, **over})


def _screen(tmp_path: Path, prof: Profile, knee: float | None, phase: str = "screen") -> tuple[LadderOutcome, Store, int]:
    runner, store, study_id = virtual_runner(prof, tmp_path, knee, "near")
    return runner.run(CONFIG, phase=phase), store, study_id


def _windows(store: Store, study_id: int) -> list[tuple[int, str]]:
    return [(r.concurrency, r.phase) for r in store.study_runs(study_id) if r.status == "completed"]


def test_without_a_prediction_the_screen_ladder_is_whole_and_its_knee_is_16(tmp_path: Path) -> None:
    outcome, store, study_id = _screen(tmp_path, _profile(), None)
    assert _windows(store, study_id) == [(c, "screen") for c in LADDER]
    assert outcome.knee is not None and outcome.knee.point is not None and outcome.knee.point.concurrency == 16
    assert "predicted knee" not in outcome.stop_reason


def test_a_good_prediction_skips_the_steps_far_below_it(tmp_path: Path) -> None:
    """A predicted knee of 24: 24 / 2 = 12, so 2, 4 and 8 (they pass, far below it) are not measured; the ladder
    starts at 16, which passes: nothing is measured downward, and the knee is the full ladder's."""
    outcome, store, study_id = _screen(tmp_path, _profile(), 24.0)
    assert _windows(store, study_id) == [(16, "screen"), (32, "screen"), (64, "screen")]
    assert outcome.status == "completed"
    assert outcome.knee is not None and outcome.knee.point is not None and outcome.knee.point.concurrency == 16
    assert "started at concurrency 16 near the predicted knee 24" in outcome.stop_reason
    assert "measured" not in outcome.stop_reason


@pytest.mark.parametrize(("knee", "first"), [(128.0, [64]), (40.0, [32, 64])])
def test_a_prediction_too_high_measures_the_skipped_steps_downward_until_one_passes(
        tmp_path: Path, knee: float, first: list[int]) -> None:
    """A predicted knee of 128 starts the screen at its top step (64), one of 40 at 32: every step it measures fails
    the SLA, and the rule on those windows alone finds no knee (the configuration would be infeasible). The
    skipped steps are measured downward, one screen window each on the same server: 32 (where skipped) fails, 16
    passes and is the knee, the full ladder's; 2, 4 and 8 are never measured."""
    prof = _profile()
    outcome, store, study_id = _screen(tmp_path, prof, knee)
    ladder_part = outcome.steps[:len(first)]
    assert [s.concurrency for s in ladder_part] == first
    assert steps_knee(ladder_part, prof.search.flatten_threshold).point is None  # no descent: infeasible
    windows = _windows(store, study_id)
    assert [c for c, _ in windows] == [*first, *([32] if 32 not in first else []), 16]
    assert {p for _, p in windows} == {"screen"}  # screen windows of the screen's length
    assert {r.planned_measure_s for r in store.study_runs(study_id)} == {8 * prof.search.screening.fraction}
    assert outcome.status == "completed"
    assert outcome.knee is not None and outcome.knee.point is not None and outcome.knee.point.concurrency == 16
    below = "concurrency 32 (fails), concurrency 16 (passes)" if first == [64] else "concurrency 16 (passes)"
    assert f"near the predicted knee {knee:g}; concurrency {first[0]} failed: measured {below}" in outcome.stop_reason


def test_a_final_ladder_ignores_near_knee(tmp_path: Path) -> None:
    """near_knee is the screen's: a final ladder with the same prediction measures from its bottom step."""
    outcome, store, study_id = _screen(tmp_path, _profile(**{"search.far_windows.enabled": False}), 128.0, "final")
    assert [c for c, _ in _windows(store, study_id)] == LADDER
    assert "predicted knee" not in outcome.stop_reason


@pytest.mark.slow
def test_a_server_that_dies_while_measuring_downward_fails_the_configuration(tmp_path: Path) -> None:
    """A real simulator process (HTTP driver): the screen starts at its top step (predicted knee 100), which fails an
    SLA nothing meets; the server is killed after that window, so the first window measured downward cannot complete:
    the configuration fails with the death, as it would in its ladder, and nothing further is measured."""
    import os
    import signal

    from sweep.launchers.base import ServerHandle

    prof = load_profile(SMOKE, {"ladder": [2, 4, 8], "server.launcher": "sim", "window.measure_seconds": 1.5,
                                "window.drain_seconds": 2, "window.warmup_requests": 2, "window.min_requests": 2,
                                "sla.ttft_ms": 0.001, "search.screening.enabled": True,
                                "search.screening.near_knee": True, "server.shutdown_grace_s": 5})
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    study_id = store.create_study("near-died", prof.name, prof.model_dump_json(), prof.fingerprint(), "grid", True,
                                  "http", None)
    launcher = make_launcher(prof, "sim", "http", tmp_path / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    servers: list[ServerHandle] = []

    def kill_after_the_top(_config: ServerConfig, concurrency: int, _step: object) -> None:
        if concurrency == 8 and servers[0].pid:
            os.kill(servers[0].pid, signal.SIGKILL)

    runner = LadderRunner(prof, launcher, make_driver(prof, "http", launcher), store, study_id, specs, "http",
                          LadderHooks(on_launch=servers.append, on_step=kill_after_the_top,
                                      predicted_knee=lambda _c: 100.0))
    outcome = runner.run(ServerConfig(max_running_requests=8), phase="screen")
    runs = [(r.concurrency, r.status) for r in store.study_runs(study_id)]
    assert runs == [(8, "completed"), (4, "failed")], runs  # 2 is never measured
    assert outcome.status == "failed" and outcome.knee is not None and outcome.knee.point is None
    assert "died" in (outcome.failure or ""), outcome.failure
    assert "concurrency 8 failed: measured nothing below it (server died during the window at concurrency 4)" in outcome.stop_reason
