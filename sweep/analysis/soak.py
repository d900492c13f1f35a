"""The soak's verdict, a pure function of the window's samples (`judge`): preemption storms, queue growth and
memory growth, so the report recomputes it from the store; and the rate the soak offers (`soak_rate`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sweep.analysis.knee import ConfigKnee
from sweep.core.types import Sample
from sweep.profile import Profile, Soak

RETRACTION_COUNTERS = ("num_retracted_requests_total", "num_retracted_reqs")


TREND_FACTOR = 1.5  # a late retraction rate this much above the early one is "trending up"


@dataclass
class SoakVerdict:
    """What the soak showed: pass/fail with the reasons and the fitted trends (per minute)."""

    passed: bool
    reasons: list[str] = field(default_factory=list)
    retraction_rate_early: float | None = None
    retraction_rate_late: float | None = None
    queue_slope: float | None = None
    mem_slope: float | None = None
    minutes: float = 0.0

    def summary(self) -> str:
        """One line for the terminal and the runs table."""
        head = "pass" if self.passed else "FAIL"
        facts = (f"retractions/min {_f(self.retraction_rate_early)} -> {_f(self.retraction_rate_late)}, "
                 f"queue slope {_f(self.queue_slope)}/min, GPU memory slope {_f(self.mem_slope)} MiB/min "
                 f"over {self.minutes:.1f} min")
        return f"soak {head}: " + ("; ".join(self.reasons) + "; " if self.reasons else "") + facts


def _f(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def series(samples: Iterable[Sample], names: Sequence[str], source: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(t, value) of the first name in `names` that has samples, sorted by time; empty arrays if none."""
    rows = list(samples)
    for name in names:
        pts = sorted((s.t, s.value) for s in rows if s.name == name and (source is None or s.source == source))
        if len(pts) >= 2:
            arr = np.asarray(pts)
            return arr[:, 0], arr[:, 1]
    return np.empty(0), np.empty(0)


def slope_per_min(t: np.ndarray, v: np.ndarray) -> float | None:
    """Least-squares slope of v over t (seconds), per minute; None with fewer than 3 points or no time span."""
    if len(t) < 3 or float(t.max() - t.min()) <= 0:
        return None
    return float(np.polyfit(t, v, 1)[0]) * 60.0


def judge(samples: Iterable[Sample], soak: Soak, sla_failures: str | None = None) -> SoakVerdict:
    """Storm (retraction rate high and rising), growing queue and growing GPU memory, from a soak's samples.

    `sla_failures` is the window's `runs.sla_failures` (measure's "; "-joined misses): a soak that misses
    the profile's SLA fails, however flat its queue and memory stay.
    """
    rows = list(samples)
    verdict = SoakVerdict(passed=True)
    if sla_failures:
        verdict.reasons.append(f"SLA missed: {sla_failures}")
    t, v = series(rows, RETRACTION_COUNTERS, "metrics")
    if len(t):
        verdict.minutes = float(t.max() - t.min()) / 60.0
        mid = float(t.min() + (t.max() - t.min()) / 2)
        early, late = t <= mid, t >= mid
        verdict.retraction_rate_early = slope_per_min(t[early], v[early])
        verdict.retraction_rate_late = slope_per_min(t[late], v[late])
        lo, hi = verdict.retraction_rate_early or 0.0, verdict.retraction_rate_late or 0.0
        if hi > soak.storm_slope_per_min and hi > TREND_FACTOR * lo:
            verdict.reasons.append(f"preemption storm: retractions rising from {lo:.1f}/min to {hi:.1f}/min")
    t, v = series(rows, ("num_queue_reqs",), "metrics")
    verdict.queue_slope = slope_per_min(t, v)
    if verdict.queue_slope is not None and verdict.queue_slope > soak.queue_slope_per_min:
        verdict.reasons.append(f"queue growing {verdict.queue_slope:.2f} requests/min")
    t, v = series(rows, ("gpu_mem_used_mib",), "gpu")
    verdict.mem_slope = slope_per_min(t, v)
    if verdict.mem_slope is not None and verdict.mem_slope > soak.mem_slope_mib_per_min:
        verdict.reasons.append(f"GPU memory growing {verdict.mem_slope:.0f} MiB/min")
    verdict.passed = not verdict.reasons
    return verdict


def soak_rate(profile: Profile, knee: ConfigKnee) -> float:
    """Offered request rate: the knee step's completed requests/s (goodput when unknown) x rate_fraction."""
    base = knee.throughput_rps or knee.goodput_rps or 0.0
    if base <= 0:
        raise ValueError("the winner's knee has no request rate to soak at")
    return float(base) * profile.soak.rate_fraction
