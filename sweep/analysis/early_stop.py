"""Windows that stop when their verdict is decided (issue 29): an anytime-valid test of a running window (pure).

Spec. For every SLA percentile bound of a tier (TTFT P95 <= X: at most q = 5% of the window's requests over X) the
null hypothesis is H0 "the share of measured requests over the bound is <= q"; for the error rate, H0 "the share of
failed requests is <= max_error_rate". Each measured request (sent inside the window, not warm-up, not cut) is a
Bernoulli observation per bound once its outcome is *determined*:

- it ended: TTFT / TPOT / E2E over the bound (successful requests only, as sweep.analysis.measure counts them), or
  for the error test: it failed;
- it is still running but can only end over the bound: no first token yet and older than the TTFT bound; older than
  the E2E bound; its decode already slower than the TPOT bound for its max_new_tokens
  ((now - first token) / (max_new_tokens - 1) > bound: TPOT can only grow, output never exceeds max_new_tokens).

Two conditions decide a bound, both needed:

1. The count: the overs already determined are more than q of the requests the whole window will hold, projected
   from those sent so far (sent / elapsed x measure_seconds, x PROJECTION_SLACK): even if every remaining request
   came in under the bound, the window's share over it would stay above q. This holds whatever the dependence
   between requests and however the window's first minutes differ from the rest (a cold cache, users starting in
   phase): only the projection of the window's request count is assumed.
2. The evidence: the test statistic, a mixture likelihood ratio (an e-process): with k of n determined requests over,
E = mean_j prod (p_j/q)^x ((1-p_j)/(1-q))^(1-x) over a fixed grid of alternatives p_j > q (ALTERNATIVES). Under H0
(share <= q, requests independent given the past) E is a nonnegative supermartingale with E_0 <= 1, so by Ville's
inequality P(sup_n E_n >= 1/a) <= a: the bound is rejected when E >= 1/a. The rule looks at
the running window as often as it likes (anytime-valid). A tier's bounds share its alpha (Bonferroni: each at
alpha / m for m tested bounds); with several SLA tiers the window stops only when every tier is decided failing.

Requests still running that are not yet determined are left out. Every request sent before now - bound is
determined, so what is observed is a send-order prefix of the window plus quicker requests (which can only be under
the bound): leaving them out, or adding those unders, only lowers E. Nothing stops before `min_requests` determined
measured requests and `min_seconds` of measured window. max_error_rate 0: one failed request decides (E = inf).

The e-process's guarantee assumes independent requests with a steady share over the bound; under load neither holds
(a queue burst delays many neighbours at once; a window's first minutes run slower than the rest), and the e-process
alone stopped 17-19 of 20 windows whose load sat exactly at their bound on the simulator, 8-9 of them windows that
passed on their own: the count (1.) is what keeps a window that passes from stopping (none of 240 did).
docs/early-stop.md measures both.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.analysis.measure import e2e_ms, tpot_ms, ttft_ms
from sweep.core.types import CUT, RequestRecord
from sweep.profile import SLA, Profile, Window

__all__ = ["ALTERNATIVES", "EarlyStop", "Verdict", "e_value", "over_bound", "window_test"]

# p_j = q + (1 - q) * f: the alternatives the mixture spreads its weight over, from barely over to far over the bound
ALTERNATIVES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)
# The window's projected request count is taken this much higher: a window's throughput can rise after a slow start
PROJECTION_SLACK = 1.2


def e_value(over: int, n: int, q: float) -> float:
    """The mixture e-value of `over` of `n` determined requests against H0 "share over <= q" (module docstring)."""
    if n <= 0 or q >= 1.0:
        return 1.0
    if q <= 0.0:
        return math.inf if over > 0 else 1.0
    p = q + (1.0 - q) * np.asarray(ALTERNATIVES)
    logs = over * np.log(p / q) + (n - over) * np.log((1.0 - p) / (1.0 - q))
    top = float(logs.max())
    return math.exp(min(700.0, top + math.log(float(np.exp(logs - top).mean()))))


def over_bound(rec: RequestRecord, name: str, bound_ms: float, now: float | None) -> bool | None:
    """Whether `rec` is over `bound_ms` for `name` (TTFT | TPOT | E2E | errors): None while undetermined or not
    counted (a failed request in a latency test). now None: the request ended; else it is running at now."""
    if name == "errors":
        return None if now is not None else rec.error is not None
    if now is None:
        if rec.error is not None or rec.finished_at is None:
            return None
        v = ttft_ms(rec) if name == "TTFT" else e2e_ms(rec) if name == "E2E" else tpot_ms(rec)
        return None if v is None else v > bound_ms
    age = (now - rec.scheduled_at) * 1000.0  # latencies count from the send (open loop: the scheduled time)
    if name == "TTFT":
        return True if rec.first_token_at is None and age > bound_ms else None
    if name == "E2E":
        return True if age > bound_ms else None
    if rec.first_token_at is None or rec.sent_output_tokens < 2:
        return None
    least = (now - rec.first_token_at) * 1000.0 / (rec.sent_output_tokens - 1)
    return True if least > bound_ms else None


@dataclass(frozen=True)
class _Bound:
    tier: int
    name: str  # TTFT | TPOT | E2E | errors
    label: str  # "TTFT P95", "error rate"
    bound_ms: float  # the latency bound (unused for errors)
    q: float  # the share over the bound H0 allows


def _bounds(tier: int, sla: SLA) -> list[_Bound]:
    out = [_Bound(tier, "TTFT", f"TTFT P{sla.ttft_percentile:g}", sla.ttft_ms, 1 - sla.ttft_percentile / 100),
           _Bound(tier, "TPOT", f"TPOT P{sla.tpot_percentile:g}", sla.tpot_ms, 1 - sla.tpot_percentile / 100)]
    if sla.e2e_ms is not None:
        out.append(_Bound(tier, "E2E", f"E2E P{sla.e2e_percentile:g}", sla.e2e_ms, 1 - sla.e2e_percentile / 100))
    out.append(_Bound(tier, "errors", "error rate", 0.0, sla.max_error_rate))
    return out


@dataclass(frozen=True)
class Verdict:
    """A decided window: the bound that cannot pass, its e-value and the threshold it reached."""

    label: str
    e: float
    threshold: float
    over: int
    n: int
    total: float  # the requests the whole window was projected to hold

    def text(self) -> str:
        e = "inf" if math.isinf(self.e) else f"{self.e:.0f}" if self.e < 1e6 else f"{self.e:.1e}"
        return (f"{self.label} cannot pass: {self.over} requests over already, of ~{self.total:.0f} the window would "
                f"hold (e-value {e} >= {self.threshold:g}, {self.n} determined)")


class EarlyStop:
    """The running test of one window: `ended` takes each request that ended (any thread), `check` says whether the
    window is decided failing at `now` (given the requests still running)."""

    def __init__(self, slas: Sequence[SLA], alpha: float, min_requests: int, min_seconds: float, measure_s: float):
        """measure_s: the window's length (the count's projection); 0 turns the count off (the e-process alone, as
        bench/early_stop.py compares)."""
        self.bounds = [b for i, sla in enumerate(slas) for b in _bounds(i, sla)]
        self.tiers = len(slas)
        per_tier = [sum(1 for b in self.bounds if b.tier == t) for t in range(self.tiers)]
        self.threshold = [per_tier[b.tier] / alpha for b in self.bounds]  # 1 / (alpha / m) per bound
        self.min_requests, self.min_seconds, self.measure_s = min_requests, min_seconds, measure_s
        self._over = [0] * len(self.bounds)
        self._n = [0] * len(self.bounds)
        self._measured = 0  # ended measured requests (the min_requests gate)
        self._lock = threading.Lock()

    def ended(self, rec: RequestRecord) -> None:
        """A request ended: counted when it was measured (not warm-up) and not cut by the window's edge."""
        if rec.warmup or rec.error_kind == CUT:
            return
        with self._lock:
            self._measured += 1
            for i, b in enumerate(self.bounds):
                v = over_bound(rec, b.name, b.bound_ms, None)
                if v is not None:
                    self._n[i] += 1
                    self._over[i] += v

    def check(self, now: float, window_start: float, running: Iterable[RequestRecord] = ()) -> Verdict | None:
        """The decided bound of the first tier when every tier has one at `now`, else None.

        The ended counts are read first and `running` is iterated after them, so a lazy `running` (the HTTP driver's
        in-flight slots, sweep.drivers.running: a request leaves them before it is counted as ended) counts no
        request twice; one that ended in between is in neither, which only lowers the e-value."""
        if now - window_start < self.min_seconds:
            return None
        with self._lock:
            measured, counted_over, counted_n = self._measured, list(self._over), list(self._n)
        extra = [0] * len(self.bounds)
        late = sent = 0
        for rec in running:
            if rec.warmup or rec.scheduled_at < window_start:
                continue
            sent += 1
            hit = False
            for i, b in enumerate(self.bounds):
                if over_bound(rec, b.name, b.bound_ms, now):
                    extra[i] += 1
                    hit = True
            late += hit
        if measured + late < self.min_requests:
            return None
        # the requests the whole window will hold, projected from those sent so far (PROJECTION_SLACK above it)
        total = (measured + sent) * self.measure_s / (now - window_start) * PROJECTION_SLACK
        found: dict[int, Verdict] = {}
        for i, b in enumerate(self.bounds):
            if b.tier in found:
                continue
            over, n = counted_over[i] + extra[i], counted_n[i] + extra[i]
            if self.measure_s > 0 and over <= b.q * total:  # the rest of the window could still bring the share under the bound
                continue
            e = e_value(over, n, b.q)
            if e >= self.threshold[i]:
                found[b.tier] = Verdict(b.label, e, self.threshold[i], over, n, total / PROJECTION_SLACK)
        return found[0] if len(found) == self.tiers else None


def window_test(profile: Profile, window: Window) -> EarlyStop | None:
    """A fresh test of one of `profile`'s windows, judged by every SLA tier (None when window.early_stop is off)."""
    rule = window.early_stop
    if not rule.enabled:
        return None
    slas = [profile.sla, *(b for t in profile.tiers if (b := t.bounds()) != profile.sla)]
    return EarlyStop(slas, rule.alpha, rule.min_requests, rule.min_seconds, window.measure_seconds)
