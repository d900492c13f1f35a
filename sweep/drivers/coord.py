"""What the client workers of one window share: the window start (closed loop: set by the dispatch that ends the
warm-up; open loop: known up front), the warm-up count, the stop flag, and the progress the hang watch reads."""

from __future__ import annotations

import math
from multiprocessing.context import BaseContext

from sweep.profile import Window

__all__ = ["Coord", "SharedCoord"]


class Coord:
    """Window start, warm-up dispatch count and stop flag for workers in one process; and progress: how many
    requests are in flight and when the server last sent anything, so the parent can tell a hung server
    (nothing arrives while requests wait) from a slow one."""

    def __init__(self, window_start: float | None = None):
        self._ws = window_start
        self._count = 0
        self._stop = False
        self._in_flight = 0
        self._since = math.inf  # last response bytes, or the moment requests went in flight after none were

    def sent(self, shard: int, now: float) -> None:
        """A request of `shard` is in flight from now."""
        if self._in_flight == 0:
            self._since = now
        self._in_flight += 1

    def done(self, shard: int) -> None:
        self._in_flight -= 1

    def progress(self, shard: int, now: float) -> None:
        """Response bytes arrived."""
        self._since = now

    def stalled_for(self, now: float) -> tuple[float, int]:
        """(seconds without any response bytes while requests were in flight, requests in flight); 0 when idle."""
        n = self._in_flight
        return (max(0.0, now - self._since) if n > 0 else 0.0), n

    def window_start(self) -> float | None:
        return self._ws

    def open_at(self, ws: float) -> None:
        """Open loop: the window starts at ws (known before the workers start)."""
        self._ws = ws

    def claim(self, now: float, t0: float, window: Window) -> bool:
        """Count one closed-loop dispatch; True when it belongs to the warm-up."""
        if self._ws is not None:
            return now < self._ws
        idx = self._count
        self._count += 1
        if idx >= window.warmup_requests and now - t0 >= window.warmup_seconds:
            self._ws = now
            return False
        return True

    def stop(self) -> None:
        self._stop = True

    def stopped(self) -> bool:
        return self._stop


class SharedCoord(Coord):
    """Coord across spawned processes: multiprocessing shared values (the count is locked, warm-up only)."""

    def __init__(self, ctx: BaseContext, window_start: float | None = None, n_shards: int = 1):
        self._ws_v = ctx.RawValue("d", math.nan if window_start is None else window_start)
        self._count_v = ctx.Value("q", 0)
        self._stop_v = ctx.RawValue("b", 0)
        # One slot per shard, each written by its own process only: no lock needed.
        self._in_flight_v = ctx.RawArray("q", n_shards)
        self._since_v = ctx.RawArray("d", [-math.inf] * n_shards)

    def sent(self, shard: int, now: float) -> None:
        if self._in_flight_v[shard] == 0:
            self._since_v[shard] = now
        self._in_flight_v[shard] += 1

    def done(self, shard: int) -> None:
        self._in_flight_v[shard] -= 1

    def progress(self, shard: int, now: float) -> None:
        self._since_v[shard] = now

    def stalled_for(self, now: float) -> tuple[float, int]:
        n = int(sum(self._in_flight_v))
        return (max(0.0, now - max(self._since_v)) if n > 0 else 0.0), n

    def window_start(self) -> float | None:
        v = self._ws_v.value
        return None if math.isnan(v) else v

    def open_at(self, ws: float) -> None:
        self._ws_v.value = ws

    def claim(self, now: float, t0: float, window: Window) -> bool:
        ws = self.window_start()
        if ws is not None:
            return now < ws
        with self._count_v.get_lock():
            ws = self.window_start()
            if ws is not None:
                return now < ws
            idx = self._count_v.value
            self._count_v.value = idx + 1
            if idx >= window.warmup_requests and now - t0 >= window.warmup_seconds:
                self._ws_v.value = now
                return False
        return True

    def stop(self) -> None:
        self._stop_v.value = 1

    def stopped(self) -> bool:
        return bool(self._stop_v.value)
