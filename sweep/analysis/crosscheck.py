"""Cross-checks of one window's figures: against an independent reference client, and against the server's histograms.

Pure: stats rows (the runs-table columns) and Prometheus histogram buckets in, frozen verdicts out; no I/O.

Spec:
- Tolerance: two figures a (sweep's) and b (the other side's) agree when |a − b| <= allowed, where
  allowed = max(rel × max(|a|, |b|), floor) for a latency in ms and rel × max(|a|, |b|) for a rate (tok/s).
  The floor is in proportion to the figure's kind: abs_ms for a per-request latency (TTFT, E2E: tens to thousands
  of ms), token_ms for a per-token one (TPOT, ITL: 5–25 ms, where a 20 ms floor could never flag anything):
  "10% or 20 ms (TPOT/ITL: 2 ms), whichever is looser" by default (the profile's crosscheck.tolerance_pct /
  tolerance_ms / tolerance_token_ms).
- Too few to judge: a percentile Pq of n requests rests on the n × (1 − q/100) requests beyond it; it is judged
  only when that tail holds at least min_tail requests (default 5: a P99 needs 500 requests, a P50 10), on
  both sides (n = the smaller n_completed; for a histogram, its observation count). Otherwise agrees is None
  and the figure is shown, not flagged. Throughput is always judged.
- Reference comparison (compare_runs): TTFT P50/P99, TPOT P50/P99 and output tok/s of sweep's row against the
  reference client's row of the same step. A figure missing on either side has agrees None (not judged, not
  flagged); the whole check agrees when every judged figure does, None when none could be judged.
- Sessions (a window of workload.sessions: sweep.analysis.sessions.session_columns), judged when either row has
  them: sessions completed (a count: rel or count_floor sessions, default 2), session time P50/P90 (seconds: rel
  or abs_ms / 1000; its tail counted in completed sessions, not requests), and the cache hit of turn 1 and of the
  later turns (shares 0..1: rel or share_floor, default 0.05, i.e. 5 points), and the mean prompt tokens the
  server counted per later-turn request (rel only). The later turns are where a replay that does not resend the
  conversation so far shows: their prompts shrink to the new message and hit nothing the flushed cache held.
- Server comparison (server_checks): the client's P50/P99 against the server's own histogram over the same
  window (cumulative (le seconds, count) buckets, the delta between the window's start and end scrapes).
  The server's quantile is Prometheus' histogram_quantile (linear inside the bucket); a histogram only says
  which bucket the true quantile lies in, so the client's figure agrees when it lies inside that bucket
  widened by the tolerance on each side: lo − allowed(lo) <= client <= hi + allowed(hi). A quantile in the
  +Inf bucket has hi = inf. Pairs: TTFT vs time_to_first_token_seconds, TPOT vs time_per_output_token_seconds
  (older SGLang only), ITL vs inter_token_latency_seconds, E2E vs e2e_request_latency_seconds; a histogram the
  server does not export, or one with no observations in the window, gives no check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sweep.analysis.measure import histogram_quantile
from sweep.core.numbers import as_float
from sweep.core.types import JSON

Buckets = Sequence[tuple[float, float]]

# What a figure is, for its tolerance floor: a per-request latency (ms), a per-token latency (ms) or a rate (tok/s)
FigureKind = Literal["request", "token", "rate", "count", "seconds", "share"]
# (runs column, label, kind) of the figures the reference comparison judges
REFERENCE_FIGURES: tuple[tuple[str, str, FigureKind], ...] = (
    ("ttft_p50_ms", "TTFT P50 (ms)", "request"),
    ("ttft_p99_ms", "TTFT P99 (ms)", "request"),
    ("tpot_p50_ms", "TPOT P50 (ms)", "token"),
    ("tpot_p99_ms", "TPOT P99 (ms)", "token"),
    ("output_tps", "output tok/s", "rate"),
)
# (runs column, label, kind) of a session window's figures, judged when either row has them
SESSION_FIGURES: tuple[tuple[str, str, FigureKind], ...] = (
    ("sessions_completed", "sessions completed", "count"),
    ("session_p50_s", "session time P50 (s)", "seconds"),
    ("session_p90_s", "session time P90 (s)", "seconds"),
    ("cache_hit_turn1", "cache hit, turn 1", "share"),
    ("cache_hit_later", "cache hit, turns 2+", "share"),
    ("later_prompt_tokens", "prompt tokens, turns 2+", "rate"),
)
# (client metric prefix, label, server histogram name, kind)
SERVER_HISTOGRAMS: tuple[tuple[str, str, str, FigureKind], ...] = (
    ("ttft", "TTFT", "time_to_first_token_seconds", "request"),
    ("tpot", "TPOT", "time_per_output_token_seconds", "token"),
    ("itl", "ITL", "inter_token_latency_seconds", "token"),
    ("e2e", "E2E", "e2e_request_latency_seconds", "request"),
)
SERVER_QUANTILES: tuple[int, ...] = (50, 99)


@dataclass(frozen=True)
class Tolerance:
    """How far two figures may differ and still agree: the looser of a relative and an absolute bound (abs_ms for
    a per-request latency, token_ms for a per-token one; a rate has no absolute floor)."""

    rel: float = 0.10
    abs_ms: float = 20.0
    min_tail: int = 5
    token_ms: float = 2.0
    count_floor: float = 2.0  # sessions completed: a window's edge cuts a session or two either way
    share_floor: float = 0.05  # a cache hit rate, 0..1

    def enough(self, n: float, q: float | None) -> bool:
        """Whether a percentile q (0..100; None: not a percentile) of n requests is judged (see the spec)."""
        return q is None or n * (1.0 - q / 100.0) >= self.min_tail

    def allowed(self, a: float, b: float, kind: FigureKind) -> float:
        """The largest |a − b| that still agrees for a figure of this kind."""
        rel = self.rel * max(abs(a), abs(b))
        floor = {"rate": 0.0, "request": self.abs_ms, "token": self.token_ms, "count": self.count_floor,
                 "seconds": self.abs_ms / 1000.0, "share": self.share_floor}[kind]
        return max(rel, floor)

    def describe(self) -> str:
        return (f"{self.rel:.0%} or {self.abs_ms:g} ms (per-token figures, TPOT and ITL: {self.token_ms:g} ms), "
                f"whichever is looser")

    @classmethod
    def of(cls, section: Mapping[str, JSON]) -> Tolerance:
        """The tolerance of a profile's crosscheck section (a dict; a missing or non-numeric key: the default)."""
        d = cls()

        def num(key: str, default: float) -> float:
            v = section.get(key, default)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default

        return cls(rel=num("tolerance_pct", d.rel * 100.0) / 100.0, abs_ms=num("tolerance_ms", d.abs_ms),
                   min_tail=int(num("min_tail", d.min_tail)), token_ms=num("tolerance_token_ms", d.token_ms))


