"""Window-to-window noise (issue 28 §3): sweep.analysis.window_noise measures it from a configuration's own windows,
and the simulator's speed drift (`--sim-speed-drift`) makes some to measure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sglang_sim.drift import SpeedDrift
from sweep.analysis import window_noise as wn


def _curve(loads: list[float], f: object, sd: float, seed: int, horizontal: bool = False) -> list[wn.WindowFigure]:
    rng = np.random.default_rng(seed)
    out = []
    for c in loads:
        e = rng.normal(0, sd)
        value = f(c * math.exp(e)) if horizontal else f(c) * math.exp(e)  # type: ignore[operator]
        out.append(wn.WindowFigure(c, value, 0.005))
    return out


def test_vertical_noise_is_measured_not_assumed() -> None:
    loads = [float(c) for c in range(8, 68, 2)]  # 30 windows on a smooth curve, each off by 6% (lognormal)
    taus = [wn.vertical(_curve(loads, lambda c: 0.02 * c ** 1.3, 0.06, s)).sd for s in range(10)]
    assert 0.045 < float(np.median(taus)) < 0.075
    quiet = wn.vertical(_curve(loads, lambda c: 0.02 * c ** 1.3, 0.0, 0))
    assert quiet.sd == wn.NOISE_FLOOR and quiet.measured is not None and quiet.measured < 0.01  # floored, measured 0


def test_horizontal_noise_of_a_steep_curve_is_its_load_spread() -> None:
    """An open loop at its capacity: the ratio moves 10x per doubling of the rate; 4% of capacity per window is a
    60% spread of the ratio, and the horizontal estimate reads the 4% back."""
    loads = [float(c) for c in np.linspace(20, 40, 21)]
    etas = [wn.horizontal(_curve(loads, lambda c: (c / 30) ** 3.3, 0.04, s, horizontal=True)).sd for s in range(10)]
    assert 0.03 < float(np.median(etas)) < 0.055
    taus = [wn.vertical(_curve(loads, lambda c: (c / 30) ** 3.3, 0.04, s, horizontal=True)).sd for s in range(10)]
    assert float(np.median(taus)) > 0.1  # the same windows read vertically: the ratio's own spread


def test_a_cliff_between_neighbours_is_shape_not_noise() -> None:
    figures = [wn.WindowFigure(c, r, 0.01) for c, r in [(4, 0.05), (8, 0.052), (9, 0.053), (10, 1.2), (12, 1.26),
                                                        (16, 1.38)]]
    res = wn.residuals(figures)
    assert len(res) == 2 and all(r.d2 < 0.01 for r in res)  # 8 (4-9) and 12 (10-16); 9 and 10 straddle the jump
    assert wn.vertical(figures).sd == wn.NOISE_FLOOR


def test_repeats_count_and_the_within_window_part_is_taken_out() -> None:
    same = [wn.WindowFigure(10, 1.0, 0.05), wn.WindowFigure(10, 1.1, 0.05), wn.WindowFigure(20, 2.0, 0.05),
            wn.WindowFigure(30, 3.0, 0.05)]
    res = wn.residuals(same)
    assert any(r.share == 2.0 and r.d2 == pytest.approx(math.log(1.1) ** 2) for r in res)
    noisy_inside = [wn.WindowFigure(c, v, 0.5) for c, v in [(10, 1.0), (20, 2.3), (30, 2.9), (40, 4.2)]]
    assert wn.vertical(noisy_inside).measured == 0.0  # scatter no larger than each window's own: no extra term


def test_unmeasured_noise_and_its_draws() -> None:
    none = wn.vertical([wn.WindowFigure(10, 1.0), wn.WindowFigure(20, 2.0)])
    assert (none.sd, none.dof, none.measured) == (wn.NOISE_UNMEASURED, 0, None)
    rng = np.random.default_rng(0)
    assert np.all(none.draws(100, rng) == wn.NOISE_UNMEASURED)
    few = wn.Noise(0.05, 2.0, 0.05)
    many = wn.Noise(0.05, 50.0, 0.05)
    assert few.half95() > many.half95() > 1.9 * 0.05  # Student's t: fewer residuals, wider
    drawn = few.draws(4000, rng)
    assert np.all(drawn <= wn.NOISE_CAP) and 0.03 < float(np.median(drawn)) < 0.07


def test_widen_adds_the_window_term_and_never_gives_zero_width() -> None:
    noise = wn.Noise(0.05, 10.0, 0.05)
    lo, hi = wn.widen(1000.0, 990.0, 1010.0, noise)
    assert lo < 990 - 80 and hi > 1010 + 80  # ~ +-2.2 x 5% of 1000 beside +-10
    assert wn.widen(1000.0, None, None, noise)[0] < 1000.0 < wn.widen(1000.0, None, None, noise)[1]
    assert wn.widen(10.0, 0.0, 30.0, noise)[0] == 0.0
    k_lo, k_hi = wn.knee_interval(1000.0, 999.0, 1001.0, [wn.from_interval(c, g, g * 0.99, g * 1.01) for c, g in
                                                          [(8, 400.0), (16, 800.0), (24, 1000.0), (32, 1400.0)]])
    assert k_lo < 999.0 and k_hi > 1001.0


def test_speed_drift_is_off_by_default_seeded_and_lognormal() -> None:
    assert SpeedDrift(0.0, 60.0).factor(123.0) == 1.0
    d = SpeedDrift(0.1, 5.0, seed=3)
    assert d.factor(0.0) == d.factor(4.9) and d.factor(0.0) != d.factor(5.0)  # constant within a period
    assert SpeedDrift(0.1, 5.0, seed=3).factor(52.0) == d.factor(52.0)  # seeded: the same whatever ran before
    f = np.array([d.factor(5.0 * k) for k in range(4000)])
    assert abs(float(np.median(f)) - 1.0) < 0.01 and 0.09 < float(np.std(f) / np.mean(f)) < 0.11
    with pytest.raises(ValueError):
        SpeedDrift(0.1, 0.0)
