"""The plan's arithmetic for issue 29's cheaper night (sweep.views.plan): screen ladders near the predicted knee, the
screen's ties capped, refined final ladders short where their refinement decides, SGLang's defaults unrefined where
they cannot tie. Each lever is checked against the plan without it, window by window."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.profile import Profile, load_profile
from sweep.views.plan import PlanPriorFigures, final_ladder, screen_windows, study_plan

ROOT = Path(__file__).resolve().parents[2]
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"
# what `sweep plan --profile interactive` runs its prior to: 4 survivors (mrr 128), each predicted to knee at 128;
# SGLang's defaults predicted at 256
PRIOR = PlanPriorFigures(survivor_knees=(128.0,) * 4, defaults_knee=256.0, seconds=300.0, ranked=16)
LEVERS_OFF: dict[str, object] = {"search.screening.near_knee": False, "search.screening.ties_max": None,
                                 "search.far_windows.near": "full", "search.baseline_refine": "always",
                                 "search.far_windows.fraction": 0.25}
FULL_S = 30 + 900 + 60
QUARTER_S = 30 + 225 + 60


def _profile(**over: object) -> Profile:
    return load_profile(INTERACTIVE, {**LEVERS_OFF, **over})


def test_a_screen_ladder_near_the_knee_runs_the_steps_from_half_the_predicted_knee() -> None:
    off, on = _profile(), _profile(**{"search.screening.near_knee": True})
    assert screen_windows(off, 128.0) == (4, 4 * QUARTER_S)  # 16 32 64 128
    assert screen_windows(on, 128.0) == (2, 2 * QUARTER_S)  # 64 128: 16 and 32 are below 128 / 2
    assert screen_windows(on, 20.0)[0] == 4 and screen_windows(on, 1000.0)[0] == 1  # the top step at least
    assert screen_windows(on, None)[0] == 4  # no prediction: the whole ladder
    a, b = study_plan(off, PRIOR), study_plan(on, PRIOR)
    assert a.steps - b.steps == 4 * 2
    assert a.seconds - b.seconds == pytest.approx(4 * 2 * QUARTER_S)


def test_the_screens_ties_capped_bill_as_many_re_measures_as_the_cap() -> None:
    off, on = study_plan(_profile(), PRIOR), study_plan(_profile(**{"search.screening.ties_max": 2}), PRIOR)
    assert (off.screen_again_launches, on.screen_again_launches) == (4, 2)
    assert off.gpu_hours - on.gpu_hours == pytest.approx(2 * (70 + FULL_S) / 3600)


def test_a_refined_final_short_near_its_knee_bills_its_refinement_and_one_end_again() -> None:
    off, on = _profile(), _profile(**{"search.far_windows.near": "short"})
    # the survivors' final (knee 128: 16 and 32 far), the climb to 256 included, 3 refinement windows
    assert final_ladder(off, 128.0) == (3 + 3, 2)
    assert final_ladder(on, 128.0) == (3 + 1, 5)  # every step short; refinement and one bracket end full
    assert final_ladder(on, None) == (5 + 3, 0)  # no prediction: no short window at all
    unrefined = _profile(**{"refine.enabled": False, "search.far_windows.near": "short"})
    assert final_ladder(unrefined, 128.0) == (3, 2)  # near "short" needs refinement to decide
    a, b = study_plan(off, PRIOR), study_plan(on, PRIOR)
    # the survivors' final: 64 128 256 near (full -> short), one end again; the defaults' (knee 256): 128 256 near
    assert a.seconds - b.seconds == pytest.approx(3 * (FULL_S - QUARTER_S) - FULL_S
                                                  + 2 * (FULL_S - QUARTER_S) - FULL_S)


def test_the_defaults_beyond_the_margin_are_not_refined_in_the_plan() -> None:
    prof = _profile(**{"search.baseline_refine": "could_tie"})
    beyond = PlanPriorFigures(PRIOR.survivor_knees, PRIOR.defaults_knee, PRIOR.seconds, PRIOR.ranked, True)
    a, b = study_plan(prof, PRIOR), study_plan(prof, beyond)
    assert a.seconds - b.seconds == pytest.approx(3 * FULL_S) and a.steps - b.steps == 3
    assert "defaults not refined" in b.cost_line() and "defaults not refined" not in a.cost_line()
    assert study_plan(_profile(), beyond).seconds == a.seconds  # "always": refined whatever the prior says