@dataclass(frozen=True)
class FigureCheck:
    """One figure of sweep's row against the reference's."""

    column: str
    label: str
    ours: float | None
    reference: float | None
    allowed: float | None
    agrees: bool | None  # None: a side has no value, or too few requests to judge
    note: str = ""  # why a figure is not judged

    @property
    def diff(self) -> float | None:
        """reference − ours."""
        return None if self.ours is None or self.reference is None else self.reference - self.ours

    @property
    def rel_diff(self) -> float | None:
        """(reference − ours) / ours; None without both values or with ours 0."""
        d = self.diff
        return None if d is None or not self.ours else d / self.ours


@dataclass(frozen=True)
class CrossCheck:
    """Every judged figure of one step and the verdict."""

    figures: tuple[FigureCheck, ...]
    tolerance: Tolerance

    @property
    def agrees(self) -> bool | None:
        judged = [f.agrees for f in self.figures if f.agrees is not None]
        return all(judged) if judged else None

    @property
    def flagged(self) -> tuple[FigureCheck, ...]:
        return tuple(f for f in self.figures if f.agrees is False)

    def differences(self) -> str:
        """The flagged figures in words, e.g. "TTFT P50 (ms) 41.0 vs 101.3 (allowed 20.0)"; "" when none."""
        return ", ".join(f"{f.label} {f.ours:,.1f} vs {f.reference:,.1f} (allowed {f.allowed:,.1f})"
                         for f in self.flagged if f.ours is not None and f.reference is not None
                         and f.allowed is not None)


@dataclass(frozen=True)
class HistogramCheck:
    """One client percentile against the server's histogram of the same window (latencies in ms)."""

    metric: str  # TTFT | TPOT | ITL | E2E
    histogram: str
    q: int
    client_ms: float | None
    server_ms: float
    bucket_low_ms: float
    bucket_high_ms: float  # inf for the +Inf bucket
    observations: float
    agrees: bool | None
    note: str = ""


