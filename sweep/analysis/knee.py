"""Knee and Pareto selection over one configuration's ladder (pure).

Knee (README.md, "Definitions"): the passing step with the highest goodput (output tok/s; ties go to the lower
concurrency). If throughput gains flatten -- relative gain per doubling of concurrency, i.e.
(tp_i / tp_{i-1} - 1) / log2(c_i / c_{i-1}), below the profile's flatten_threshold -- while TTFT P99
or retractions rise, the steps from the flattening on are in the negative-return zone: the knee is
the best passing step before the first flattening (normally the step just before it). The rule only
applies when the step just before the flattening passes; otherwise the plain best passing step wins.
No passing step: infeasible (index None).

A refined ladder (profile section refine: bisection windows between its last passing and first failing step)
has found its boundary instead: its knee is the highest passing step with a failing step above it (the
bracket's passing side; `bracket_knee`), the plain rule when no such step exists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class StepPoint:
    """What the knee needs from one ladder step."""

    concurrency: int
    goodput_rps: float
    goodput_tps: float
    throughput_tps: float
    ttft_p99_ms: float | None
    retractions: int
    passes: bool
    goodput_ci_low: float | None = None  # 95% interval of goodput_tps from measure's bootstrap, when known
    goodput_ci_high: float | None = None
    offered_rps: float | None = None  # an open-loop rate ladder's offered rate (req/s): the step's load

    @property
    def load(self) -> float:
        """The step's place along its ladder: the offered rate in a rate ladder, else the concurrency."""
        return self.offered_rps if self.offered_rps is not None else float(self.concurrency)


@dataclass(frozen=True)
class KneeResult:
    """The chosen step (index into the caller's list) and why; index None means infeasible."""

    index: int | None
    point: StepPoint | None
    reason: str


@dataclass(frozen=True)
class ConfigKnee:
    """One configuration's knee as reports, the soak and the winner read it: the step, its goodput interval."""

    concurrency: int
    goodput_tps: float
    goodput_rps: float
    ci_low: float | None  # 95% interval of goodput_tps, the knee re-chosen in each resample (knee_goodput_ci)
    ci_high: float | None
    phase: str  # the ladder's phase: screen or final
    reason: str  # why find_knee chose this step
    throughput_rps: float | None = None  # the knee step's completed requests/s (the soak's rate)
    # The refined ladder's SLA boundary (sweep.analysis.boundary; server_configs.boundary_*): the concurrency
    # (req/s for an open-loop rate ladder: boundary_unit) where the SLA percentile crosses its bound, its 95%
    # interval, smooth | cliff; None when not refined.
    boundary: float | None = None
    boundary_ci_low: float | None = None
    boundary_ci_high: float | None = None
    boundary_shape: str | None = None
    boundary_unit: str = "concurrency"  # what the boundary counts: concurrency, or req/s for an open-loop rate ladder
    offered_rps: float | None = None  # the knee window's offered rate (req/s) in an open-loop rate ladder: its load


def gain_per_doubling(prev: StepPoint, cur: StepPoint) -> float | None:
    """Relative throughput gain from prev to cur, normalised per doubling of concurrency."""
    if prev.throughput_tps <= 0 or cur.concurrency <= prev.concurrency:
        return None
    return (cur.throughput_tps / prev.throughput_tps - 1.0) / math.log2(cur.concurrency / prev.concurrency)


def latency_rises(prev: StepPoint, cur: StepPoint) -> bool:
    """TTFT P99 or retractions went up from prev to cur."""
    ttft_up = (
        prev.ttft_p99_ms is not None and cur.ttft_p99_ms is not None and cur.ttft_p99_ms > prev.ttft_p99_ms
    )
    return ttft_up or cur.retractions > prev.retractions


def flattening_index(points: list[StepPoint], flatten_threshold: float) -> int | None:
    """Position (in concurrency order) of the first step whose gain flattens while latency rises."""
    for i in range(1, len(points)):
        gain = gain_per_doubling(points[i - 1], points[i])
        if gain is not None and gain < flatten_threshold and latency_rises(points[i - 1], points[i]):
            return i
    return None


def _best(candidates: list[tuple[int, StepPoint]]) -> tuple[int, StepPoint]:
    """Highest goodput_tps; ties to the lower concurrency."""
    return max(candidates, key=lambda ip: (ip[1].goodput_tps, -ip[1].concurrency))


