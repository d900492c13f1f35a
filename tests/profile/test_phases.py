"""Where a screen ladder starts near the prior's predicted knee (search.screening.near_knee, issue 29): the pure step
choice sweep.profile.phases.near_knee_start."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.profile.phases import near_knee_start, step_load

ROOT = Path(__file__).resolve().parents[2]
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"
LADDER = [16, 32, 64, 128]


@pytest.mark.parametrize(("knee", "start"), [
    (None, 0),  # no prediction: the whole ladder
    (0.0, 0),  # nor a knee of nothing
    (20.0, 0),  # knee / 2 = 10 lies below the bottom step: the whole ladder
    (32.0, 0),  # knee / 2 = 16, the bottom step itself: nothing skipped
    (90.0, 2),  # knee / 2 = 45: 16 and 32 pass far below it, the ladder starts at 64
    (128.0, 2),  # knee / 2 = 64 exactly: 64 is measured
    (256.0, 3),  # knee / 2 = 128: the top step alone
    (4000.0, 3),  # far above the top: the top step alone, never nothing
])
def test_a_screen_ladder_starts_at_its_first_step_at_or_above_the_predicted_knee_over_the_factor(
        knee: float | None, start: int) -> None:
    prof = load_profile(INTERACTIVE, {"ladder": LADDER, "search.screening.near_knee": True})
    assert prof.search.far_windows.factor == 2.0
    assert near_knee_start(prof, LADDER, knee) == start


def test_the_factor_is_far_windows_and_near_knee_off_keeps_the_whole_ladder() -> None:
    wide = load_profile(INTERACTIVE, {"ladder": LADDER, "search.screening.near_knee": True,
                                      "search.far_windows.factor": 4.0})
    assert near_knee_start(wide, LADDER, 90.0) == 1  # 90 / 4 = 22.5: 32 is the first step measured
    off = load_profile(INTERACTIVE, {"ladder": LADDER, "search.screening.near_knee": False})
    assert not off.search.screening.near_knee
    assert near_knee_start(off, LADDER, 90.0) == 0
    assert near_knee_start(wide, [], 90.0) == 0


def test_a_rate_ladder_compares_the_steps_offered_rates_with_the_predicted_knee() -> None:
    """In an open-loop rate ladder the prior's knee is a rate (req/s), and so is each step's load: the step labels
    (concurrency caps) do not decide."""
    prof = load_profile(INTERACTIVE, {"ladder": LADDER, "search.screening.near_knee": True,
                                      "arrival": {"kind": "poisson", "rate": 1.0, "rates": [2.0, 4.0, 8.0, 16.0]}})
    assert [step_load(prof, c) for c in LADDER] == [2.0, 4.0, 8.0, 16.0]
    assert near_knee_start(prof, LADDER, 12.0) == 2  # 12 / 2 = 6 req/s: the 8 req/s step (labelled 64)
    assert near_knee_start(prof, LADDER, 5.0) == 1  # 2.5 req/s: the 4 req/s step (the labels would keep every step)
