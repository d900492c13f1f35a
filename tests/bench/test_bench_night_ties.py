"""bench.night_ties: the same-winner levers (issue 29): sweep's tie rule on two knees, the loads a tie-break measures
again, a load measured twice counted as its mean, and the shipped rule's minimum of two finals."""

from __future__ import annotations

from bench.night import shipped
from bench.night_ties import (
    Knee,
    SameWinner,
    Windows,
    pooled,
    recut,
    remeasured_loads,
    tied,
    tied_with_leader,
)
from tests.bench.test_bench_search_prior import _land


def test_knees_within_each_others_interval_tie_and_far_apart_ones_do_not() -> None:
    assert tied(Knee(1000.0, 900.0, 1100.0), Knee(980.0, 880.0, 1080.0))
    assert not tied(Knee(1000.0, 990.0, 1010.0), Knee(900.0, 890.0, 910.0))
    assert not tied(Knee(1000.0, None, None), Knee(990.0, None, None))  # no interval: exact, ranked apart
    knees = {"a": Knee(980.0, 880.0, 1080.0), "b": Knee(1000.0, 900.0, 1100.0), "c": Knee(600.0, 590.0, 610.0)}
    assert tied_with_leader(knees) == ["b", "a"]  # the leader first; c is ranked apart
    assert tied_with_leader({"a": knees["a"], "c": knees["c"]}) == []


def test_a_tie_break_measures_the_knee_load_again_and_the_step_above_only_when_asked() -> None:
    lad = Windows(((16, 100.0), (32, 200.0), (64, 150.0), (128, None)))
    assert lad.knee() == (32, 200.0)
    assert remeasured_loads(lad) == (32,)
    assert remeasured_loads(lad, above=True) == (32, 64)
    assert remeasured_loads(Windows(((16, None),))) == ()


def test_a_load_measured_twice_counts_as_its_mean_so_one_lucky_window_no_longer_decides() -> None:
    """The naive rule takes the first ladder's knee, 210 at 64 (a lucky window); measured again at 150 the load's
    mean is 180, below the 200 at 32: the knee moves to 200."""
    first = Windows(((16, 100.0), (32, 200.0), (64, 210.0), (128, None)))
    again = Windows(((16, 90.0), (32, 150.0), (64, 150.0), (128, None)))
    assert first.knee() == (64, 210.0)
    assert pooled(first, again, (64,)).knee() == (32, 200.0)
    assert pooled(first, again, (32, 64)).knee() == (64, 180.0)
    failing = Windows(((16, 100.0), (32, 200.0), (64, None)))
    assert pooled(first, failing, (64,)).knee() == (32, 200.0)  # a load that fails once fails


def test_with_a_minimum_of_two_finals_two_survivors_skip_the_real_screen() -> None:
    """a and b survive the margin: the shipped rule (min 1) screens both for one final; min 2 sends both."""
    land = _land(0.05)
    space = list(land.table)
    one, two = shipped(land, space, 0, "exact"), shipped(land, space, 0, "exact", SameWinner(min_keep=2))
    assert (one.screened, one.finals) == (2, 1)
    assert (two.screened, two.finals) == (0, 2) and two.hit


def test_the_screens_ties_measured_again_recut_by_their_full_windows() -> None:
    """The cut took a (the screen's leader); a and b tied, and measured again at full length b's window is higher: b
    takes the cut's place; c, in the cut but not tied, keeps its own."""
    assert recut(["a"], ["a", "b"], {"a": 900.0, "b": 950.0}) == ["b"]
    assert recut(["a", "c"], ["a", "b"], {"a": 900.0, "b": 0.0}) == ["c", "a"]  # b's window failed
    land = _land(0.05)
    again = shipped(land, list(land.table), 0, "exact", SameWinner(screen_again=True))
    assert (again.screened, again.finals) == (2, 1) and again.hit
