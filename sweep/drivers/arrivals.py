"""How drivers use an arrival's send schedule: sharding it over client processes and splitting caps.

The schedule itself is the arrival's own (`ArrivalProcess.schedule`, sweep/profile/arrival.py); `schedule` here is
a thin caller kept for tests and tools.
"""

from __future__ import annotations

import numpy as np

from sweep.profile import OpenArrival
from sweep.profile.trace import load_trace

__all__ = ["load_trace", "schedule", "shard", "split_int"]


def schedule(arrival: OpenArrival, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
    """Send offsets covering [0, horizon_s) and at least min_count requests; the first request is at 0."""
    return arrival.offsets(horizon_s, seed, step, min_count)


def shard(n_items: int, n_shards: int, i: int) -> np.ndarray:
    """Indices of shard i of n: round-robin (i, i+n, ...), so shards are disjoint and each is a thinned
    copy of the whole schedule at rate/n."""
    return np.arange(i, n_items, n_shards, dtype=np.int64)


def split_int(total: int, n_shards: int, i: int) -> int:
    """Shard i's part of total (users or an in-flight cap), the remainder going to the first shards."""
    return total // n_shards + (1 if i < total % n_shards else 0)
