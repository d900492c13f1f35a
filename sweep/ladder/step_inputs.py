"""What each ladder step sends: the study's stream continued from the previous step, the cache emptied before it,
and the prefix-cache hit rate that what it sent allows.

The ladder calls begin() when a configuration's ladder starts, before_step() right before a window and
after_step() with its result; where positions start and why is in sweep.workload.stream.

The cache prediction (issue 20 §3) is taken from what was sent, not from the profile: every request of the window
(warm-up included, and every request since the server's cache was last emptied) goes through two perfect prefix
caches in send order (sweep.workload.prefix_cache, fed by sweep.workload.sent): one unbounded, one capped at the
configuration's KV pool (LRU). Over the window's measured successful requests (the ones the measured rate counts),
hits / prompt tokens of each is the predicted rate: the unbounded one an upper bound no server can beat, the capped
one what a cache of the pool's size keeps. Media and chat-template tokens are not in the ids and not counted.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Protocol

from sweep.analysis.measure import in_window, succeeded
from sweep.analysis.run_stats import RunStats
from sweep.analysis.sessions import session_columns
from sweep.core.types import WindowResult
from sweep.drivers.arrivals import step_schedule
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, Profile, Window
from sweep.workload.prefix_cache import PrefixCache
from sweep.workload.sent import sent_sequences
from sweep.workload.stream import (
    Requests,
    StreamExhausted,
    next_position,
    view_from,
)
from sweep.workload.stream_view import StreamView

log = logging.getLogger(__name__)
HEADROOM = 1.25  # a closed-loop step is offered this much more than the previous step's rate scaled by concurrency


class Flusher(Protocol):
    simulated: bool

    def flush_cache(self, handle: ServerHandle) -> str | None: ...


class StepInputs:
    """The request stream position, cache flushes and predicted hit rate of one configuration's ladder."""

    def __init__(self, profile: Profile, specs: Requests, driver: Flusher):
        self.profile = profile
        self.specs = specs
        self.driver = driver
        self.pool_tokens: int | None = None  # the configuration's KV pool, when its server says (the capped cache)
        self.begin()

    def begin(self) -> None:
        """A configuration's ladder starts at stream position 0 (the same requests for every configuration)."""
        self.position = 0
        self.since_flush = 0  # requests sent since the server's cache was last emptied
        self._last: tuple[int, int] | None = None  # (concurrency, requests used) of the previous step
        self._empty_caches()

    def _empty_caches(self) -> None:
        self._perfect = PrefixCache()
        self._capped = PrefixCache(self.pool_tokens) if self.pool_tokens else None

    def before_step(self, handle: ServerHandle, concurrency: int, window: Window,
                    arrival: ArrivalProcess | None) -> tuple[Requests, str | None]:
        """Flush the cache (window.flush_cache), then the step's view of the stream, its requests made ahead.

        Returns (requests, note): note says why the cache could not be emptied, None when it was (or is not asked).
        """
        note = None
        pool = handle.server_info.get("max_total_num_tokens")
        if isinstance(pool, int | float) and pool > 0 and int(pool) != self.pool_tokens:
            self.pool_tokens = int(pool)
            self._capped = PrefixCache(self.pool_tokens)
        if window.flush_cache:
            note = self.driver.flush_cache(handle)
            if note is None:
                self.since_flush = 0
                self._empty_caches()
            else:
                log.warning("prefix cache not emptied before concurrency %d: %s", concurrency, note)
        view = view_from(self.specs, self.position)
        if isinstance(view, StreamView) and not self.driver.simulated:
            view.prefetch(min(self._expected(concurrency, window, arrival, view), self.profile.workload.num_requests))
        return view, note

    def after_step(self, result: WindowResult, stats: RunStats) -> RunStats:
        """Advance the stream past what the window used; the stats with the predicted hit rates and, for sessions,
        the session columns (sweep.analysis.sessions.session_columns) filled in."""
        used = len(result.records)
        perfect, capped = self._predict(result)
        self.position = next_position(result.records, self.position)
        self.since_flush += used
        self._last = (result.concurrency, used)
        return replace(stats, cache_hit_rate_predicted=perfect, cache_hit_rate_capped=capped,
                       **session_columns(result.records))

    def _predict(self, result: WindowResult) -> tuple[float | None, float | None]:
        """(unbounded, pool-capped) hit rate of the window's measured successful requests (module docstring)."""
        hits = [0, 0]
        total = 0
        for s in sent_sequences(result.records, self.specs):
            h = self._perfect.send(s.prompt, s.cached)
            c = self._capped.send(s.prompt, s.cached) if self._capped is not None else 0
            r = s.record
            if in_window(r, result.window_start, result.window_end) and succeeded(r):
                hits[0] += h
                hits[1] += c
                total += len(s.prompt)
        if total == 0:
            return None, None
        return hits[0] / total, (hits[1] / total if self._capped is not None else None)

    def _expected(self, concurrency: int, window: Window, arrival: ArrivalProcess | None, view: Requests) -> int:
        """Requests the step will likely send: the schedule's sends before its window's earliest end (open loop), else
        scaled from the last step."""
        seed = self.profile.workload.seed
        sched = step_schedule(arrival, window, seed, concurrency, view) if arrival is not None else None
        if sched is not None:
            return sched.needed()
        if self._last is None:
            return window.warmup_requests + 2 * concurrency
        prev_c, prev_used = self._last
        return int(prev_used * concurrency / max(prev_c, 1) * HEADROOM) + concurrency


def refuse_short_dataset(profile: Profile, specs: Requests) -> None:
    """A dataset too small for one ladder is refused before launch (one line, exit 2, nothing written).

    Open loop: every step's schedule is known: the sends before each window's earliest end are the need
    (sweep.profile.arrival.SendSchedule.needed). Closed loop: the need depends on the server's speed, so the least
    any ladder can send is checked (each step's warm-up and one request per user); a configuration that runs out
    later stops its own ladder with the reason (sweep.ladder.runner), never the study.
    """
    cap = specs.capacity if isinstance(specs, StreamView) else None
    if cap is None:
        return
    if profile.arrival.open_loop:
        scheds = (profile.step_arrival(c).schedule(profile.window, profile.workload.seed, c) for c in profile.ladder)
        need, what = sum(s.needed() for s in scheds if s is not None), "one ladder's schedules send at least"
    else:
        warm = profile.window.warmup_requests if isinstance(specs, StreamView) and specs.WARMUP_TAKES_POSITIONS else 0
        need = sum(warm + c for c in profile.ladder)
        what = "one ladder sends at least (each step's warm-up and one request per user)"
    if need > cap:
        raise StreamExhausted(f"{profile.workload.dataset.path if profile.workload.dataset else 'the dataset'}: "
                              f"the dataset holds {cap} entries and {what} {need}; set "
                              "workload.replay: true to send entries again, or shorten the window or the ladder")
