"""Issue 29, a shorter screen: with the simulated prior, search.screening.near_knee starts each screen ladder at its
first step at or above the prior's predicted knee / far_windows.factor (the steps far below pass; they do not rank).
A real study on the simulator stores screen windows only there, and the cut and the winner still come out."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.core.types import FlagScalar
from sweep.profile import load_profile
from sweep.profile.phases import near_knee_start
from sweep.store import Store
from sweep.study import prior
from sweep.views.read_model import read_study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
SPACE: dict[str, list[FlagScalar]] = {"max_running_requests": [4, 8, 16, 32], "mem_fraction_static": [0.85]}
LADDER = [2, 4, 8, 16, 32, 64]


@pytest.mark.integration
def test_a_near_knee_screen_on_the_simulator_measures_only_near_the_predicted_knees(tmp_path: Path) -> None:
    """Four survivors of the prior (margin 0.9), one final: the prior predicts knees of 8 to 32, so every screen
    ladder skips its steps below knee / 2 (2 for all of them; up to 8 for mrr 32) and is stored from there up; the
    final ladder is whole, and the study has its winner."""
    prof = load_profile(SMOKE, {"search.space": SPACE, "ladder": LADDER, "search.prior": "sim",
                                "search.prior_margin": 0.9, "search.screening.enabled": True,
                                "search.screening.keep": 0.25, "search.screening.min_keep": 1,
                                "search.screening.near_knee": True, "window.measure_seconds": 8})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    from sweep.study.orchestrator import Orchestrator

    run = Orchestrator(prof, url, tmp_path, driver="virtual").knee("near")
    with Store(url) as store:
        ranked = store.study_prior(run.study_id)
        model = read_study(store, run.study_id)
    survivors = prior.kept(ranked)
    assert len(survivors) == 4 and prior.needs_screen(prof, ranked)
    guess = prior.predicted_knee(ranked, SPACE)
    screened = [c for c in model.configs if any(r.phase == "screen" for r in model.runs if r.server_config_id == c.id)]
    assert len(screened) == 4
    skipped = 0
    for c in screened:
        knee = guess(c.config)
        assert knee is not None
        start = near_knee_start(prof, LADDER, knee)
        loads = [r.concurrency for r in model.runs if r.server_config_id == c.id and r.phase == "screen"]
        assert loads and loads == LADDER[start:len(loads) + start]  # from the step near the knee up, none below
        assert min(loads) >= knee / prof.search.far_windows.factor
        assert f"near the predicted knee {knee:g}" in (c.stop_reason or "")
        skipped += start
    assert skipped >= 4  # not the whole ladder: at least the bottom step of each
    finals = {r.server_config_id for r in model.runs if r.phase == "final"}
    assert len(finals) == prof.search.screening.kept(4) == 1
    final_loads = sorted(r.concurrency for r in model.runs if r.phase == "final")
    assert final_loads[0] == LADDER[0]  # a final ladder is not cut short by near_knee
    assert model.winner is not None and model.winner.id in finals
