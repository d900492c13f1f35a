"""The cross-check's pure judgement: tolerance, reference comparison, histogram buckets (hand-computed cases)."""

from __future__ import annotations

import math

import pytest

from sweep.analysis.crosscheck import Tolerance, compare_runs, histogram_check, quantile_bucket, server_checks

ROW = {"n_completed": 1000, "ttft_p50_ms": 100.0, "ttft_p99_ms": 1000.0, "tpot_p50_ms": 10.0, "tpot_p99_ms": 30.0,
       "output_tps": 1000.0}


def test_tolerance_is_the_looser_of_ten_percent_and_twenty_ms() -> None:
    tol = Tolerance()
    assert tol.allowed(100.0, 105.0, "request") == 20.0  # 10% of 105 = 10.5 < 20 ms
    assert tol.allowed(1000.0, 1150.0, "request") == pytest.approx(115.0)  # 10% of the larger figure
    assert tol.allowed(1000.0, 1090.0, "rate") == pytest.approx(109.0)  # a rate has no ms floor


def test_a_per_token_figure_has_a_per_token_floor() -> None:
    """Issue 23 §15: TPOT and ITL are 5-25 ms, so the 20 ms floor could never flag them (old: a TPOT P50 of 10 vs
    25 ms agreed). Their floor is tolerance_token_ms (2 ms), stated with the tolerance."""
    tol = Tolerance()
    assert tol.allowed(10.0, 13.0, "token") == 2.0  # 10% of 13 = 1.3 < 2 ms
    assert tol.allowed(30.0, 40.0, "token") == pytest.approx(4.0)
    check = compare_runs(ROW, dict(ROW, tpot_p50_ms=13.0, tpot_p99_ms=31.0))
    verdict = {f.column: f.agrees for f in check.figures}
    assert verdict["tpot_p50_ms"] is False and verdict["tpot_p99_ms"] is True  # 3 > 2; 1 <= 3.1
    assert compare_runs(ROW, dict(ROW, tpot_p50_ms=11.9)).agrees is True
    assert compare_runs(ROW, dict(ROW, ttft_p50_ms=119.0)).agrees is True  # a per-request latency keeps 20 ms
    assert "TPOT and ITL: 2 ms" in tol.describe()
    assert Tolerance.of({"tolerance_token_ms": 5}).token_ms == 5.0 and Tolerance.of({}).token_ms == 2.0


def test_the_itl_p99_the_outside_check_caught_is_flagged_against_its_bucket() -> None:
    """Issue 23 §15: a client ITL P99 of 12.1 ms against the server's 6-8 ms bucket had agreed (8 + 20 ms)."""
    itl = [(0.006, 0.0), (0.008, 1000.0), (math.inf, 1000.0)]  # every inter-token gap in the 6-8 ms bucket
    check = histogram_check("ITL", "inter_token_latency_seconds", 99, 12.1, itl, Tolerance(), "token")
    assert check is not None and (check.bucket_low_ms, check.bucket_high_ms) == (6.0, 8.0)
    assert check.agrees is False
    near = histogram_check("ITL", "inter_token_latency_seconds", 99, 9.9, itl, Tolerance(), "token")
    assert near is not None and near.agrees is True  # 8 ms + 2 ms
    by_server = {(c.metric, c.q): c.agrees for c in server_checks({"itl_p99_ms": 12.1, "itl_p50_ms": 7.0},
                                                                   {"inter_token_latency_seconds": itl})}
    assert by_server == {("ITL", 50): True, ("ITL", 99): False}


def test_reference_within_tolerance_agrees_and_outside_is_flagged() -> None:
    ref = dict(ROW, ttft_p50_ms=119.0, ttft_p99_ms=1100.0, tpot_p50_ms=12.0, output_tps=1095.0)
    check = compare_runs(ROW, ref)
    assert check.agrees is True and not check.flagged
    bad = compare_runs(ROW, dict(ref, ttft_p99_ms=1120.0, output_tps=1120.0))  # 120 > 112; 120 > 112
    assert check.agrees is True
    assert bad.agrees is False
    assert [f.column for f in bad.flagged] == ["ttft_p99_ms", "output_tps"]
    f = bad.flagged[0]
    assert f.diff == pytest.approx(120.0) and f.rel_diff == pytest.approx(0.12) and f.allowed == pytest.approx(112.0)


