"""What the client workers of one window share: the warm-up and the window's opening (sweep.profile.warmup), the stop
flag, and the progress the hang watch reads.

The window opens at the first moment its warm-up conditions all hold, found at the event that completes them: a
request's end (`done`: the warmup_requests-th completion), a dispatch (`claim`: the load's last one, or any send at
or past a time condition), or a poll (`poll`: the time conditions and the bound, for a supervisor that wakes at
`next_edge`). The opening is never set before a send already labelled warm-up (`claim` returned True for it), so every
record's label agrees with the window: warm-up exactly when sent (open loop: scheduled) before the window's start.
"""

from __future__ import annotations

import contextlib
import math
from multiprocessing.context import BaseContext
from typing import Protocol

from sweep.core.types import RequestRecord
from sweep.drivers.running import RunningBoard
from sweep.profile.warmup import OPENED_BY, WarmupRule

__all__ = ["Coord", "SharedCoord"]

# slots of the warm-up marks (a list in one process, a shared array across processes)
_T0, _WS, _BY, _DONE_AT_OPEN, _SENT, _DONE, _REQ_AT, _LOAD_AT, _WARM_LAST, _EARLY = range(10)
_INITIAL = (math.nan, math.nan, -1.0, 0.0, 0.0, 0.0, math.nan, math.nan, -math.inf, math.nan)


class _Marks(Protocol):
    def __getitem__(self, i: int) -> float: ...
    def __setitem__(self, i: int, v: float) -> None: ...


