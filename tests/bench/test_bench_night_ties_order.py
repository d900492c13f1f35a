"""bench.night_ties.capped_ties_by_prior (issue 29, the lean night's ties_order "screen_and_prior"): the ties cap keeps
the leader and the ties of the best mean of screen knee and prior goodput, each relative; and the lean rule's short
final windows at far_windows.fraction 0.125 are billed as such."""

from __future__ import annotations

import math

from bench.night_ladder import ladder_bill, ladder_of, noisy_steps
from bench.night_lean import LEAN_ROWS, Lean, short_bill, short_cv
from bench.night_ties import capped_ties, capped_ties_by_prior
from tests.bench.test_bench_search_prior import _land

# The screen's leader L and three ties; t, the true best, drew the lowest screen knee of the four, but the prior ranks
# it first (its values biased low by 13% in common: the bias cancels).
KNEES = {"L": 1000.0, "a": 990.0, "b": 980.0, "t": 900.0}
PRIOR: dict[str, float | None] = {"L": 0.87 * 5000.0, "a": 0.87 * 4600.0, "b": 0.87 * 4600.0, "t": 0.87 * 6000.0}
TIES = ["L", "a", "b", "t"]


def test_the_ties_cap_by_screen_and_prior_keeps_the_true_best_the_screen_ranks_last() -> None:
    assert capped_ties(TIES, KNEES, 2) == ["L", "a"]  # by closeness to the leader: t is left out
    assert capped_ties(TIES, KNEES, 3) == ["L", "a", "b"]
    # t: (0.90 + 6000/6000) / 2 = 0.95; a: (0.99 + 4600/6000) / 2 = 0.878; b: (0.98 + 0.767) / 2 = 0.873
    assert capped_ties_by_prior(TIES, KNEES, PRIOR, 2) == ["L", "t"]
    assert capped_ties_by_prior(TIES, KNEES, PRIOR, 3) == ["L", "t", "a"]
    unbiased = {k: (v or 0.0) / 0.87 for k, v in PRIOR.items()}
    assert capped_ties_by_prior(TIES, KNEES, dict(unbiased), 3) == ["L", "t", "a"]  # a common bias cancels


def test_the_leader_stays_and_a_tie_without_a_prior_value_is_scored_by_its_screen_alone() -> None:
    prior = dict(PRIOR, L=0.87 * 3000.0)  # the prior ranks the leader last: it is kept all the same
    assert capped_ties_by_prior(TIES, KNEES, prior, 2)[0] == "L"
    no_t = dict(PRIOR, t=None)  # t: p = s = 0.90, its score 0.90; a: (0.99 + 4600/5000) / 2 = 0.955
    assert capped_ties_by_prior(TIES, KNEES, no_t, 2) == ["L", "a"]
    assert capped_ties_by_prior(TIES, KNEES, {}, 2) == ["L", "a"]  # no prior at all: the screen's order
    assert capped_ties_by_prior(TIES, KNEES, PRIOR, None) == TIES == capped_ties_by_prior(TIES, KNEES, PRIOR, 4)


def test_the_short_final_windows_at_an_eighth_are_billed_shorter_and_the_rows_names_stay() -> None:
    land = _land(0.05)
    lad = ladder_of(noisy_steps(land, "a", 7, 2), land.flatten)
    assert short_bill(lad, 0.25) == ladder_bill(lad, {c for c, _ in lad.steps}, True)  # today's bill, exactly
    assert short_bill(lad, 0.125) < short_bill(lad, 0.25)
    assert short_cv(land) is None or math.isclose(short_cv(land) or 0.0, 0.10)
    names = [r.name() for r in LEAN_ROWS]
    assert names[0] == "lean: shipped now + near_knee + far_windows.near short + ties_max 2"  # as printed before
    assert Lean(ties_max=2, ties_order="screen_and_prior", far_fraction=0.125).name() in names
    assert len(set(names)) == len(names)
