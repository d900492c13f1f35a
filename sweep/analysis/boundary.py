"""The SLA boundary of one configuration: where its SLA percentile crosses its bound, with a 95% interval (pure).

Spec (issue 19 §1, "find the boundary, not the ladder step"):

- SLA ratio of a window: the largest of its SLA percentiles over their bounds (TTFT P<ttft_percentile> / ttft_ms,
  TPOT P<tpot_percentile> / tpot_ms, E2E P<e2e_percentile> / e2e_ms when bounded) and of its error rate over
  max_error_rate (an error with max_error_rate 0, or a window with no completed request: infinite). A window
  whose ratio is <= 1 meets the SLA's percentile and error bounds.
- Load of a window: its concurrency, or in an open-loop rate ladder (arrival.rates) its offered rate in req/s; the
  boundary is in the same unit.
- Bracket of a ladder (windows in load order): the highest window with ratio <= 1 that has a window with
  ratio > 1 above it (lo), and the lowest window above lo with ratio > 1 (hi). None when nothing passes (the
  boundary is below the ladder) or nothing above the highest pass fails (above it: "not bracketed").
- Crossing: the load where the ratio, linear between lo and hi, reaches 1:
  c_lo + (1 - r_lo) / (r_hi - r_lo) * (c_hi - c_lo) (c_lo when r_hi is infinite).
- 95% interval: every window's measured requests are resampled with replacement (n times, a fixed seed), the
  ratios recomputed per window and the crossing re-found (bracket included) in each resample; the 2.5th and
  97.5th percentiles of the crossings. A resample with no bracket counts as the ladder's end it ran off (its
  lowest concurrency when nothing passes, its highest when nothing fails).
- Shape: "cliff" when one step of the bracket multiplies the SLA percentile by more than CLIFF_FACTOR (3): the
  failing window's ratio is more than 3 times the passing window's (the percentile went from well inside its
  bound to past it), or more than 3 (past the bound threefold); or when the failing window's goodput is under
  1/CLIFF_FACTOR of the passing window's; else "smooth" (goodput and the SLA percentile change gradually).
  The jump, not only the overshoot, marks a cliff: a KV-bound closed loop on the simulator (long outputs, the KV
  cache full at 10 users) reads TTFT P95 31 ms at c=9 and 1,134 ms at c=10 against a 1,000 ms bound (ratio
  0.03 -> 1.13): a refined bracket one user wide lands its failing window just past the bound however steep the
  step, so the overshoot alone (1.13) would call it smooth.

The windows' requests are the measured ones (not warm-up, sent inside the window), as measure counts them; a cut one
(still running when the drain ended) is left out, as measure leaves it out of the latencies and the error rate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.tiers import StoredRequest
from sweep.profile import SLA

CLIFF_FACTOR = 3.0
BOOTSTRAP_N = 400


@dataclass(frozen=True)
class WindowSample:
    """One window's measured requests, as the boundary needs them: latencies in ms (nan where the request has
    none: an error, a TPOT below 2 output tokens) and whether each failed. `concurrency` is the window's load: its
    concurrency, or its offered rate (req/s) in an open-loop rate ladder."""

    concurrency: float
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    error: tuple[bool, ...]
    goodput_tps: float | None = None


@dataclass(frozen=True)
class Boundary:
    """Where a configuration's SLA percentile crosses its bound (a load: concurrency, or req/s in an open-loop rate
    ladder), its 95% bootstrap interval, the bracket it lies in, and the shape of the crossing (smooth | cliff)."""

    concurrency: float
    ci_low: float
    ci_high: float
    passing: float  # the bracket's passing load
    failing: float  # the bracket's failing load
    shape: str  # smooth | cliff
    ratio_passing: float  # the SLA ratio (percentile / bound, worst bound) of the two bracket windows
    ratio_failing: float


def window_sample(concurrency: float, requests: Sequence[StoredRequest], window_s: float | None,
                  goodput_tps: float | None = None) -> WindowSample:
    """A window's stored requests (times relative to the window start) as a sample: its measured requests
    (not warm-up, scheduled inside [0, window_s))."""
    rows = [r for r in requests if not r.warmup and not r.cut and window_s is not None and 0 <= r.scheduled_at < window_s]

    def col(values: list[float | None]) -> tuple[float, ...]:
        return tuple(math.nan if r.error or v is None else v for r, v in zip(rows, values, strict=True))

    return WindowSample(concurrency, col([r.ttft_ms for r in rows]), col([r.tpot_ms for r in rows]),
                        col([r.e2e_ms for r in rows]), tuple(r.error for r in rows), goodput_tps)


def _bounds(sla: SLA) -> list[tuple[str, float, float]]:
    out = [("ttft_ms", sla.ttft_percentile, sla.ttft_ms), ("tpot_ms", sla.tpot_percentile, sla.tpot_ms)]
    if sla.e2e_ms is not None:
        out.append(("e2e_ms", sla.e2e_percentile, sla.e2e_ms))
    return out


def _ratio(cols: Mapping[str, np.ndarray], error: np.ndarray, sla: SLA) -> float:
    """The SLA ratio of one window's (resampled) requests."""
    n = error.size
    if n == 0 or bool(error.all()):
        return math.inf
    worst = 0.0
    for name, q, bound in _bounds(sla):
        v = cols[name][~np.isnan(cols[name])]
        if v.size:
            worst = max(worst, float(np.percentile(v, q)) / bound)
    rate = float(error.sum()) / n
    if rate > 0:
        worst = max(worst, rate / sla.max_error_rate if sla.max_error_rate > 0 else math.inf)
    return worst


