"""bench.night_lean (issue 29, the lean night): the ties cap keeps the leader and the ties closest to it, a near-knee
screen ladder starts near the prior's predicted knee and descends when its first step fails, a final with short coarse
windows is decided on a full window and billed one full re-measure, and with every lever off it is the shipped rule."""

from __future__ import annotations

import math

from bench.night import shipped
from bench.night_ladder import (
    DRAIN_S,
    FULL_S,
    QUARTER_S,
    SOAK_S,
    STARTUP_S,
    WARM_S,
    climbed,
    ladder_bill,
    ladder_of,
    noisy_ladder,
    noisy_steps,
    predicted_knee,
    refine_bill,
    window_s,
)
from bench.night_lean import SHIPPED, Lean, full_knee, lean, near_knee_ladder, screen_bill, short_finals
from bench.night_ties import capped_ties
from bench.search_oracle import truth
from bench.search_prior import Landscape
from tests.bench.test_bench_night_probe import _ladder
from tests.bench.test_bench_search_prior import _land


def test_the_ties_cap_keeps_the_leader_and_the_tie_closest_to_it_not_the_prior_s_first() -> None:
    """b leads the screen (1000); a (900) and c (990) are tied with it. Capped at 2 by the prior's order (a first),
    a and b would be measured again; the cap keeps b and c, the tie 1% from the leader."""
    knees = {"a": 900.0, "b": 1000.0, "c": 990.0}
    prior_order = ["a", "b", "c"]
    ties = ["b", "a", "c"]  # the leader first, the rest in any order
    assert [k for k in prior_order if k in ties][:2] == ["a", "b"]  # the naive cap
    assert capped_ties(ties, knees, 2) == ["b", "c"]
    assert capped_ties(ties, knees, 3) == ties  # no more than the cap: all of them, as given
    assert capped_ties(ties, knees, None) == ties and capped_ties(["b", "c"], knees, 2) == ["b", "c"]
    assert capped_ties([], knees, 2) == []


def _cliff() -> Landscape:
    """a: knee 2000 at 32 (P95 at 0.9 of its bound); 64 fails at 1.3 and saturates (the ladder stops there). A prior
    whose latencies are 0.6 x the truth sees every step pass and predicts the knee at 128."""
    table = {"a": _ladder((1000.0, 2000.0, 3000.0, 4000.0), (0.3, 0.9, 1.3, 1.5))}
    return Landscape(table, truth(table, 0.10), 0.10, list(table), 0.0)


def test_a_near_knee_screen_descends_to_a_knee_below_the_skipped_steps() -> None:
    land = _cliff()
    assert predicted_knee(land, "a", 0.6) == 128 and predicted_knee(land, "a", 1.0) == 32
    lad = near_knee_ladder(land, "a", 0, 128)  # starts at 128 / 2 = 64: it fails, so 32 is measured, then passes
    assert lad.steps == ((32, 0.9), (64, 1.3)) and (lad.knee_c, lad.knee) == (32, 2000.0)
    no_descent = ladder_of(climbed(noisy_steps(land, "a", 0, 1)[2:]), land.flatten)
    assert no_descent.steps == ((64, 1.3),) and no_descent.knee is None  # without descent: no knee at all
    whole = noisy_ladder(land, "a", 0, 1)  # today's screen ladder: from the first step
    assert [c for c, _ in whole.steps] == [16, 32, 64] and whole.knee_c == 32
    assert screen_bill(lad) == screen_bill(whole) - window_s(QUARTER_S, 0.3, True)  # one window fewer
    right = near_knee_ladder(land, "a", 0, 32)  # predicted at the true knee: starts at 16, nothing skipped
    assert right.steps == whole.steps
    assert near_knee_ladder(land, "a", 0, None).steps == whole.steps  # no prediction: nothing skipped


def test_a_short_final_is_decided_on_a_fresh_full_window_and_billed_one_full_re_measure() -> None:
    land = _land(0.05)
    short = ladder_of(climbed(noisy_steps(land, "a", 7, 2)), land.flatten)
    full = full_knee(land, "a", 7, short)
    fresh = {s.concurrency: s.stats.goodput_tps for s in noisy_steps(land, "a", 7, 3)}
    assert full.knee_c == short.knee_c == 64 and full.knee == fresh[64] != short.knee
    assert full.windows().knee() == (64, fresh[64])  # the tie-break pools the full window only
    assert full.ci[0] is not None and short.ci[0] is not None and short.knee is not None and full.knee is not None
    assert math.isclose(full.ci[0] / full.knee, short.ci[0] / short.knee)
    out = short_finals(land, 7, ["a"], 0.0, 0, land.truth["a"])
    one = ladder_bill(short, {16, 32, 64}, True) + refine_bill(True) + window_s(FULL_S, 1.0, True)
    assert out.hit and math.isclose(out.seconds, 2 * one + STARTUP_S + WARM_S + SOAK_S + DRAIN_S)  # + the defaults


def test_with_every_lever_off_the_lean_rule_is_the_shipped_rule() -> None:
    land = _land(0.05)
    space = list(land.table)
    off = Lean(near_knee=False, near_short=False, ties_max=None)
    for seed in range(6):
        for variant in ("exact", "bias+err15"):
            assert lean(land, space, seed, variant, off) == shipped(land, space, seed, variant, SHIPPED)
    on = lean(land, space, 0, "exact", Lean(ties_max=2))
    assert on.screened == 2 and on.finals == 1 and on.hit
    assert on.seconds < shipped(land, space, 0, "exact", SHIPPED).seconds
    assert Lean(ties_max=2).name() == "lean: shipped now + near_knee + far_windows.near short + ties_max 2"
