"""What the ladder reads off one finished window (pure): whether the server's own signals say it is saturated, the
window's offered rate where that is the ladder's load (a step's load in words), and its failed requests by kind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sweep.analysis.loads import load_words
from sweep.analysis.run_stats import RunStats
from sweep.core.types import SERVER_DIED, RequestRecord
from sweep.launchers.base import Launcher, ServerHandle
from sweep.profile import Arrival, GammaArrival, Profile, RateArrival, TraceArrival


def saturated(stats: RunStats, previous: RunStats | None) -> str | None:
    """The server's own signals that more load only lengthens the queue; None when not saturated."""
    signs = []
    if stats.queue_len_mean is not None and stats.queue_len_mean >= 1.0:
        signs.append(f"queue never empties (mean {stats.queue_len_mean:.1f})")
    if stats.kv_usage_max is not None and stats.kv_usage_max >= 0.95:
        signs.append(f"KV usage {stats.kv_usage_max:.2f}")
    if previous is not None and stats.retractions > previous.retractions:
        signs.append(f"retractions rising ({previous.retractions} -> {stats.retractions})")
    return "; ".join(signs) if signs else None


def offered_rate(profile: Profile, arrival: Arrival) -> float | None:
    """A window's offered rate (req/s) where it is the ladder's load (an open-loop arrival.rates ladder, or a trace's
    time-scale ladder: its recorded rate at the step's scale), else None."""
    if profile.rate_ladder and isinstance(arrival, TraceArrival):
        return arrival.mean_rate
    return float(arrival.rate) if profile.rate_ladder and isinstance(arrival, RateArrival | GammaArrival) else None


def step_words(profile: Profile, concurrency: int) -> str:
    """A ladder step's load in a sentence: "concurrency 16", a rate ladder's "12.50 req/s" (sweep.analysis.loads)."""
    return load_words(concurrency, offered_rate(profile, profile.step_arrival(concurrency)))


def error_kinds(records: Sequence[RequestRecord]) -> str:
    """The measured requests' failures by kind, most common first ("timeout 12, status 3")."""
    kinds = Counter(r.error_kind or "error" for r in records if r.error is not None and not r.warmup)
    return ", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "no measured request"


def window_failure(launcher: Launcher, handle: ServerHandle, aborted: str, concurrency: int) -> str:
    """The stored reason of a window that could not complete, led by its class (crash, hung, ...):
    a dead server's exit status and last log lines come from its launcher where it has them."""
    if aborted != SERVER_DIED:
        return aborted if ":" in aborted.split()[0] else f"aborted: {aborted}"
    why = launcher.exit_detail(handle)
    return f"crash: {SERVER_DIED} at concurrency {concurrency}" + (f": {why}" if why else "")
