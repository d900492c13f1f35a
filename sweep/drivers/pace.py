"""A client worker's timing on the driver's clock: sleeping until a moment, and the self-check ticker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["TICK_S", "sleep_until", "tick"]

TICK_S = 0.02  # self-check period: event-loop lag and CPU are sampled this often


async def sleep_until(t: float, clock: Callable[[], float]) -> None:
    """Sleep until clock() >= t; uvloop's millisecond timers can wake a little early, so check and go again."""
    while (delay := t - clock()) > 0:
        await asyncio.sleep(delay if delay > 0.001 else 0)


async def tick(out: list[tuple[float, float, float]], clock: Callable[[], float]) -> None:
    """Self-check: event-loop lag (how late a TICK_S sleep wakes) and process CPU time, every tick."""
    prev = clock()
    while True:
        await asyncio.sleep(TICK_S)
        now = clock()
        out.append((now, max(0.0, now - prev - TICK_S), time.process_time()))
        prev = now