class Coord:
    """Warm-up, window start and stop flag for workers in one process (or a virtual clock); and progress: how many
    requests are in flight and when the server last sent anything, so the parent can tell a hung server (nothing
    arrives while requests wait) from a slow one."""

    def __init__(self, rule: WarmupRule, slots: int = 0):
        """slots: the most requests a worker holds in flight at once, tracked for the early-stop test (`running`);
        0 tracks none."""
        self.rule = rule
        self.board = RunningBoard.local(1, slots) if slots > 0 else None
        self._m: _Marks = list(_INITIAL)
        self._lock: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        self._stop = False
        self._in_flight = 0
        self._since = math.inf  # last response bytes, or the moment requests went in flight after none were

    # ---- the warm-up and the window's opening
    def begin(self, t0: float) -> None:
        """The step starts at t0: its warm-up is timed from here (before any worker sends)."""
        self._m[_T0] = t0

    def window_start(self) -> float | None:
        v = self._m[_WS]
        return None if math.isnan(v) else v

    def opened(self) -> tuple[str, int, float] | None:
        """(the condition met last, requests completed then, seconds from t0) once the window opened; else None."""
        ws = self.window_start()
        if ws is None:
            return None
        return OPENED_BY[int(self._m[_BY])], int(self._m[_DONE_AT_OPEN]), ws - self._m[_T0]

    def claim(self, t: float) -> bool:
        """Count one send (open loop: scheduled) at t; True when it belongs to the warm-up."""
        ws = self.window_start()
        if ws is not None:
            return t < ws
        with self._lock:
            m = self._m
            m[_SENT] += 1
            if math.isnan(m[_LOAD_AT]) and m[_SENT] >= self.rule.load_sends:
                m[_LOAD_AT] = t
            ws = self._open(t)
            if ws is not None:
                return t < ws
            m[_WARM_LAST] = max(m[_WARM_LAST], t)
            return True

    def done(self, shard: int, now: float) -> None:
        """A request of `shard` ended at now (answered, failed, timed out or cut): no longer in flight, and one more
        completion for the warm-up."""
        self._ended(shard)
        if self.window_start() is not None:
            return
        with self._lock:
            m = self._m
            m[_DONE] += 1
            if math.isnan(m[_REQ_AT]) and m[_DONE] >= self.rule.requests:
                m[_REQ_AT] = now
            self._open(now)

    def poll(self, now: float) -> float | None:
        """Open the window if its moment came by now (a time condition or the bound); its start, None before."""
        ws = self.window_start()
        if ws is None and not math.isnan(self._m[_T0]):
            with self._lock:
                ws = self._open(now)
        return ws

    def next_edge(self, now: float) -> float:
        """The next moment after now the window may open at without a request event (math.inf: none, or open)."""
        t0 = self._m[_T0]
        if self.window_start() is not None or math.isnan(t0):
            return math.inf
        return min((t for t in self.rule.edges(t0) if t > now), default=math.inf)

    def latest_end(self, measure_s: float) -> float:
        """The window's end once it opened; before, the latest it can be (opened at the bound)."""
        early = self.early_end()
        if early is not None:
            return early
        ws = self.window_start()
        return (self._m[_T0] + self.rule.bound if ws is None else ws) + measure_s

    def end_early(self, at: float) -> None:
        """The window's verdict was decided at `at` (sweep.analysis.early_stop): it ends there, dispatch stops and the
        requests still running are cut at once (no drain)."""
        self._m[_EARLY] = at
        self.stop()

    def early_end(self) -> float | None:
        """Where the window ended early (end_early), None when it runs its full length."""
        v = self._m[_EARLY]
        return None if math.isnan(v) else v

    def open_now(self, now: float) -> None:
        """Open the window now, its warm-up unfinished ("bound"): no request is left to finish it."""
        with self._lock:
            if self.window_start() is None:
                self._set(now, "bound")

    def _open(self, now: float) -> float | None:
        """Under the lock: set the window's start if its warm-up ended by now; the start, None while it has not."""
        m = self._m
        if not math.isnan(m[_WS]):
            return m[_WS]
        if math.isnan(m[_T0]):
            return None
        due = self.rule.due(m[_T0], now, None if math.isnan(m[_REQ_AT]) else m[_REQ_AT],
                            None if math.isnan(m[_LOAD_AT]) else m[_LOAD_AT])
        if due is None:
            return None
        return self._set(*due)

    def _set(self, at: float, by: str) -> float:
        m = self._m
        m[_BY], m[_DONE_AT_OPEN] = OPENED_BY.index(by), m[_DONE]  # before the start, which others read unlocked
        m[_WS] = max(at, math.nextafter(m[_WARM_LAST], math.inf))  # never before a send labelled warm-up
        return m[_WS]

    # ---- stop and progress
    def sent(self, shard: int, now: float) -> None:
        """A request of `shard` is in flight from now."""
        if self._in_flight == 0:
            self._since = now
        self._in_flight += 1

    def _ended(self, shard: int) -> None:
        self._in_flight -= 1

    def progress(self, shard: int, now: float) -> None:
        """Response bytes arrived."""
        self._since = now

    def stalled_for(self, now: float) -> tuple[float, int]:
        """(seconds without any response bytes while requests were in flight, requests in flight); 0 when idle."""
        n = self._in_flight
        return (max(0.0, now - self._since) if n > 0 else 0.0), n

    def running(self) -> list[RequestRecord]:
        """The requests in flight now, with what is known of them (sweep.drivers.running); none when untracked."""
        return self.board.records() if self.board is not None else []

    def stop(self) -> None:
        self._stop = True

    def stopped(self) -> bool:
        return self._stop


class SharedCoord(Coord):
    """Coord across spawned processes: the warm-up marks in a shared array under one lock (taken only until the window
    opens), the stop flag and each shard's progress in shared values."""

    def __init__(self, ctx: BaseContext, rule: WarmupRule, n_shards: int = 1, slots: int = 0):
        self.rule = rule
        self.board = RunningBoard.shared(ctx, n_shards, slots) if slots > 0 else None
        self._m = ctx.RawArray("d", _INITIAL)
        self._lock = ctx.Lock()
        self._stop_v = ctx.RawValue("b", 0)
        # One slot per shard, each written by its own process only: no lock needed.
        self._in_flight_v = ctx.RawArray("q", n_shards)
        self._since_v = ctx.RawArray("d", [-math.inf] * n_shards)

    def sent(self, shard: int, now: float) -> None:
        if self._in_flight_v[shard] == 0:
            self._since_v[shard] = now
        self._in_flight_v[shard] += 1

    def _ended(self, shard: int) -> None:
        self._in_flight_v[shard] -= 1

    def progress(self, shard: int, now: float) -> None:
        self._since_v[shard] = now

    def stalled_for(self, now: float) -> tuple[float, int]:
        n = int(sum(self._in_flight_v))
        return (max(0.0, now - max(self._since_v)) if n > 0 else 0.0), n

    def stop(self) -> None:
        self._stop_v.value = 1

    def stopped(self) -> bool:
        return bool(self._stop_v.value)
