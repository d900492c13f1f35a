"""Intervals that hold on a repeat (issue 28 §3) and a smooth/cliff rule stable across seeds and warm-ups (§4).

The boundary's interval carries the noise between windows (a block bootstrap over time segments and a measured
window-to-window term) and is never zero-width; the knee's goodput interval, and so the gain over SGLang's defaults
and the ties, carry the same term; an overload whose SLA percentile jumps more than 10x between neighbouring
steps is a cliff, open loop included, and a closed loop queueing past its slots is smooth, on every seed and warm-up.
Each of these failed on d5034b3 (a bootstrap over single requests of each window; cliff by a 3x rule).
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sweep.analysis.boundary import WindowSample, crossing, estimate_boundary, sla_ratio
from sweep.analysis.ladder_steps import LadderStep, ladder_knee
from sweep.analysis.run_stats import RunStats
from sweep.analysis.significance import difference, ties
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderRunner
from sweep.ladder.wiring import ROOT, make_driver, make_launcher, model_path
from sweep.profile import SLA, load_profile
from sweep.store import Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream

SLA_ = SLA(ttft_ms=1000, tpot_ms=100, ttft_percentile=95, tpot_percentile=95)
Z95 = 1.6448536  # P95 of a standard normal


def _window(c: float, p95_ms: float, n: int, rng: np.random.Generator) -> WindowSample:
    """n requests whose TTFT is lognormal (sd 0.3 of its log) with P95 `p95_ms`, in send order."""
    ttft = tuple(float(x) for x in p95_ms * np.exp(0.3 * (rng.standard_normal(n) - Z95)))
    return WindowSample(c, ttft, (10.0,) * n, tuple(t + 500 for t in ttft), (False,) * n)


def test_no_interval_has_zero_width() -> None:
    """Windows whose every request took the same time: a bootstrap over requests has nothing to vary (d5034b3 gave
    16.5-16.5 here, and 16-16 where the failing window errs throughout)."""
    same = [WindowSample(c, (t,) * 200, (10.0,) * 200, (t + 500,) * 200, (False,) * 200)
            for c, t in [(8, 300.0), (16, 500.0), (17, 1500.0)]]
    b = estimate_boundary(same, SLA_)
    assert b is not None and b.shape == "smooth" and b.ci_high - b.ci_low > 0.1
    assert b.ci_low <= 16.5 <= b.ci_high
    errs = [*same[:2], WindowSample(17, (math.nan,) * 200, (math.nan,) * 200, (math.nan,) * 200, (True,) * 200)]
    cliff = estimate_boundary(errs, SLA_)
    assert cliff is not None and cliff.shape == "cliff" and cliff.ci_low <= 16 and cliff.ci_high >= 17


def test_the_interval_covers_the_crossing_under_window_to_window_noise() -> None:
    """20 studies of one configuration whose windows each run 6% off the curve (the ratio's P95 ~ (c / 36)^1.5,
    crossing at 36) with 2,000 requests apiece: the interval covers 36 in at least 18 (d5034b3: 10)."""
    loads = [8.0, 16.0, 32.0, 64.0, 48.0, 40.0, 36.0]  # a ladder and its three bisection windows
    covered = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        windows = [_window(c, 1000.0 * (c / 36) ** 1.5 * math.exp(rng.normal(0, 0.06)), 2000, rng) for c in loads]
        b = estimate_boundary(windows, SLA_)
        assert b is not None
        covered += b.ci_low <= 36.0 <= b.ci_high
    assert covered >= 18


def test_the_block_bootstrap_keeps_a_burst_whole() -> None:
    """Resampling contiguous time segments keeps a queue episode whole: the same requests with the slow ones in one
    stretch of the window spread its resampled SLA ratio far wider than with them scattered through it (a bootstrap
    over single requests, d5034b3's, gives both the same spread)."""
    from sweep.analysis.boundary import block_ratios  # d5034b3 had none

    rng = np.random.default_rng(7)
    w = dataclasses.replace(_window(32.0, 840.0, 1000, rng),  # ratio 0.84, and 4% of its requests 2.5 times slower
                            sent_s=tuple(float(t) for t in np.linspace(0, 20, 1000, endpoint=False)))
    slow = np.array(w.ttft_ms)
    slow[:40] *= 2.5
    spread = []
    for order in (np.arange(slow.size), rng.permutation(slow.size)):
        t = tuple(float(x) for x in slow[order])
        one = WindowSample(w.concurrency, t, w.tpot_ms, tuple(x + 500 for x in t), w.error, None, w.sent_s)
        ratios, loads = block_ratios(one, SLA_, 400, np.random.default_rng(0))
        assert np.all(loads == 32.0)  # a closed loop's load is its concurrency in every resample
        spread.append(float(np.std(np.log(ratios))))
    burst, scattered = spread
    assert burst > 2 * scattered
    even = WindowSample(30.0, w.ttft_ms, w.tpot_ms, w.e2e_ms, w.error, None, w.sent_s, rate=True)
    assert np.all(block_ratios(even, SLA_, 100, np.random.default_rng(0))[1] == 30.0)  # evenly spaced sends
    poisson = tuple(float(t) for t in np.sort(rng.uniform(0, 20, 1000)))  # an open loop's: its resample's count
    sent = WindowSample(30.0, w.ttft_ms, w.tpot_ms, w.e2e_ms, w.error, None, poisson, rate=True)
    offered = block_ratios(sent, SLA_, 400, np.random.default_rng(0))[1]
    assert 0.02 < float(offered.std() / offered.mean()) < 0.05 and abs(float(offered.mean()) - 30.0) < 0.3


def _steps(scale: float, refined: bool) -> list[LadderStep]:
    """A ladder whose goodput runs ~100 x c^0.9 with every window 7% off the curve (alternately) and an interval of
    its own of only +-1%; the top window fails."""
    loads = [8, 16, 24, 28, 30, 32] if refined else [8, 12, 16, 24, 32]
    off = [0.07, -0.07, 0.07, -0.07, 0.07, -0.07]
    out = []
    for i, (c, e) in enumerate(zip(loads, off, strict=False)):
        tps = scale * 100.0 * c ** 0.9 * math.exp(e)
        rps = tps / 100.0
        row = {"goodput_tps": tps, "goodput_rps": rps, "goodput_rps_ci_low": rps * 0.99, "goodput_rps_ci_high": rps * 1.01,
               "output_tps": tps, "throughput_rps": rps, "ttft_p99_ms": 100.0 + c, "retractions": 0,
               "passes_sla": c != loads[-1]}
        phase = "refine" if refined and c in (24, 28, 30) else "final"
        out.append(LadderStep(i + 1, c, phase, RunStats.from_row(row)))
    return out


@pytest.mark.parametrize("refined", [True, False], ids=["refined", "ladder"])
def test_the_knee_goodput_gain_and_ties_carry_the_window_noise(refined: bool) -> None:
    knee = ladder_knee(_steps(1.0, refined), 0.0)
    assert knee is not None and knee.ci_low is not None and knee.ci_high is not None
    assert (knee.ci_high - knee.ci_low) / knee.goodput_tps > 0.15  # its window's own +-1% (d5034b3: ~2-3%)
    better = ladder_knee(_steps(1.03, refined), 0.0)
    assert better is not None
    gain = difference(better, knee)
    assert gain.ci_low < 0 < gain.ci_high  # 3% more, inside the windows' 7% spread: not a measured gain
    assert ties(1, {1: better, 2: knee}) == (2,)


def _study(store: Store, tmp: Path, overrides: dict[str, Any]) -> str | None:
    """The shape of one refined final ladder of the smooth configuration (8 running slots) on the simulator."""
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {
        "server.launcher": "sim", "window.measure_seconds": 10.0, "window.drain_seconds": 5.0,
        "search.flatten_threshold": 0.0, "refine.enabled": True, **overrides})
    study_id = store.create_study(f"shape-{uuid.uuid4().hex[:8]}", prof.name, prof.model_dump_json(),
                                  prof.fingerprint(), "grid", True, "virtual", None)
    launcher = make_launcher(prof, "sim", "virtual", tmp / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    runner = LadderRunner(prof, launcher, make_driver(prof, "virtual", launcher), store, study_id, specs, "virtual")
    b = runner.run(ServerConfig(max_running_requests=8, mem_fraction_static=0.85)).boundary
    return b.shape if b is not None else None


OPEN = {"ladder": [1, 2, 3, 4], "workload.num_requests": 5000,
        "arrival": {"kind": "poisson", "rate": 1.0, "rates": [5.0, 10.0, 20.0, 40.0], "max_in_flight": 1024}}


@pytest.mark.parametrize(("ladder", "expected"), [({"ladder": [8, 16, 32, 64]}, "smooth"), (OPEN, "cliff")],
                         ids=["closed-queueing", "open-overload"])
def test_the_shape_is_the_same_on_every_seed_and_warm_up(sqlite_store: Store, tmp_path: Path,
                                                         ladder: dict[str, Any], expected: str) -> None:
    """A closed loop queueing past its 8 slots (TTFT P95 0.9 -> 2.0 of its bound from 32 to 64 users) is smooth; an
    open loop past its capacity (0.08 -> 5.8 from 20 to 40 req/s) is a cliff; on two seeds, two warm-ups each.
    d5034b3 called the closed loop a cliff on 1 of these 4 and the open loop smooth on all 4."""
    shapes = [_study(sqlite_store, tmp_path, {**ladder, "workload.seed": seed, "window.warmup_requests": warm})
              for seed in (1, 2) for warm in (4, 32)]
    assert shapes == [expected] * 4


def test_the_crossing_itself_is_unchanged() -> None:
    """The point estimate keeps issue 19's definition: linear between the bracket's windows."""
    rng = np.random.default_rng(0)
    windows = [_window(c, 1000.0 * (c / 36) ** 1.5, 400, rng) for c in (16.0, 32.0, 48.0)]
    b = estimate_boundary(windows, SLA_)
    assert b is not None
    assert b.concurrency == pytest.approx(crossing([(w.concurrency, sla_ratio(w, SLA_)) for w in windows]))
