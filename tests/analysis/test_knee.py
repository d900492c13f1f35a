"""Knee and Pareto selection, on ladders shaped like the article's table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweep.analysis.knee import StepPoint, find_knee, gain_per_doubling, pareto_front


def step(
    c: int, tps: float, ttft: float, retr: int, passes: bool = True, goodput_tps: float | None = None
) -> StepPoint:
    g = tps if goodput_tps is None else goodput_tps
    return StepPoint(
        concurrency=c,
        goodput_rps=g / 100,
        goodput_tps=g,
        throughput_tps=tps,
        ttft_p99_ms=ttft,
        retractions=retr,
        passes=passes,
    )


def article_ladder(passes: tuple[bool, bool, bool, bool] = (True, True, True, True)) -> list[StepPoint]:
    """The article's table: 128 buys < 10% over 64 while TTFT P99 doubles and preemptions triple."""
    rows = [(16, 398, 700, 8), (32, 762, 900, 23), (64, 1010, 1900, 97), (128, 1095, 4100, 341)]
    return [step(c, tps, ttft, r, p) for (c, tps, ttft, r), p in zip(rows, passes, strict=True)]


def test_knee_is_the_goodput_peak_even_where_throughput_flattens() -> None:
    # Issue 28 §2: the article's ladder passes at every step; 128 buys < 10% per doubling over 64, but it still
    # serves more SLA-meeting tokens. The old rule called 64 the knee and ranked its 1,010 tok/s against other
    # configurations' goodput peaks; the flattening is advice beside the knee now, never a lower knee.
    k = find_knee(article_ladder(), flatten_threshold=0.10)
    assert k.index == 3 and k.point is not None and k.point.concurrency == 128
    assert k.flattens_at == 3 and "flattens from c=128" in k.reason


def test_no_passing_step_is_infeasible() -> None:
    k = find_knee(article_ladder((False, False, False, False)), flatten_threshold=0.10)
    assert k.index is None and k.point is None and k.reason.startswith("infeasible")


def test_knee_is_highest_goodput_passing_step() -> None:
    # Throughput keeps growing (no flattening); 128 fails the SLA, 64 has the best goodput of the rest.
    ladder = [
        step(16, 400, 500, 0),
        step(32, 800, 600, 0),
        step(64, 1500, 800, 0),
        step(128, 2800, 3000, 5, False),
    ]
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.index == 2 and "highest-goodput" in k.reason
    # Goodput (not throughput) decides: 64 serves more tokens but fewer inside the SLA than 32.
    ladder[2] = step(64, 1500, 800, 0, goodput_tps=700)
    assert find_knee(ladder, flatten_threshold=0.10).index == 1


def test_goodput_tie_goes_to_lower_concurrency() -> None:
    ladder = [step(16, 400, 500, 0, goodput_tps=500), step(32, 800, 500, 0, goodput_tps=500)]
    assert find_knee(ladder, flatten_threshold=0.10).index == 0


def test_flat_throughput_without_rising_latency_is_not_a_knee() -> None:
    ladder = [step(16, 1000, 500, 3), step(32, 1050, 500, 3), step(64, 1100, 450, 2)]
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.index == 2  # gains flatten but neither TTFT P99 nor retractions rise


def test_gain_is_normalised_per_doubling() -> None:
    # 16 -> 64 is two doublings: +15% in total is 7.5% per doubling, below a 10% threshold.
    assert gain_per_doubling(step(16, 1000, 1, 0), step(64, 1150, 1, 0)) == pytest.approx(0.075)
    k = find_knee([step(16, 1000, 500, 0), step(64, 1150, 900, 0)], flatten_threshold=0.10)
    assert k.index == 1 and k.flattens_at == 1
    # The same +15% over one doubling is above the threshold: no flattening to report.
    k = find_knee([step(16, 1000, 500, 0), step(32, 1150, 900, 0)], flatten_threshold=0.10)
    assert k.index == 1 and k.flattens_at is None


def test_highest_passing_load_is_not_the_knee_when_goodput_fell() -> None:
    # Issue 28 §2, seen on the simulator: c=64 passes at 935 tok/s, the refined c=80 passes at 569. The old refined
    # rule (the highest passing concurrency below the first failure) named c=80 and ranked 569 tok/s.
    ladder = [step(32, 700, 300, 0), step(64, 935, 600, 0), step(80, 600, 900, 4, goodput_tps=569),
              step(96, 610, 1500, 9, passes=False)]
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.point is not None and k.point.concurrency == 64 and k.point.goodput_tps == 935


def test_a_flagged_window_is_not_the_knee_until_measured_again() -> None:
    # Issue 28 §5: the client's self-check flagged c=64 (the load generator stalled): the peak among the others.
    ladder = [step(32, 800, 300, 0), step(64, 1500, 600, 0), step(128, 2000, 3000, 5, passes=False)]
    ladder[1] = replace(ladder[1], flagged=True)
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.point is not None and k.point.concurrency == 32
    again = [*ladder, step(64, 1450, 610, 0)]  # measured again, unflagged
    k = find_knee(again, flatten_threshold=0.10)
    assert k.index == 3 and k.point is not None and k.point.goodput_tps == 1450
    only = [replace(step(16, 400, 200, 0), flagged=True)]
    k = find_knee(only, flatten_threshold=0.10)
    assert k.point is None and k.reason.startswith("no knee yet")


def test_the_knee_reads_its_load_in_req_s_in_a_rate_ladder() -> None:
    ladder = [replace(step(64, 800, 300, 0), offered_rps=4.0), replace(step(64, 1500, 600, 0), offered_rps=8.0),
              replace(step(64, 900, 3000, 5, passes=False), offered_rps=16.0)]
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.index == 1 and "8.00 req/s" in k.reason and "c=64" not in k.reason


def test_index_refers_to_callers_order() -> None:
    ladder = article_ladder()[::-1]  # 128, 64, 32, 16
    k = find_knee(ladder, flatten_threshold=0.10)
    assert k.index == 0 and ladder[0].concurrency == 128
    ladder = article_ladder((True, True, True, False))[::-1]
    assert find_knee(ladder, flatten_threshold=0.10).index == 1


def test_pareto_front_keeps_non_dominated_points() -> None:
    pts = [(10.0, 100.0), (20.0, 200.0), (15.0, 300.0), (20.0, 150.0), (5.0, 100.0)]
    assert pareto_front(pts) == [0, 3]
    assert pareto_front([]) == []
