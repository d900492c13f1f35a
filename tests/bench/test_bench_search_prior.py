"""bench.search_prior's pure parts on a toy landscape: the window noise, the prior's order and margin, the bill."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.search_oracle import truth
from bench.search_prior import STARTUP_S, WINDOW_S, Bill, Landscape, grid_strategy, prior_order, prior_values


def _ladder(top: float, passes_up_to: int) -> dict[str, Any]:
    steps = []
    for i, c in enumerate((16, 32, 64)):
        ok = i <= passes_up_to
        steps.append({"concurrency": c, "goodput_rps": top / 100, "goodput_tps": top * (i + 1) if ok else 1.0,
                      "output_tps": top * (i + 1), "ttft_p99_ms": 100.0, "retractions": 0, "passes_sla": ok,
                      "queue_len_mean": 0.0 if ok else 9.0, "kv_usage_max": 0.5 if ok else 0.99,
                      "goodput_rps_ci_low": None, "goodput_rps_ci_high": None, "virtual_s": 50.0, "aborted": None})
    return {"oom": False, "failure": None, "steps": steps}


def _land(cv: float = 0.0) -> Landscape:
    table = {"a": _ladder(1000.0, 2), "b": _ladder(990.0, 2), "c": _ladder(500.0, 2), "d": {"oom": True, "steps": []}}
    return Landscape(table, truth(table, 0.10), 0.10, list(table), cv)


def test_window_noise_has_the_asked_cv_and_is_the_same_for_the_same_seed() -> None:
    land = _land(0.07)
    knees = [land.noisy_ladder("a", s)[0] or 0.0 for s in range(400)]
    assert land.noisy_ladder("a", 3) == land.noisy_ladder("a", 3)
    assert abs(np.mean(knees) / 3000.0 - 1) < 0.02 and 0.05 < np.std(knees) / np.mean(knees) < 0.09
    assert _land(0.0).noisy_ladder("a", 1) == (3000.0, 3) and land.noisy_ladder("d", 1) == (None, 0)


def test_prior_order_is_best_first_infeasible_last_and_the_margin_drops_the_far_ones() -> None:
    land = _land()
    exact = prior_values(land, "exact", 0)
    assert prior_order(exact, None) == ["a", "b", "c", "d"]
    assert prior_order(exact, 0.25) == ["a", "b"]  # c is 50% below, d infeasible
    biased = prior_values(land, "bias", 0)
    assert all(0.85 * 3000 * 0.99 <= (biased[k] or 0) <= 0.90 * 3000 for k in ("a", "b"))


def test_grid_in_the_prior_order_hits_on_its_first_ladder_and_bills_start_up_and_windows() -> None:
    land = _land()
    bill = Bill(land, 0)
    grid_strategy(land, "exact")(bill)
    assert bill.hit_s == STARTUP_S + 3 * WINDOW_S and bill.hit_ladders == 1 and bill.final_near()
    assert math.isclose(bill.seconds, 3 * (STARTUP_S + 3 * WINDOW_S))  # the OOM configuration costs nothing here