def test_a_p99_of_too_few_requests_is_shown_not_judged() -> None:
    few = dict(ROW, n_completed=300)  # 300 x 1% = 3 requests beyond P99 < 5
    check = compare_runs(few, dict(few, ttft_p99_ms=5000.0))
    p99 = next(f for f in check.figures if f.column == "ttft_p99_ms")
    assert p99.agrees is None and "too few requests" in p99.note
    assert check.agrees is True  # the P50s and the throughput still agree
    assert next(f for f in check.figures if f.column == "ttft_p50_ms").agrees is True


def test_a_missing_figure_is_not_judged_and_nothing_judged_is_none() -> None:
    check = compare_runs(ROW, dict(ROW, tpot_p99_ms=None))
    assert next(f for f in check.figures if f.column == "tpot_p99_ms").agrees is None
    assert compare_runs({}, {}).agrees is None


BUCKETS = [(0.1, 1000.0), (0.2, 3000.0), (0.4, 3900.0), (math.inf, 4000.0)]  # cumulative, seconds
SMALL = [(le, n / 100) for le, n in BUCKETS]  # 40 observations


def test_quantile_bucket_is_where_the_rank_falls() -> None:
    assert quantile_bucket(BUCKETS, 0.5) == (0.1, 0.2)  # rank 2000 of 4000
    assert quantile_bucket(BUCKETS, 0.25) == (0.0, 0.1)  # rank 1000: the first bucket holds exactly 1000
    assert quantile_bucket(BUCKETS, 0.99) == (0.4, math.inf)  # rank 3960: only the +Inf bucket reaches it
    assert quantile_bucket([(0.1, 0.0), (math.inf, 0.0)], 0.5) is None


def test_client_agrees_inside_the_servers_bucket_widened_by_the_tolerance() -> None:
    tol = Tolerance()
    inside = histogram_check("TTFT", "time_to_first_token_seconds", 50, 150.0, BUCKETS, tol)
    assert inside is not None and inside.agrees is True
    assert (inside.bucket_low_ms, inside.bucket_high_ms) == (100.0, 200.0)
    assert inside.server_ms == pytest.approx(150.0)  # linear inside the bucket: rank 2000 is half-way from 1000 to 3000
    edge = histogram_check("TTFT", "time_to_first_token_seconds", 50, 219.0, BUCKETS, tol)
    assert edge is not None and edge.agrees is True  # 200 ms + 20 ms
    out = histogram_check("TTFT", "time_to_first_token_seconds", 50, 225.0, BUCKETS, tol)
    assert out is not None and out.agrees is False
    low = histogram_check("TTFT", "time_to_first_token_seconds", 50, 79.0, BUCKETS, tol)
    assert low is not None and low.agrees is False  # below 100 ms - 20 ms
    tail = histogram_check("TTFT", "time_to_first_token_seconds", 99, 5000.0, BUCKETS, tol)
    assert tail is not None and tail.agrees is True and math.isinf(tail.bucket_high_ms)


def test_server_checks_pair_each_exported_histogram_with_the_clients_percentiles() -> None:
    stats = {"ttft_p50_ms": 150.0, "ttft_p99_ms": 450.0, "itl_p50_ms": 5.0, "itl_p99_ms": None}
    itl = [(0.004, 0.0), (0.006, 600.0), (math.inf, 1000.0)]
    checks = server_checks(stats, {"time_to_first_token_seconds": BUCKETS, "inter_token_latency_seconds": itl})
    got = {(c.metric, c.q): c.agrees for c in checks}
    assert got == {("TTFT", 50): True, ("TTFT", 99): True, ("ITL", 50): True, ("ITL", 99): None}
    # a percentile needs 5 observations beyond it: 40 put 0.4 beyond P99
    strict = {(c.metric, c.q): c.agrees for c in server_checks(stats, {"time_to_first_token_seconds": SMALL})}
    assert strict == {("TTFT", 50): True, ("TTFT", 99): None}
