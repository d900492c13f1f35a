"""search.prior: sim: the same study on the simulator first, its ranking stored, the real study's first trials in
that order; the prior never changes which configurations are measured unless its margin drops some."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import optuna
import pytest

from sweep.core.errors import ProfileError
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
SPACE = {"max_running_requests": [1, 2, 4, 8], "mem_fraction_static": [0.85]}


def _rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _trial_mrrs(db: Path, name: str) -> list[int]:
    """max_running_requests of a study's measured trials, in trial order."""
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    return [int(t.params["max_running_requests"]) for t in sorted(study.trials, key=lambda t: t.number)
            if t.state == optuna.trial.TrialState.COMPLETE]


def _prior(db: Path, name: str) -> list[tuple[int, dict[str, Any], float | None, bool]]:
    rows = _rows(db, "SELECT p.rank, p.knobs_json, p.sim_goodput_tps, p.dropped FROM study_priors p "
                     "JOIN sweep_studies s ON s.id = p.study_id WHERE s.name = ? ORDER BY p.rank", name)
    return [(r, json.loads(k), v, bool(d)) for r, k, v, d in rows]


@pytest.mark.integration
def test_grid_prior_orders_the_trials_and_measures_the_same_grid(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": SPACE, "search.prior": "sim"})
    db = tmp_path / "r.db"
    run = Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("pri")
    prior = _prior(db, "pri")
    ranked = [p["max_running_requests"] for _, p, _, _ in prior]
    values = [v for _, _, v, _ in prior]
    assert sorted(ranked) == [1, 2, 4, 8] and not any(d for *_, d in prior)
    feasible = [v for v in values if v is not None]
    assert feasible == sorted(feasible, reverse=True) and values[:len(feasible)] == feasible  # infeasible last
    assert ranked[0] != 1  # the simulator does see the cap: mrr=1 is not its best
    # the prior is its own study, labelled simulated, in the same database
    assert _rows(db, "SELECT simulated, driver, status FROM sweep_studies WHERE name = 'pri:prior-sim'") == [
        (1, "virtual", "completed")]
    assert _trial_mrrs(db, "pri") == ranked  # the real study's trials in the prior's order
    order = [r[0] for r in _rows(db, "SELECT c.max_running_requests FROM server_configs c JOIN sweep_studies s "
                                     "ON s.id = c.study_id WHERE s.name = 'pri' ORDER BY c.trial_number")]
    assert order == ranked
    setup = run.report.markdown.read_text()
    assert "search prior: the same study on the simulator first (study `pri:prior-sim`" in setup
    assert f"#1 mrr={ranked[0]}" in setup
    # without the prior: the same configurations measured (the prior changes only their order)
    plain = load_profile(SMOKE, {"search.space": SPACE})
    Orchestrator(plain, f"sqlite:///{db}", tmp_path, driver="virtual").knee("plain")
    assert sorted(_trial_mrrs(db, "plain")) == sorted(ranked)
    # resumed: the stored ranking is kept, nothing queued twice, nothing measured again
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("pri", resume=True)
    assert _prior(db, "pri") == prior and _trial_mrrs(db, "pri") == ranked


@pytest.mark.integration
def test_prior_margin_drops_configurations_far_below_the_simulated_best(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": SPACE, "search.prior": "sim", "search.prior_margin": 0.3})
    db = tmp_path / "r.db"
    run = Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("cut")
    prior = _prior(db, "cut")
    best = prior[0][2]
    assert best is not None
    for _, _, v, dropped in prior:
        assert dropped == (v is None or v < 0.7 * best)
    kept = [p["max_running_requests"] for _, p, _, d in prior if not d]
    assert any(d for *_, d in prior) and kept  # this space has a configuration far below the best
    assert _trial_mrrs(db, "cut") == kept  # only what the margin keeps, best first
    assert "not measured: infeasible on the simulator or more than 30% below its best" in \
        run.report.markdown.read_text()


@pytest.mark.integration
def test_tpe_prior_starts_with_the_simulated_leaders(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": SPACE, "search.prior": "sim", "search.sampler": "tpe",
                                "search.n_trials": 3, "ladder": [2, 4]})
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("tpe")
    ranked = [p["max_running_requests"] for _, p, _, _ in _prior(db, "tpe")]
    assert len(ranked) == 4  # the prior runs the whole grid, whatever the real study's sampler
    assert _trial_mrrs(db, "tpe") == ranked[:3]


def test_prior_margin_without_a_prior_and_a_coupled_prior_are_refused() -> None:
    with pytest.raises(ProfileError, match="prior_margin needs prior: sim"):
        load_profile(SMOKE, {"search.prior_margin": 0.25})
    with pytest.raises(ProfileError, match="coupled mode"):
        load_profile(SMOKE, {"search.prior": "sim", "search.mode": "coupled"})
