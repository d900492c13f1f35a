"""The search: failures still yield a report, the time budget, screening, coupled mode, the knee's interval."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.knee import StepPoint, knee_goodput_ci
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import Screening, load_profile
from sweep.study.orchestrator import Orchestrator
from sweep.study.search import Search, promoted

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.integration
def test_a_config_that_cannot_start_is_infeasible_and_the_study_still_reports(tmp_path: Path, sqlite_url: str) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [8], "mem_fraction_static": [0.05, 0.85]}})
    run = Orchestrator(prof, sqlite_url, tmp_path, driver="virtual").knee("oom")
    statuses = dict(_rows(tmp_path / "r.db", "SELECT mem_fraction_static, status FROM server_configs"))
    assert statuses == {0.05: "infeasible", 0.85: "completed"}
    reason = _rows(tmp_path / "r.db", "SELECT failure_reason FROM server_configs WHERE mem_fraction_static = 0.05")
    assert reason[0][0].startswith("predicted infeasible: Not enough memory")  # skipped before launch
    assert run.winner is not None and run.winner.config.mem_fraction_static == 0.85
    report = run.report.markdown.read_text()
    assert "infeasible" in report and "## Winner" in report
    assert run.report.html is not None and run.report.html.exists()


class _FakeRunner:
    """Every ladder 'takes' 100 clock seconds and yields a feasible knee equal to max_running_requests."""

    def __init__(self, clock: list[float]):
        self.clock = clock
        self.ran: list[tuple[ServerConfig, str]] = []

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final",
            ladder: Any = None, should_stop: Any = None) -> LadderOutcome:
        from sweep.analysis.knee import KneeResult

        self.clock[0] += 100.0
        self.ran.append((config, phase))
        v = float(config.max_running_requests or 0)
        point = StepPoint(8, v, v, v, 10.0, 0, True)
        return LadderOutcome(config, len(self.ran), "completed", [], KneeResult(0, point, "fake"))


def test_time_budget_starts_no_trial_that_cannot_finish(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [1, 2, 3, 4, 5]},
                                "search.time_budget_s": 250})
    clock = [0.0]
    runner = _FakeRunner(clock)
    result = Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "b", clock=lambda: clock[0]).run()  # type: ignore[arg-type]
    assert len(runner.ran) == 2  # after 200 s, 50 s are left and a trial takes 100 s
    assert "time budget" in result.stopped_reason


def test_screening_measures_every_config_short_and_only_the_top_share_long(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [1, 2, 3, 4]},
                                "search.screening": {"enabled": True, "fraction": 0.5, "keep": 0.5}})
    clock = [0.0]
    runner = _FakeRunner(clock)
    result = Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", clock=lambda: clock[0]).run()  # type: ignore[arg-type]
    screens = sorted(c.max_running_requests or 0 for c, ph in runner.ran if ph == "screen")
    finals = sorted(c.max_running_requests or 0 for c, ph in runner.ran if ph == "final")
    assert screens == [1, 2, 3, 4] and finals == [3, 4]
    win = result.winner()
    assert win is not None and win.config.max_running_requests == 4 and win in result.finals


def test_promoted_keeps_at_least_min_keep() -> None:
    vals = [({"a": 1}, 5.0), ({"a": 2}, 9.0), ({"a": 3}, 1.0)]
    assert promoted(vals, Screening(keep=0.1, min_keep=1)) == [{"a": 2}]
    assert promoted(vals, Screening(keep=0.5, min_keep=1)) == [{"a": 2}, {"a": 1}]


@pytest.mark.integration
def test_screening_end_to_end_separates_phases_in_store_and_report(tmp_path: Path, sqlite_url: str) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8]},
                                "search.screening": {"enabled": True, "fraction": 0.5, "keep": 0.3}})
    run = Orchestrator(prof, sqlite_url, tmp_path, driver="virtual").knee("scr")
    phases = _rows(tmp_path / "r.db", "SELECT phase, count(DISTINCT server_config_id), min(window_s) FROM runs "
                                      "GROUP BY phase ORDER BY phase")
    assert [(p, n) for p, n, _ in phases] == [("final", 1), ("screen", 3)]
    assert phases[1][2] < phases[0][2]  # the screen's measured window is the shorter one
    assert run.winner is not None and run.winner.knee.phase == "final"
    assert "| screen |" in run.report.markdown.read_text()


@pytest.mark.integration
def test_coupled_mode_relaunches_with_the_cap_equal_to_client_concurrency(tmp_path: Path, sqlite_url: str) -> None:
    prof = load_profile(SMOKE, {"search.mode": "coupled", "search.space": {"max_running_requests": [4]}})
    run = Orchestrator(prof, sqlite_url, tmp_path, driver="virtual").knee("cpl")
    rows = _rows(tmp_path / "r.db", "SELECT c.max_running_requests, r.concurrency FROM runs r "
                                    "JOIN server_configs c ON c.id = r.server_config_id ORDER BY r.id")
    assert rows == [(2, 2), (4, 4), (8, 8)]
    assert len({c for (c,) in _rows(tmp_path / "r.db", "SELECT id FROM server_configs")}) == 3
    assert run.winner is not None


def test_knee_interval_brackets_the_knee_and_widens_with_noise() -> None:
    def pts(width: float) -> list[StepPoint]:
        return [StepPoint(c, g / 100, g, g, 100.0, 0, True, g - width, g + width)
                for c, g in ((2, 200.0), (4, 380.0), (8, 400.0))]

    lo, hi = knee_goodput_ci(pts(5.0), 0.0)
    assert lo is not None and hi is not None and lo < 400.0 < hi
    wide = knee_goodput_ci(pts(60.0), 0.0)
    assert wide[0] is not None and wide[1] is not None and (wide[1] - wide[0]) > (hi - lo)
    assert knee_goodput_ci([StepPoint(2, 1, 1, 1, 1.0, 0, False)], 0.1) == (None, None)


@pytest.mark.integration
def test_tpe_and_gp_samplers_run_a_study_with_the_infeasible_config_as_a_constraint(tmp_path: Path) -> None:
    import optuna

    for sampler in ("tpe", "gp"):
        prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8],
                                                     "mem_fraction_static": [0.05, 0.85]},
                                    "search.sampler": sampler, "search.n_trials": 3, "ladder": [2, 4]})
        db = tmp_path / f"{sampler}.db"
        run = Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee(sampler)
        study = optuna.load_study(study_name=sampler, storage=f"sqlite:///{db}")
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert len(done) == 3
        for t in done:  # the constraint Optuna's samplers read: > 0 exactly when the configuration was infeasible
            assert (t.constraints["feasible"] > 0) == (t.params["mem_fraction_static"] == 0.05)
        assert run.winner is None or run.winner.config.mem_fraction_static == 0.85


def test_knee_interval_is_unknown_when_no_step_has_one() -> None:
    """Steps without a measured interval used to give the knee's point as its '95% CI' (zero width)."""
    pts = [StepPoint(c, g / 100, g, g, 100.0, 0, True) for c, g in ((2, 200.0), (4, 380.0))]
    assert knee_goodput_ci(pts, 0.0) == (None, None)
