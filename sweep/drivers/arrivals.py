"""How drivers use an arrival's send schedule: sharding it over client processes and splitting caps.

The schedule itself is the arrival's own (`ArrivalProcess.schedule`, sweep/profile/arrival.py); `schedule` here is
a thin caller kept for tests and tools.
"""

from __future__ import annotations

import numpy as np

from sweep.profile import OpenArrival, TraceArrival, Window
from sweep.profile.arrival import ArrivalProcess, SendSchedule
from sweep.profile.trace import load_trace
from sweep.workload.stream import Requests, RequestStream

__all__ = ["load_trace", "schedule", "shard", "split_int", "step_schedule"]


def step_schedule(arrival: ArrivalProcess, window: Window, seed: int, step: int,
                  specs: Requests) -> SendSchedule | None:
    """The schedule a driver sends one step by: a trace that replays the workload dataset sends each request at
    its own recorded time (from the view's first request, at the step's time scale), so the requests and their
    timing stay together however far the stream has moved on; every other arrival its own schedule."""
    if isinstance(arrival, TraceArrival) and arrival.of_dataset and isinstance(specs, RequestStream):
        recorded = specs.send_times()
        if recorded is not None:
            return arrival.replay(window, recorded, seed, step)
    return arrival.schedule(window, seed, step)


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
