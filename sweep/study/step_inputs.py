"""What each ladder step sends: the study's stream continued from the previous step, the cache emptied before it.

The ladder calls begin() when a configuration's ladder starts, before_step() right before a window and
after_step() with its result; where positions start and why is in sweep.workload.stream.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Protocol

from sweep.analysis.run_stats import RunStats
from sweep.core.types import WindowResult
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, Profile, Window
from sweep.workload.cache_model import SAMPLE, PrefixShape, predicted_hit_rate, prefix_shape
from sweep.workload.stream import (
    Requests,
    RequestStream,
    SessionStream,
    StreamExhausted,
    next_position,
    spec_at,
    view_from,
)

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
        self._shape: PrefixShape | None = None
        self.begin()

    def begin(self) -> None:
        """A configuration's ladder starts at stream position 0 (the same requests for every configuration)."""
        self.position = 0
        self.since_flush = 0  # requests sent since the server's cache was last emptied
        self._last: tuple[int, int] | None = None  # (concurrency, requests used) of the previous step

    def before_step(self, handle: ServerHandle, concurrency: int, window: Window,
                    arrival: ArrivalProcess | None) -> tuple[Requests, str | None]:
        """Flush the cache (window.flush_cache), then the step's view of the stream, its requests made ahead.

        Returns (requests, note): note says why the cache could not be emptied, None when it was (or is not asked).
        """
        note = None
        if window.flush_cache:
            note = self.driver.flush_cache(handle)
            if note is None:
                self.since_flush = 0
            else:
                log.warning("prefix cache not emptied before concurrency %d: %s", concurrency, note)
        view = view_from(self.specs, self.position)
        if isinstance(view, RequestStream | SessionStream) and not self.driver.simulated:
            view.prefetch(min(self._expected(concurrency, window, arrival), self.profile.workload.num_requests))
        return view, note

    def after_step(self, result: WindowResult, stats: RunStats) -> RunStats:
        """Advance the stream past what the window used; the stats with the predicted hit rate filled in."""
        used = len(result.records)
        predicted = predicted_hit_rate(self.shape(), self.since_flush + stats.n_warmup, stats.n_started)
        self.position = next_position(result.records, self.position)
        self.since_flush += used
        self._last = (result.concurrency, used)
        return replace(stats, cache_hit_rate_predicted=predicted)

    def shape(self) -> PrefixShape:
        """The workload's shared-prefix facts, over its first SAMPLE requests (made once)."""
        if self._shape is None:
            cap = self.specs.capacity if isinstance(self.specs, RequestStream) else None
            n = SAMPLE if cap is None else min(SAMPLE, cap)
            self._shape = prefix_shape(self.profile.workload, [spec_at(self.specs, i) for i in range(n)])
        return self._shape

    def _expected(self, concurrency: int, window: Window, arrival: ArrivalProcess | None) -> int:
        """Requests the step will likely send: the schedule's length (open loop), else scaled from the last step."""
        sched = arrival.schedule(window, self.profile.workload.seed, concurrency) if arrival is not None else None
        if sched is not None:
            return len(sched.offsets)
        if self._last is None:
            return window.warmup_requests + 2 * concurrency
        prev_c, prev_used = self._last
        return int(prev_used * concurrency / max(prev_c, 1) * HEADROOM) + concurrency


def refuse_short_dataset(profile: Profile, specs: Requests) -> None:
    """Open loop: every step's schedule is known, so a dataset too small for one ladder is refused before launch.

    (A closed loop's need depends on the server's speed: it is refused when it runs out, by StreamExhausted.)
    """
    cap = specs.capacity if isinstance(specs, RequestStream | SessionStream) else None
    if cap is None or not profile.arrival.open_loop:
        return
    scheds = (profile.step_arrival(c).schedule(profile.window, profile.workload.seed, c) for c in profile.ladder)
    need = sum(len(s.offsets) for s in scheds if s is not None)
    if need > cap:
        raise StreamExhausted(f"{profile.workload.dataset.path if profile.workload.dataset else 'the dataset'}: "
                              f"the dataset holds {cap} entries and one ladder's schedules send {need}; set "
                              "workload.replay: true to send entries again, or shorten the window or the ladder")
