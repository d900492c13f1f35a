"""bench.night's probe screen (issue 29): the prior's predicted knee step under its latency error, one probe window
per survivor (a failing one counts 0, a shorter one is noisier), and the cut taken by the probes, not the prior."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.night import shipped
from bench.night_ladder import (
    FULL_S,
    STARTUP_S,
    knee_concurrency,
    latency_error,
    predicted_knee,
    probe_window,
    window_s,
)
from bench.night_ties import SameWinner, probe_cut
from bench.search_oracle import truth
from bench.search_prior import Landscape, prior_values


def _ladder(goodputs: tuple[float, ...], ratios: tuple[float, ...]) -> dict[str, Any]:
    """A ladder at 16, 32, 64, ... whose steps have these noiseless goodputs and SLA ratios (P95 over its bound)."""
    steps = []
    for i, (g, r) in enumerate(zip(goodputs, ratios, strict=True)):
        ok = r <= 1.0
        steps.append({"concurrency": 16 * 2 ** i, "goodput_rps": g / 100, "goodput_tps": g, "output_tps": g,
                      "ttft_p95_ms": r * 1000.0, "tpot_p95_ms": r * 60.0, "ttft_p99_ms": r * 1000.0,
                      "retractions": 0, "passes_sla": ok, "queue_len_mean": 0.0 if ok else 9.0,
                      "kv_usage_max": 0.5 if ok else 0.99, "goodput_rps_ci_low": None, "goodput_rps_ci_high": None,
                      "virtual_s": 50.0, "aborted": None})
    return {"oom": False, "failure": None, "steps": steps}


def _land(cv: float = 0.0) -> Landscape:
    """a: the best (knee 3000 at 64, P95 at 0.95 of its bound; the step above fails at 1.5 but would draw 3300);
    b: 10% below it (knee 2700 at 64, P95 at 0.6 of its bound): both survive the 15% margin, the cut keeps one."""
    table = {"a": _ladder((1000.0, 2000.0, 3000.0, 3300.0), (0.3, 0.6, 0.95, 1.5)),
             "b": _ladder((900.0, 1800.0, 2700.0, 2800.0), (0.3, 0.5, 0.6, 1.5))}
    return Landscape(table, truth(table, 0.10), 0.10, list(table), cv)


def test_the_prior_knee_step_moves_with_its_latency_error_and_is_exact_without() -> None:
    land = _land()
    assert predicted_knee(land, "a", 1.0) == knee_concurrency(land, "a") == 64
    assert predicted_knee(land, "a", 1.1) == 32  # latencies over-predicted: 0.95 x 1.1 fails, one step low
    assert predicted_knee(land, "a", 0.6) == 128  # under-predicted: the failing step above looks like the knee
    assert predicted_knee(land, "b", 1.15) == 64  # far from its bound: the same step
    assert predicted_knee(land, "a", 5.0) is None  # every step fails in the prior's eyes
    e = latency_error(land, "bias", 3)  # the same u as prior_values' 10-15% low knee
    assert all(math.isclose(e[k], land.truth[k] / (prior_values(land, "bias", 3)[k] or 0.0)) for k in "ab")
    assert latency_error(land, "exact", 3) == {"a": 1.0, "b": 1.0}


def test_a_probe_is_true_pass_fail_a_failing_or_unreached_one_counts_0_and_a_shorter_one_is_noisier() -> None:
    land = _land()
    assert probe_window(land, "a", 0, 64, 1.0) == (3000.0, STARTUP_S + window_s(FULL_S, 0.95, True))
    assert probe_window(land, "a", 0, 32, 0.5) == (2000.0, STARTUP_S + window_s(FULL_S / 2, 0.6, True))
    assert probe_window(land, "a", 0, 128, 1.0) == (0.0, STARTUP_S + window_s(FULL_S, 1.5, True))  # fails, stops early
    assert probe_window(land, "a", 0, 256, 1.0) == (0.0, STARTUP_S + window_s(FULL_S, 10.0, True))  # never reached
    noisy = _land(0.05)
    full = [probe_window(noisy, "a", s, 64, 1.0)[0] / 3000.0 for s in range(400)]
    half = [probe_window(noisy, "a", s, 64, 0.5)[0] / 3000.0 for s in range(400)]
    assert 0.04 < float(np.std(full)) < 0.06 and 0.06 < float(np.std(half)) < 0.085  # CV 5% and 5% / sqrt(0.5)


def test_the_probe_cut_follows_the_probe_goodput_not_the_prior() -> None:
    """The prior ranks a first (3000 vs 2700, 10-15% low each); its latencies 11-18% high put a's knee at 32 (0.95 x e
    fails), so a's probe measures 2000 and b's 2700: the probe screen sends b to the finals (a miss: b is 10% below),
    where the quarter-window screen (its ladders at the true knees) sends a. Taken by the prior's order, the cut
    would be a."""
    land = _land()
    values = prior_values(land, "bias", 0)
    assert (values["a"] or 0.0) > (values["b"] or 0.0)
    assert probe_cut(["a", "b"], {"a": 2000.0, "b": 2700.0}, 1) == ["b"]
    assert probe_cut(["a", "b"], {"a": 0.0, "b": 10.0}, 1) == ["b"]  # a failing probe counts 0
    assert probe_cut(["a", "b"], {"a": 0.0, "b": 0.0}, 1) == ["a"]  # every probe failing: the prior's order
    quarter = shipped(land, list(land.table), 0, "bias", SameWinner(tiebreak=True))
    probed = shipped(land, list(land.table), 0, "bias", SameWinner(probe=1.0, tiebreak=True))
    assert (quarter.screened, quarter.finals, quarter.hit) == (2, 1, True)
    assert (probed.screened, probed.finals, probed.hit) == (2, 1, False)
    exact = shipped(land, list(land.table), 0, "exact", SameWinner(probe=1.0, tiebreak=True))
    assert exact.hit  # the exact prior probes a at its true knee: 3000
