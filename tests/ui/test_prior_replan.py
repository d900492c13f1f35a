"""Issue 29: the study bar plans with the simulated prior's outcome once it has run (Orchestrator.knee's on_prior),
not with the assumption `sweep plan --no-prior` makes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from sweep.profile import load_profile
from sweep.store import Store
from sweep.study import prior
from sweep.study.orchestrator import Orchestrator
from sweep.ui.progress import StudyProgress
from sweep.views.plan import PlanPriorFigures, study_plan

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.mark.integration
def test_the_study_bar_plans_with_the_priors_survivors_once_it_ran(tmp_path: Path) -> None:
    """Four configurations, the prior as the screen with a 15% margin: the bar starts on the assumption (as many
    survive as screening would promote) and, once the prior has ranked the space, counts what it kept."""
    space = {"max_running_requests": [1, 2, 4, 8]}
    prof = load_profile(SMOKE, {"search.space": space, "search.prior": "sim", "search.prior_margin": 0.15,
                                "search.screening.enabled": True, "search.screening.keep": 0.5,
                                "search.screening.min_keep": 1, "ladder": [2, 8]})
    bars = StudyProgress(prof, False, Console(file=io.StringIO(), force_terminal=False, width=80))
    assumed = bars.total
    told: list[PlanPriorFigures] = []

    def replan(figures: PlanPriorFigures) -> None:
        told.append(figures)
        bars.replan(figures)

    url = f"sqlite:///{tmp_path / 'r.db'}"
    run = Orchestrator(prof, url, tmp_path, driver="virtual").knee("replan", on_prior=replan)
    with Store(url) as store:
        ranked = store.study_prior(run.study_id)
    assert len(told) == 1 and told[0].survivor_knees == tuple(r.knee_concurrency for r in prior.kept(ranked))
    planned = study_plan(prof, told[0])
    assert planned.steps != assumed  # the prior kept another number than the assumption's
    assert bars.total == max(planned.steps, bars.done)