def _num(v: object) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    f = as_float(v)
    return None if math.isnan(f) else f


def compare_runs(ours: Mapping[str, object], reference: Mapping[str, object], tol: Tolerance = Tolerance()) -> CrossCheck:
    """sweep's stats row against the reference client's row of the same step."""
    out = []
    n_req = min(_num(ours.get("n_completed")) or 0.0, _num(reference.get("n_completed")) or 0.0)
    n_sessions = min(_num(ours.get("sessions_completed")) or 0.0, _num(reference.get("sessions_completed")) or 0.0)
    sessions = tuple(f for f in SESSION_FIGURES if _num(ours.get(f[0])) is not None
                     or _num(reference.get(f[0])) is not None)
    for col, label, kind in REFERENCE_FIGURES + sessions:
        a, b = _num(ours.get(col)), _num(reference.get(col))
        n = n_sessions if kind == "seconds" else n_req
        if a is None or b is None:
            out.append(FigureCheck(col, label, a, b, None, None, "no value"))
            continue
        allowed = tol.allowed(a, b, kind)
        q = _quantile_of(col)
        if not tol.enough(n, q):
            out.append(FigureCheck(col, label, a, b, allowed, None,
                                   _few(n, q, tol, "sessions" if kind == "seconds" else "requests")))
            continue
        out.append(FigureCheck(col, label, a, b, allowed, abs(a - b) <= allowed))
    return CrossCheck(tuple(out), tol)


def _quantile_of(column: str) -> float | None:
    """99 for ttft_p99_ms, None for a column that is not a percentile."""
    parts = column.split("_")
    return float(parts[1][1:]) if len(parts) > 2 and parts[1][:1] == "p" and parts[1][1:].isdigit() else None


def _few(n: float, q: float | None, tol: Tolerance, what: str = "requests") -> str:
    return f"too few {what}: {n:.0f} put {n * (1 - (q or 0) / 100):.1f} beyond P{q:g} (< {tol.min_tail})"


def quantile_bucket(buckets: Buckets, q: float) -> tuple[float, float] | None:
    """(lower, upper) bound of the bucket that holds the q-quantile (q in 0..1) of cumulative buckets; None if empty."""
    bs = sorted(buckets, key=lambda b: b[0])
    if not bs or bs[-1][1] <= 0 or not 0 <= q <= 1:
        return None
    rank = q * bs[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in bs:
        if count >= rank and count > prev_count:
            return prev_le, le
        prev_le, prev_count = le, count
    return prev_le, bs[-1][0]


def histogram_check(metric: str, name: str, q: int, client_ms: float | None, buckets: Buckets,
                    tol: Tolerance = Tolerance(), kind: FigureKind = "request") -> HistogramCheck | None:
    """One client percentile against the server histogram `buckets` (seconds); None without observations.

    kind: "token" for a per-token metric (TPOT, ITL), whose bucket is widened by the per-token floor."""
    bounds = quantile_bucket(buckets, q / 100.0)
    if bounds is None:
        return None
    lo, hi = bounds[0] * 1000.0, bounds[1] * 1000.0
    server = histogram_quantile(list(buckets), q / 100.0) * 1000.0
    n = max(c for _, c in buckets)
    agrees, note = None, ""
    if client_ms is None:
        note = "no client value"
    elif not tol.enough(n, q):
        note = _few(n, q, tol)
    else:
        low_ok = client_ms >= lo - tol.allowed(lo, lo, kind)
        high_ok = math.isinf(hi) or client_ms <= hi + tol.allowed(hi, hi, kind)
        agrees = low_ok and high_ok
    return HistogramCheck(metric, name, q, client_ms, server, lo, hi, n, agrees, note)


def server_checks(stats: Mapping[str, object], histograms: Mapping[str, Buckets],
                  tol: Tolerance = Tolerance()) -> tuple[HistogramCheck, ...]:
    """The client's P50/P99 of each metric against the server's histogram of it, where the server exports one."""
    out = []
    for prefix, metric, name, kind in SERVER_HISTOGRAMS:
        buckets = histograms.get(name)
        if not buckets:
            continue
        for q in SERVER_QUANTILES:
            check = histogram_check(metric, name, q, _num(stats.get(f"{prefix}_p{q}_ms")), buckets, tol, kind)
            if check is not None:
                out.append(check)
    return tuple(out)
