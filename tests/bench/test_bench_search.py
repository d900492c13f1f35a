"""bench.search's pure parts on a toy landscape: GPU-hour billing, pruning's stop, the within-5% rule, replay."""

from __future__ import annotations

import math
from typing import Any

from bench.search import Bill, Oracle, optuna_strategy, quartiles, replay, tiered_strategy
from bench.search_oracle import RESTART_S, all_configs, bench_profile, ladder_run, truth, within
from sweep.profile import Profile, Space


def _step(c: int, goodput: float, passes: bool, secs: float = 100.0, queue: float = 0.0) -> dict[str, Any]:
    return {"concurrency": c, "goodput_rps": goodput / 100, "goodput_tps": goodput, "output_tps": goodput,
            "ttft_p99_ms": 100.0, "retractions": 0, "passes_sla": passes, "queue_len_mean": queue,
            "kv_usage_max": 0.5, "goodput_rps_ci_low": None, "goodput_rps_ci_high": None, "virtual_s": secs,
            "aborted": None}


def _entry(knee_at: int, top: float) -> dict[str, Any]:
    """A 4-step ladder (16..128) that passes up to index knee_at, then fails saturated."""
    steps = []
    for i, c in enumerate((16, 32, 64, 128)):
        ok = i <= knee_at
        steps.append(_step(c, top * (i + 1) / (knee_at + 1) if ok else 10.0, ok, queue=0.0 if ok else 5.0))
    return {"oom": False, "failure": None, "steps": steps}


def _toy_profile() -> Profile:
    p = bench_profile()
    space = Space(max_running_requests=[16, 32, 64], mem_fraction_static=[0.5], chunked_prefill_size=[2048],
                  schedule_policy=["lpm"])
    return p.model_copy(update={"search": p.search.model_copy(update={"space": space}),
                                "ladder": [16, 32, 64, 128]})


def _toy_oracle(profile: Profile) -> Oracle:
    cfgs = all_configs(profile)
    tops = {16: (0, 1000.0), 32: (1, 3000.0), 64: (2, 2900.0)}  # mrr 32 best; 64 within 5%; 16 far off
    full = {c.key(): _entry(*tops[c.max_running_requests or 0]) for c in cfgs}
    return Oracle(full, full, truth(full, 0.10), 0.10)


def test_a_ladder_bills_the_restart_and_every_step_it_runs() -> None:
    entry = _entry(1, 3000.0)
    value, secs, n = ladder_run(entry, prune=False, flatten=0.10)
    assert (value, secs, n) == (3000.0, RESTART_S + 400.0, 4)
    value, secs, n = ladder_run(entry, prune=True, flatten=0.10)  # stops after the first saturated failure
    assert (value, secs, n) == (3000.0, RESTART_S + 300.0, 3)
    assert ladder_run({"oom": True, "steps": []}, prune=True, flatten=0.10) == (None, RESTART_S, 0)


def test_pruning_never_stops_on_a_failure_without_saturation() -> None:
    entry = _entry(1, 3000.0)
    for s in entry["steps"]:
        s["queue_len_mean"] = 0.0
    assert ladder_run(entry, prune=True, flatten=0.10)[2] == 4


def test_within_five_percent_of_best() -> None:
    assert within(2900.0, 3000.0, 0.05) and within(2850.0, 3000.0, 0.05)
    assert not within(2849.0, 3000.0, 0.05)
    assert not within(0.0, 0.0, 0.05)


def test_the_bill_stops_at_the_first_near_best_full_ladder_and_reuses_repeats() -> None:
    prof = _toy_profile()
    oracle = _toy_oracle(prof)
    bill = Bill(oracle, prune=False)
    base = {"mem_fraction_static": 0.5, "chunked_prefill_size": 2048, "schedule_policy": "lpm"}
    bill.measure({"max_running_requests": 16, **base}, "final")
    assert not bill.hit and bill.seconds == RESTART_S + 400.0
    bill.measure({"max_running_requests": 16, **base}, "final")  # measured already: free
    assert bill.ladders == 1
    bill.measure({"max_running_requests": 64, **base}, "screen")  # a screen is never a hit
    assert not bill.hit
    bill.measure({"max_running_requests": 64, **base}, "final")
    assert bill.hit and bill.hit_s == bill.seconds == 3 * (RESTART_S + 400.0)


def test_replayed_strategies_find_the_toy_best() -> None:
    prof = _toy_profile()
    oracle = _toy_oracle(prof)
    for strat in (optuna_strategy(prof, "grid", 3), optuna_strategy(prof, "tpe", 3),
                  tiered_strategy(prof, random_start=True)):
        for screening in (False, True):
            bill = replay(oracle, strat, seed=1, screening=screening, prune=True, profile=prof)
            assert bill.hit, (strat, screening)
            assert 0 < (bill.hit_s or 0) <= 6 * (RESTART_S + 400.0)


def test_quartiles_keep_misses_as_misses() -> None:
    assert quartiles([1.0, 2.0, 3.0, 4.0]) == (1.0, 2.0, 3.0)
    q1, med, q3 = quartiles([1.0, math.inf, math.inf, math.inf])
    assert q1 == 1.0 and math.isinf(med) and math.isinf(q3)
