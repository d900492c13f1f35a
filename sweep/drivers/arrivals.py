"""Open-loop send schedules, computed up front from a seeded RNG (or a trace file), and how to shard them.

A schedule is a sorted numpy array of send-time offsets in seconds from the step's start (t0). The same
(arrival, seed, step) always yields the same schedule, so every configuration sees the same arrivals.
Latency is counted from these scheduled times (RequestRecord.scheduled_at), never from the actual send,
so a slow client or a full in-flight cap cannot hide queueing (coordinated omission).
"""

from __future__ import annotations

import math

import numpy as np

from sweep.profile import ClosedArrival, GammaArrival, OpenArrival, RateArrival, TraceArrival, Window
from sweep.profile.trace import load_trace

_BLOCK = 4096


def is_open(arrival: object) -> bool:
    """True for open-loop arrival models (rate, gamma, trace); False for None and closed loop."""
    return arrival is not None and not isinstance(arrival, ClosedArrival)


def rng_for(seed: int, step: int) -> np.random.Generator:
    """The schedule RNG of one ladder step: numpy Generator seeded from (workload seed, step)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(step) & 0xFFFFFFFF, 0x5EED])


def _gaps(arrival: OpenArrival, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(arrival, RateArrival) and arrival.kind == "constant":
        return np.full(n, 1.0 / arrival.rate)
    if isinstance(arrival, RateArrival):
        return rng.exponential(1.0 / arrival.rate, n)
    if isinstance(arrival, GammaArrival):
        k = arrival.k
        return rng.gamma(k, 1.0 / (arrival.rate * k), n)
    raise TypeError(f"no gap model for {type(arrival).__name__}")


def schedule(arrival: OpenArrival, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
    """Send offsets covering [0, horizon_s) and at least min_count requests; the first request is at 0."""
    if isinstance(arrival, TraceArrival):
        return load_trace(arrival.file, arrival.time_scale)
    if isinstance(arrival, RateArrival) and arrival.kind == "constant":  # exact multiples, no cumsum drift
        n = max(int(math.ceil(horizon_s * arrival.rate - 1e-9)), min_count)
        return np.arange(n, dtype=float) / arrival.rate
    rng = rng_for(seed, step)
    parts: list[np.ndarray] = []
    last, count = 0.0, 0
    while last < horizon_s or count < min_count:
        g = _gaps(arrival, rng, _BLOCK)
        t = last + np.cumsum(g)
        if not parts:
            t = np.concatenate(([0.0], t[:-1]))
        parts.append(t)
        last, count = float(t[-1]), count + len(t)
    out = np.concatenate(parts)
    keep = max(int(np.searchsorted(out, horizon_s, side="left")), min_count)
    return out[:keep]


def window_offsets(offsets: np.ndarray, window: Window) -> tuple[float, float]:
    """(start, end) of the measured window as offsets from t0: warm-up is the first warmup_requests sends
    and the first warmup_seconds, whichever ends later."""
    n = window.warmup_requests
    by_count = float(offsets[n]) if n < len(offsets) else (float(offsets[-1]) if len(offsets) else 0.0)
    start = max(window.warmup_seconds, by_count if n > 0 else 0.0)
    return start, start + window.measure_seconds


def plan(arrival: OpenArrival, window: Window, seed: int = 0, step: int = 0) -> tuple[np.ndarray, float, float]:
    """The step's whole schedule (sends before the window's end) and its window (start, end) offsets."""
    rate = getattr(arrival, "rate", None)
    horizon = window.warmup_seconds + window.measure_seconds
    if rate:
        horizon = max(horizon, window.warmup_requests / rate + window.measure_seconds)
    offs = schedule(arrival, horizon * 1.05 + 1.0, seed, step, min_count=window.warmup_requests + 1)
    start, end = window_offsets(offs, window)
    return offs[offs < end], start, end


def shard(n_items: int, n_shards: int, i: int) -> np.ndarray:
    """Indices of shard i of n: round-robin (i, i+n, ...), so shards are disjoint and each is a thinned
    copy of the whole schedule at rate/n."""
    return np.arange(i, n_items, n_shards, dtype=np.int64)


def split_int(total: int, n_shards: int, i: int) -> int:
    """Shard i's part of total (users or an in-flight cap), the remainder going to the first shards."""
    return total // n_shards + (1 if i < total % n_shards else 0)


def cap_for(arrival: object) -> int:
    """The open-loop in-flight cap (max_in_flight), effectively unbounded when absent."""
    cap = getattr(arrival, "max_in_flight", None)
    return int(cap) if cap else 1 << 30


def mean_rate(offsets: np.ndarray) -> float:
    """Achieved mean send rate of a schedule (requests/s), NaN for fewer than two sends."""
    if len(offsets) < 2 or offsets[-1] <= offsets[0]:
        return math.nan
    return (len(offsets) - 1) / float(offsets[-1] - offsets[0])
