"""search.far_windows.near "short" (issue 29, a night of at most 6 GPU-hours): on a refined final ladder every step
runs the short window, the refinement's full windows decide the knee, and a bracket end left on a short window is
measured again at full length."""

from __future__ import annotations

from pathlib import Path

from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.ladder.far_windows import short_failing_end
from sweep.ladder.runner import LadderOutcome
from sweep.profile import load_profile
from tests.virtual_ladder import virtual_runner

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _step(c: int, passes: bool, short: bool) -> LadderStep:
    stats = RunStats.from_row({"n_started": 500, "n_completed": 500, "goodput_tps": 10.0 * c, "goodput_rps": c / 10,
                               "output_tps": 10.0 * c, "ttft_p99_ms": 100.0, "retractions": 0, "passes_sla": passes,
                               "client_bound": False})
    return LadderStep(c, c, "final", stats, short=short)


def test_the_failing_end_is_measured_again_only_where_a_short_window_alone_measured_it() -> None:
    ladder = [_step(16, True, True), _step(32, True, True), _step(64, False, True)]
    # refinement passed all the way up to the short failing step: that short window is the bracket's failing end
    refined = [*ladder, _step(48, True, False), _step(56, True, False), _step(60, True, False)]
    end = short_failing_end(refined)
    assert end is not None and end.concurrency == 64
    # measured again at full length: nothing left to measure
    assert short_failing_end([*refined, _step(64, False, False)]) is None
    # a full refinement window fails inside the bracket: that is the failing end
    assert short_failing_end([*ladder, _step(48, True, False), _step(56, False, False)]) is None
    # no full window passes yet (the passing end is the knee's own rule: measured again first): nothing here
    assert short_failing_end(ladder) is None


def _ladder(tmp_path: Path, near: str, refine: bool = True) -> tuple[LadderOutcome, list[tuple[int, str, bool]]]:
    prof = load_profile(SMOKE, {"ladder": [2, 4, 8, 16, 32], "server.launcher": "sim", "sla.ttft_ms": 300,
                                "refine.enabled": True, "refine.max_steps": 3, "search.far_windows.fraction": 0.5,
                                "search.far_windows.near": near})
    # the prior predicts a knee of 10: 8 and 16 are near it (full windows unless near is "short")
    runner, store, study_id = virtual_runner(prof, tmp_path, 10.0, "near")
    outcome = runner.run(ServerConfig(max_running_requests=8), refine=refine)
    runs = [(r.concurrency, r.phase, r.short_window) for r in store.study_runs(study_id) if r.status == "completed"]
    return outcome, runs


def test_near_short_runs_the_whole_refined_ladder_short_and_decides_on_full_windows(tmp_path: Path) -> None:
    outcome, runs = _ladder(tmp_path / "short", "short")
    first_refine = next(i for i, (_, phase, _) in enumerate(runs) if phase == "refine")
    ladder = runs[:first_refine]
    assert [c for c, _, _ in ladder] == [2, 4, 8, 16]  # stopped at its first failing, saturated step
    # every ladder step short, the knee not measured again before the refinement (its windows are the full ones)
    assert all(short for _, _, short in ladder)
    refined = [c for c, phase, _ in runs if phase == "refine"]
    assert refined and all(not short for _, phase, short in runs if phase == "refine")
    assert outcome.knee is not None and outcome.knee.index is not None
    assert not outcome.steps[outcome.knee.index].short  # the answer rests on a full-length window
    assert outcome.boundary is not None
    # the bracket's failing end was the short ladder step: measured again at full length
    top_fail = min(c for c, phase, short in runs if phase == "final" and short and c > max(refined))
    assert (top_fail, "final", False) in runs
    assert "again at full length: the bracket's failing end was a short window" in outcome.stop_reason
    # against near "full": the steps near the predicted knee (8, 16) ran full, and as many windows or more
    _, full_runs = _ladder(tmp_path / "full", "full")
    assert (8, "final", False) in full_runs and (16, "final", False) in full_runs
    assert (8, "final", False) not in runs


def test_a_ladder_the_study_does_not_refine_runs_its_steps_near_the_knee_full(tmp_path: Path) -> None:
    """search.baseline_refine could_tie: the defaults' ladder run with refine=False has no refinement to decide its
    knee, so far_windows.near "short" does not apply: its steps near the predicted knee (8, 16) run full, the far ones
    short, and nothing is refined."""
    outcome, runs = _ladder(tmp_path, "short", refine=False)
    assert not [r for r in runs if r[1] == "refine"]
    assert runs[:4] == [(2, "final", True), (4, "final", True), (8, "final", False), (16, "final", False)]
    assert outcome.knee is not None and outcome.knee.index is not None
    assert not outcome.steps[outcome.knee.index].short


def test_with_nothing_to_refine_the_steps_near_the_knee_are_measured_again_at_full_length(tmp_path: Path) -> None:
    """A near-short ladder that passes to its top has no bracket: its refinement cannot decide the knee, so every
    short step near the predicted knee (8 and 16 of 2..32, knee 10) is measured again at full length before the knee
    rule compares them; re-measuring only the knee's short window (the far-window rule) would leave the other near
    step decided by a short one."""
    prof = load_profile(SMOKE, {"ladder": [2, 4, 8, 16, 32], "server.launcher": "sim", "refine.enabled": True,
                                "refine.max_steps": 3, "search.far_windows.fraction": 0.5,
                                "search.far_windows.near": "short"})
    runner, store, study_id = virtual_runner(prof, tmp_path, 10.0, "near")
    outcome = runner.run(ServerConfig(max_running_requests=32))
    runs = [(r.concurrency, r.short_window) for r in store.study_runs(study_id) if r.status == "completed"]
    assert runs[:5] == [(2, True), (4, True), (8, True), (16, True), (32, True)]  # passes to the top: no bracket
    assert (8, False) in runs and (16, False) in runs  # both near steps again at full length
    assert (2, False) not in runs and (4, False) not in runs  # far ones stay short
    assert outcome.knee is not None and outcome.knee.index is not None
    assert not outcome.steps[outcome.knee.index].short
    assert "a short step near the predicted knee, nothing to refine" in outcome.stop_reason