def sla_ratio(w: WindowSample, sla: SLA) -> float:
    """The window's SLA ratio (module docstring): <= 1 meets the percentile and error bounds."""
    return _ratio({k: np.asarray(getattr(w, k), float) for k in ("ttft_ms", "tpot_ms", "e2e_ms")},
                  np.asarray(w.error, bool), sla)


def bracket(points: Sequence[tuple[float, float]]) -> tuple[int, int] | None:
    """(lo, hi) positions in `points` ((load, ratio), ascending load) of the bracket; None without."""
    passing = [i for i, (_, r) in enumerate(points) if r <= 1.0]
    for lo in reversed(passing):
        above = [i for i in range(lo + 1, len(points)) if points[i][1] > 1.0]
        if above:
            return lo, above[0]
    return None


def crossing(points: Sequence[tuple[float, float]]) -> float | None:
    """The load where the ratio crosses 1 inside the bracket; None without a bracket."""
    b = bracket(points)
    if b is None:
        return None
    (c_lo, r_lo), (c_hi, r_hi) = points[b[0]], points[b[1]]
    if math.isinf(r_hi):
        return float(c_lo)
    return c_lo + (1.0 - r_lo) / (r_hi - r_lo) * (c_hi - c_lo)


def _ran_off(points: Sequence[tuple[float, float]]) -> float:
    """A resample without a bracket: the ladder's end the crossing lies beyond."""
    return float(points[0][0]) if all(r > 1.0 for _, r in points) else float(points[-1][0])


def estimate_boundary(windows: Sequence[WindowSample], sla: SLA, n: int = BOOTSTRAP_N,
                      seed: int = 0) -> Boundary | None:
    """The boundary of one configuration's windows (any order; see module docstring); None when not bracketed."""
    ws = sorted(windows, key=lambda w: w.concurrency)
    points = [(w.concurrency, sla_ratio(w, sla)) for w in ws]
    b = bracket(points)
    point = crossing(points)
    if b is None or point is None:
        return None
    rng = np.random.default_rng(seed)
    arrays = [({k: np.asarray(getattr(w, k), float) for k in ("ttft_ms", "tpot_ms", "e2e_ms")},
               np.asarray(w.error, bool)) for w in ws]
    draws = []
    for _ in range(n):
        resampled = []
        for w, (cols, err) in zip(ws, arrays, strict=True):
            idx = rng.integers(0, err.size, err.size) if err.size else np.arange(0)
            resampled.append((w.concurrency, _ratio({k: v[idx] for k, v in cols.items()}, err[idx], sla)))
        c = crossing(resampled)
        draws.append(c if c is not None else _ran_off(resampled))
    lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    lo_w, hi_w = ws[b[0]], ws[b[1]]
    r_lo, r_hi = points[b[0]][1], points[b[1]][1]
    return Boundary(point, min(lo, point), max(hi, point), lo_w.concurrency, hi_w.concurrency,
                    shape(r_hi, lo_w.goodput_tps, hi_w.goodput_tps, r_lo), r_lo, r_hi)


def shape(ratio_failing: float, goodput_passing: float | None, goodput_failing: float | None,
          ratio_passing: float | None = None) -> str:
    """cliff | smooth of a bracket (module docstring)."""
    if ratio_failing > CLIFF_FACTOR:
        return "cliff"
    if ratio_passing is not None and ratio_failing > CLIFF_FACTOR * ratio_passing:
        return "cliff"
    if goodput_passing and goodput_failing is not None and goodput_failing * CLIFF_FACTOR < goodput_passing:
        return "cliff"
    return "smooth"


def steps_boundary(steps: Sequence[LadderStep], requests: Mapping[int, Sequence[StoredRequest]],
                   sla: SLA) -> Boundary | None:
    """The SLA boundary of one configuration's stored steps (run id -> its stored requests in `requests`) judged
    by `sla`: None unless the ladder was refined (a step of phase 'refine') and is bracketed for `sla`."""
    if not any(s.phase == "refine" for s in steps):
        return None
    windows = [window_sample(s.load, requests.get(s.run_id, ()), s.stats.window_s, s.stats.goodput_tps)
               for s in steps]
    return estimate_boundary(windows, sla)


def with_boundary(knee: ConfigKnee, b: Boundary | None) -> ConfigKnee:
    """`knee` carrying boundary `b` (unchanged when None)."""
    if b is None:
        return knee
    return dataclasses.replace(knee, boundary=b.concurrency, boundary_ci_low=b.ci_low, boundary_ci_high=b.ci_high,
                               boundary_shape=b.shape)
