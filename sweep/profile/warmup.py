"""When a ladder step's measured window opens (issue 28 §1): the warm-up rule every driver applies.

A step starts at t0 (the cache flushed, no request in flight). Its measured window opens at the first moment when
all three conditions hold, and lasts measure_seconds from there:

- requests: `warmup_requests` requests have *completed* (ended: answered, failed, timed out); 0: met at t0.
- seconds: `warmup_seconds` have passed since t0.
- load: the step reached its load. Closed loop: every user has had a request in flight (the concurrency-th
  dispatch). Open loop: the arrivals ran one mean gap per user, `open_users` x the mean gap after t0 (see there).

The condition met last names how the window opened (`window_opened_by`: "requests", "seconds" or "load"; on a tie
the first of load, seconds, requests). A request sent (open loop: scheduled) before that moment is warm-up, one sent
at or after it is measured.

The bound: the warm-up always progresses (every request ends, by its timeout at the latest, and its user sends the
next; an open loop goes on sending), so warmup_requests is honoured however long it takes (issue 23 §11). The bound is
the latest it can take so: closed loop, ceil(warmup_requests / users) rounds (at least one: every user's first send)
of request_timeout_s (+ think time);
open loop, the warmup_requests-th send plus ceil(warmup_requests / in-flight cap) rounds of request_timeout_s; never
before warmup_seconds or the load. A warm-up not ended by then (its users stopped sending) opens the window there
anyway, "bound". The open loop's schedule runs to bound + measure_seconds, the latest its window can end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweep.profile.window import Window

__all__ = ["OPENED_BY", "WarmupRule", "open_users"]

# how a window opened: the warm-up condition met last, or the bound; ties go to the first of the first three
OPENED_BY = ("load", "seconds", "requests", "bound")


def open_users(concurrency: int, max_in_flight: int) -> int:
    """The users an open-loop step stands for: its concurrency label, at most its in-flight cap.

    An open loop's arrivals are read as the sum of `users` independent senders, each sending at rate/users: one mean
    gap of each sender is users / rate seconds, after which each has sent once on average, the open-loop form of
    "every closed-loop user has had a request in flight". The label is the concurrency the step stands for (a rate
    ladder's step, the soak's in-flight cap), and no more requests than the cap can be in flight at once."""
    return max(1, min(concurrency, max_in_flight))


@dataclass(frozen=True)
class WarmupRule:
    """One step's warm-up conditions (module doc): the moment its window opens, from when each condition was met."""

    requests: int  # completed requests the window waits for
    seconds: float  # seconds after t0 the window waits for
    load_sends: int  # closed loop: dispatches (one per user) the window waits for; 0: see load_s
    load_s: float  # open loop: seconds after t0 the arrivals need to run one mean gap per user
    bound: float  # the window opens at t0 + bound at the latest

    @classmethod
    def closed(cls, window: Window, users: int, load_sends: int, think_s: float = 0.0) -> WarmupRule:
        """A closed loop of `users` users whose load is reached at the load_sends-th dispatch (0: at t0, where a
        driver starts every user at once)."""
        rounds = max(1, math.ceil(window.warmup_requests / max(users, 1)))  # the load: every user's first send
        bound = max(window.warmup_seconds, rounds * (window.request_timeout_s + think_s))
        return cls(window.warmup_requests, window.warmup_seconds, load_sends, 0.0, bound)

    @classmethod
    def open(cls, window: Window, load_s: float, last_warmup_send: float, max_in_flight: int) -> WarmupRule:
        """An open loop whose arrivals reach their load `load_s` seconds after t0 and send their warmup_requests-th
        request `last_warmup_send` seconds after it."""
        rounds = math.ceil(window.warmup_requests / max(max_in_flight, 1))
        bound = max(window.warmup_seconds, load_s, last_warmup_send + rounds * window.request_timeout_s)
        return cls(window.warmup_requests, window.warmup_seconds, 0, load_s, bound)

    def due(self, t0: float, now: float, requests_at: float | None, load_at: float | None
            ) -> tuple[float, str] | None:
        """(when the window opened, the condition met last) if it opened by `now`; None while it has not.

        requests_at: when the warmup_requests-th request completed (None: not yet); load_at: when the load_sends-th
        dispatch went out (None: not yet); a condition that asks for nothing is met at t0."""
        marks = (("load", t0 + self.load_s if self.load_sends == 0 else load_at),
                 ("seconds", t0 + self.seconds),
                 ("requests", t0 if self.requests == 0 else requests_at))
        latest = t0 + self.bound
        met = [(t, by) for by, t in marks if t is not None]
        if len(met) == len(marks):
            at, by = met[0]
            for t, name in met[1:]:
                if t > at:
                    at, by = t, name
            if at <= min(now, latest):
                return at, by
        return (latest, "bound") if now >= latest else None

    def edges(self, t0: float) -> tuple[float, ...]:
        """The moments after t0 the window may open at without any request event (the time conditions, the bound):
        a driver that sleeps until the next event wakes at these too."""
        return t0 + self.seconds, t0 + self.load_s, t0 + self.bound
