"""bench.night's pure parts on a toy landscape: the window bill with early stop and short windows, and the new
settings against today's (no real screen when the prior keeps few, the same winner, a smaller bill)."""

from __future__ import annotations

from bench.night import new, shipped, today
from bench.night_ladder import (
    DRAIN_S,
    FULL_S,
    MIN_S,
    QUARTER_S,
    STARTUP_S,
    WARM_S,
    Ladder,
    knee_concurrency,
    ladder_bill,
    noisy_ladder,
    window_s,
)
from tests.bench.test_bench_search_prior import _land


def test_a_failing_window_stops_early_and_a_passing_one_runs_its_length() -> None:
    assert window_s(FULL_S, 0.9, early=True) == WARM_S + FULL_S + DRAIN_S
    assert window_s(FULL_S, 3.0, early=False) == WARM_S + FULL_S + DRAIN_S  # today: no early stop
    far = window_s(FULL_S, 3.0, early=True)
    assert WARM_S + MIN_S <= far < WARM_S + FULL_S / 4  # cut at once: no drain
    assert far < window_s(FULL_S, 1.2, early=True) < window_s(FULL_S, 1.02, early=True) < WARM_S + FULL_S


def test_steps_far_from_the_predicted_knee_run_quarter_windows() -> None:
    lad = Ladder(3000.0, 64, ((16, 0.2), (32, 0.4), (64, 0.9), (128, 1.5)))
    full = ladder_bill(lad)
    assert full == STARTUP_S + 4 * (WARM_S + FULL_S + DRAIN_S)
    assert ladder_bill(lad, {16, 128}) == full - 2 * (FULL_S - QUARTER_S)


def test_the_prior_replaces_the_screen_finds_the_same_winner_and_costs_less() -> None:
    land = _land(0.05)
    space = list(land.table)
    assert knee_concurrency(land, "a") == 64 and noisy_ladder(land, "d", 0, 2).steps == ()
    now, then = today(land, space, 0), new(land, space, 0, "exact")
    assert now.hit and then.hit
    assert now.screened == 4 and then.screened == 0 and then.finals == 2  # a and b are within 5% of the leader
    assert then.seconds < now.seconds


def test_the_shipped_rule_screens_the_survivors_for_real_and_sends_its_cut_to_the_finals() -> None:
    """profiles/interactive.yaml's rule: a and b survive the 15% margin (c is 50% below, d infeasible); two survivors
    are more than a 25% cut with min 1 keeps, so both get a real quarter-window screen and one goes to the finals, where
    the band rule sent both straight to the finals without a screen."""
    land = _land(0.05)
    space = list(land.table)
    ship, band = shipped(land, space, 0, "exact"), new(land, space, 0, "exact")
    assert ship.screened == 2 and ship.finals == 1 and ship.hit
    assert band.screened == 0 and band.finals == 2
