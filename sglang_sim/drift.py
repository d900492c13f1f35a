"""Speed drift (`--sim-speed-drift CV`, off by default): window-to-window noise for the simulator.

A real server does not run the same window twice at the same speed: clocks, temperature, the host, a neighbour on
the node. On one H200 two launches of one configuration crossed their SLA bound 0.5% apart and a dense scan on
another day 7% lower (issue 28 §3). The simulator is otherwise deterministic for a given workload seed, so a
boundary's interval could only ever hold the noise of one window's requests. With drift on, every step time (prefill
and decode forwards, not the host stage) is multiplied by a factor that is constant for `period_s` simulated
seconds and then redrawn: lognormal, median 1, coefficient of variation `cv`, one draw per period, seeded by the
engine's seed (`--random-seed`) and the period's index alone (so the factor at a time does not depend on what ran
before it). Windows longer than the period see the mean of several factors; a window inside one period runs
entirely fast or slow. A decode run of several forwards takes the factor of the time it starts.

It models between-window variation of speed only: not of memory (the KV pool, hence where a KV-bound cliff lies,
is unmoved), not of the workload, not within a forward.
"""

from __future__ import annotations

import math
import random

__all__ = ["SpeedDrift"]


class SpeedDrift:
    """The drift factor at a simulated time (1.0 when cv is 0)."""

    def __init__(self, cv: float, period_s: float, seed: int = 0):
        if cv < 0 or period_s <= 0:
            raise ValueError(f"speed drift needs cv >= 0 and period_s > 0 (got {cv}, {period_s})")
        self.cv, self.period_s, self.seed = cv, period_s, seed
        self.sigma = math.sqrt(math.log1p(cv * cv))
        self._cache: dict[int, float] = {}

    def factor(self, t: float) -> float:
        """The step-time multiplier in force at simulated time t."""
        if self.cv == 0:
            return 1.0
        k = int(t // self.period_s)
        f = self._cache.get(k)
        if f is None:
            f = self._cache[k] = math.exp(self.sigma * random.Random(f"speed-drift:{self.seed}:{k}").gauss(0, 1))
        return f