def find_knee(points: list[StepPoint], flatten_threshold: float) -> KneeResult:
    """The knee of one ladder (see module docstring); index refers to the caller's list."""
    order = sorted(range(len(points)), key=lambda i: points[i].concurrency)
    ladder = [(i, points[i]) for i in order]
    passing = [ip for ip in ladder if ip[1].passes]
    if not passing:
        return KneeResult(None, None, "infeasible: no step passes the SLA")
    best_i, best = _best(passing)
    flat = flattening_index([p for _, p in ladder], flatten_threshold)
    if flat is not None:
        before_i, before = ladder[flat - 1]
        at = ladder[flat][1]
        if before.passes:
            pre = [ip for ip in ladder[:flat] if ip[1].passes]
            knee_i, knee = _best(pre)
            gain = gain_per_doubling(before, at)
            why = (
                f"throughput flattens at c={at.concurrency} (gain {gain:.1%}/doubling < "
                f"{flatten_threshold:.0%}) while TTFT P99/retractions rise; "
                f"knee c={knee.concurrency} ({knee.goodput_tps:.1f} good tok/s)"
            )
            return KneeResult(knee_i, knee, why)
    return KneeResult(
        best_i, best, f"highest-goodput passing step c={best.concurrency} ({best.goodput_tps:.1f} good tok/s)"
    )


def bracket_knee(points: list[StepPoint], flatten_threshold: float) -> KneeResult:
    """A refined ladder's knee: the highest passing step with a failing step above it (module docstring)."""
    order = sorted(range(len(points)), key=lambda i: points[i].load)  # a rate ladder's refined knee: by rate
    for pos in reversed(range(len(order))):
        i = order[pos]
        if not points[i].passes:
            continue
        above = [points[j] for j in order[pos + 1:] if not points[j].passes]
        if above:
            p = points[i]
            if p.offered_rps is not None and above[0].offered_rps is not None:
                return KneeResult(i, p, f"refined: highest passing rate {p.offered_rps:.2f} req/s below the first "
                                        f"failing {above[0].offered_rps:.2f} req/s ({p.goodput_tps:.1f} good tok/s)")
            return KneeResult(i, p, f"refined: highest passing concurrency c={p.concurrency} below the first "
                                    f"failing c={above[0].concurrency} ({p.goodput_tps:.1f} good tok/s)")
        break
    return find_knee(points, flatten_threshold)


def knee_goodput_ci(points: list[StepPoint], flatten_threshold: float, n: int = 400,
                    seed: int = 0) -> tuple[float | None, float | None]:
    """95% bootstrap interval of the knee's goodput, the knee re-chosen in every resample.

    Each step's goodput is redrawn from a normal fitted to its measured interval (measure's bootstrap over
    requests), so the interval covers both the noise of the winning step and the chance that a neighbour
    would have been picked instead. Steps without an interval count as exact. (None, None) when infeasible, and
    when no step has an interval (nothing is known about the spread: the point is not a zero-width interval).
    """
    base = find_knee(points, flatten_threshold)
    if base.point is None:
        return None, None
    import numpy as np

    if all(p.goodput_ci_low is None or p.goodput_ci_high is None for p in points):
        return None, None
    rng = np.random.default_rng(seed)
    sd = [max(0.0, ((p.goodput_ci_high or 0) - (p.goodput_ci_low or 0)) / 3.92)
          if p.goodput_ci_low is not None and p.goodput_ci_high is not None else 0.0 for p in points]
    draws: list[float] = []
    for _ in range(n):
        noise = rng.standard_normal(len(points))
        resampled = []
        for p, s, z in zip(points, sd, noise, strict=True):
            g = max(0.0, p.goodput_tps + s * z)
            scale = g / p.goodput_tps if p.goodput_tps > 0 else 1.0
            resampled.append(StepPoint(p.concurrency, p.goodput_rps * scale, g, p.throughput_tps, p.ttft_p99_ms,
                                       p.retractions, p.passes))
        k = find_knee(resampled, flatten_threshold)
        if k.point is not None:
            draws.append(k.point.goodput_tps)
    if not draws:
        return None, None
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of (goodput, ttft_p99) points no other point beats on both (more goodput, less TTFT)."""
    front = []
    for i, (g, t) in enumerate(points):
        dominated = any(
            g2 >= g and t2 <= t and (g2 > g or t2 < t) for j, (g2, t2) in enumerate(points) if j != i
        )
        if not dominated:
            front.append(i)
    return front
