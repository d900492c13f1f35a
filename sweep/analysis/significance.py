"""How sure the ranking is (pure): the bootstrap probability that the winner's knee goodput is higher than another
configuration's, the tie rule, and the interval of a difference (the gain over SGLang's defaults).

Each knee's goodput is redrawn from a normal fitted to its 95% interval (ConfigKnee.ci_low/ci_high: the knee
re-chosen in every bootstrap resample of its windows, sweep.analysis.knee.knee_goodput_ci, widened by the
window-to-window term measured from them, sweep.analysis.window_noise.knee_interval); a knee without an interval
counts as exact. The draws of two knees are independent (different launches, different windows). With
a fixed seed the numbers are reproducible: the same stored study gives the same report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sweep.analysis.knee import ConfigKnee

TIE_BELOW = 0.9  # P(winner > other) under this: the data do not rank the other below the winner
DRAWS = 4000
Z95 = 3.92  # width of a 95% normal interval in standard deviations


def _draws(knee: ConfigKnee, rng: np.random.Generator, n: int) -> np.ndarray:
    """n bootstrap draws of a knee's goodput (tok/s), never below 0."""
    if knee.ci_low is None or knee.ci_high is None:
        return np.full(n, knee.goodput_tps)
    sd = max(0.0, (knee.ci_high - knee.ci_low) / Z95)
    return np.maximum(0.0, knee.goodput_tps + sd * rng.standard_normal(n))


def prob_higher(a: ConfigKnee, b: ConfigKnee, n: int = DRAWS, seed: int = 0) -> float:
    """Bootstrap probability that knee a's goodput is higher than knee b's (ties in a draw count half)."""
    rng = np.random.default_rng(seed)
    da, db = _draws(a, rng, n), _draws(b, rng, n)
    return float(np.mean(da > db) + 0.5 * np.mean(da == db))


@dataclass(frozen=True)
class Difference:
    """a − b of two knees' goodput (tok/s): the point value, its 95% interval, and as a percentage of b."""

    delta_tps: float
    ci_low: float
    ci_high: float
    percent: float | None  # None when b is 0
    prob_higher: float  # P(a > b)


def difference(a: ConfigKnee, b: ConfigKnee, n: int = DRAWS, seed: int = 0) -> Difference:
    """The gain of knee a over knee b, with the 95% bootstrap interval of the difference."""
    rng = np.random.default_rng(seed)
    d = _draws(a, rng, n) - _draws(b, rng, n)
    lo, hi = (float(x) for x in np.percentile(d, [2.5, 97.5]))
    delta = a.goodput_tps - b.goodput_tps
    pct = 100.0 * delta / b.goodput_tps if b.goodput_tps > 0 else None
    return Difference(delta, lo, hi, pct, prob_higher(a, b, n, seed))


def win_probabilities(winner_id: int, pool: Mapping[int, ConfigKnee], seed: int = 0) -> dict[int, float]:
    """For every other configuration of the pool: P(the winner's knee goodput is higher than its)."""
    if winner_id not in pool:
        return {}
    w = pool[winner_id]
    return {cid: prob_higher(w, k, seed=seed) for cid, k in pool.items() if cid != winner_id}


def ties(winner_id: int | None, pool: Mapping[int, ConfigKnee], exclude: frozenset[int] = frozenset(),
         threshold: float = TIE_BELOW) -> tuple[int, ...]:
    """Configurations of the pool the data do not rank below the winner: P(winner higher) < threshold, SGLang's
    defaults included (issue 28 §2: a winner the data do not rank above the defaults ties with them); `exclude`
    leaves ids out for a caller that shows them elsewhere."""
    if winner_id is None:
        return ()
    return tuple(cid for cid, p in win_probabilities(winner_id, pool).items() if p < threshold and cid not in exclude)
