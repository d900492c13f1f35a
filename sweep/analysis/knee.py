"""Knee and Pareto selection over one configuration's windows (pure).

Spec (issue 28 §2, "the knee is where goodput peaks inside the SLA"; README.md, "The answer"):

- One rule for every ladder, refined or not, climbed on or not: the knee is the window (a ladder step or a
  refinement window) that passes the SLA, is not flagged by the client's self-check (StepPoint.flagged: the load
  generator itself was the bottleneck, so the window says nothing of the server until it is measured again), and has
  the highest goodput (output tok/s of SLA-meeting requests); equal goodput goes to the lower load.
- The ranked figure is that window's goodput: ranking, ties, tiers, the gain over SGLang's defaults and the Optuna
  objective all read it. A stricter SLA tier passes a subset of the windows, each with no more SLA-meeting
  requests, so its knee goodput is never above a looser tier's on the same configuration: by construction.
- The flattening rule (throughput gain per doubling of load, (tp_i / tp_{i-1} - 1) / log2(c_i / c_{i-1}), below
  the profile's flatten_threshold while TTFT P99 or retractions rise) no longer moves the knee: it chose a lower
  step than the goodput peak, and two rules ranked against each other made a configuration with more goodput lose.
  It is reported beside the knee (`KneeResult.flattens_at`): "past c=64 the extra load buys little".
- No eligible window: infeasible (index None).
- The SLA boundary (most load inside the SLA, sweep.analysis.boundary) is a figure of its own beside the knee.
- Load: the concurrency, or the offered rate (req/s) in an open-loop rate ladder; texts say the unit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from sweep.analysis.loads import load_text


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
    flagged: bool = False  # the client's self-check flagged the window (client_bound): not a knee until re-measured

    @property
    def load(self) -> float:
        """The step's place along its ladder: the offered rate in a rate ladder, else the concurrency."""
        return self.offered_rps if self.offered_rps is not None else float(self.concurrency)

    @property
    def eligible(self) -> bool:
        """Whether the window can be the knee: it passes the SLA and the client's self-check did not flag it."""
        return self.passes and not self.flagged

    def at(self) -> str:
        """The window's load as text: "12.50 req/s" in a rate ladder, else "c=64" (sweep.analysis.loads)."""
        return load_text(self.concurrency, self.offered_rps)


@dataclass(frozen=True)
class KneeResult:
    """The chosen step (index into the caller's list) and why; index None means infeasible."""

    index: int | None
    point: StepPoint | None
    reason: str
    flattens_at: int | None = None  # index of the window from which throughput flattened while latency rose (advice)


@dataclass(frozen=True)
class ConfigKnee:
    """One configuration's knee as reports, the soak and the winner read it: the step, its goodput interval."""

    concurrency: int
    goodput_tps: float
    goodput_rps: float
    # 95% interval of goodput_tps: the knee re-chosen in each resample (knee_goodput_ci), widened by the window-to-window
    # term of the configuration's passing windows (sweep.analysis.window_noise.knee_interval, issue 28 §3)
    ci_low: float | None
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
    """Highest goodput_tps; ties to the lower load."""
    return max(candidates, key=lambda ip: (ip[1].goodput_tps, -ip[1].load))


def find_knee(points: list[StepPoint], flatten_threshold: float) -> KneeResult:
    """The knee of one configuration's windows (see module docstring); index refers to the caller's list."""
    order = sorted(range(len(points)), key=lambda i: points[i].load)
    ladder = [(i, points[i]) for i in order]
    eligible = [ip for ip in ladder if ip[1].eligible]
    if not eligible:
        flagged = [ip for ip in ladder if ip[1].passes]
        why = ("infeasible: no window passes the SLA" if not flagged else
               f"no knee yet: {len(flagged)} passing window(s) flagged by the client's self-check, none measured "
               "again unflagged")
        return KneeResult(None, None, why)
    best_i, best = _best(eligible)
    flat = flattening_index([p for _, p in ladder], flatten_threshold)
    why = f"highest-goodput passing window {best.at()} ({best.goodput_tps:.1f} good tok/s)"
    if flat is None:
        return KneeResult(best_i, best, why)
    (_, before), (flat_i, at) = ladder[flat - 1], ladder[flat]  # flattening_index is never 0: it has a step before
    if at.load <= best.load:
        why += (f"; throughput flattens from {at.at()} (gain {gain_per_doubling(before, at):.1%}/doubling < "
                f"{flatten_threshold:.0%}) while latency rises: the last steps bought little")
    return KneeResult(best_i, best, why, flat_i)


def flagged_peak(points: list[StepPoint], tried: int = 2) -> int | None:
    """The window to measure again (issue 28 §5): the passing window with the highest goodput when the client's
    self-check flagged it and no unflagged window at its load exists yet (a flagged window cannot be the knee until its
    load is measured again and passes unflagged); None when the peak is eligible, or its load already has `tried`
    windows measured again (at most twice)."""
    passing = [(i, p) for i, p in enumerate(points) if p.passes]
    if not passing:
        return None
    i, peak = _best(passing)
    if not peak.flagged:
        return None
    same = [p for p in points if p.load == peak.load]
    if any(not p.flagged for p in same) or len(same) > tried:
        return None
    return i


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
            resampled.append(dataclasses.replace(p, goodput_rps=p.goodput_rps * scale, goodput_tps=g))
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
