"""Whether each ladder step's warm-up outlasts a request (issue 28 §1): `sweep plan` warns of steps whose measured
window may open while the step's first requests are still in their synchronized start.

A step's window opens (sweep.profile.warmup) once warmup_requests requests completed, warmup_seconds passed and the
step reached its load (at the latest at the warm-up's bound). From the profile alone that takes about:

- closed loop: max(warmup_seconds, ceil(warmup_requests / concurrency) request latencies): the users all start at
  once, so the first completions come about one request latency after the start, one per user;
- open loop: max(the schedule's earliest opening: warmup_seconds, its load, the warmup_requests-th send; that send
  plus one request latency, when it waits for completions; at most the bound).

The request latency is the fastest plausible server's (sweep.views.footprint.request_seconds: its request, plus a
closed-loop user's think time): a warm-up shorter than that is too short on any server, so the warning never fires
for a warm-up that may be long enough. A warm-up that waits for completed requests lasts at
least one request, so the warning is about time-only warm-ups (warmup_requests 0) shorter than a request. The soak
(its rate follows the knee found) is not estimated.
"""

from __future__ import annotations

import math

from sweep.profile import Profile
from sweep.profile.phases import phase_window
from sweep.profile.window import Window
from sweep.views.footprint import request_seconds

__all__ = ["warmup_seconds", "warmup_warnings"]


def warmup_seconds(prof: Profile, window: Window, concurrency: int) -> float:
    """About how long the warm-up of one ladder step lasts, seconds (module doc)."""
    latency = request_seconds(prof)
    n = window.warmup_requests
    sched = prof.step_arrival(concurrency).schedule(window, prof.workload.seed, concurrency)
    if sched is None:
        return max(window.warmup_seconds, math.ceil(n / max(concurrency, 1)) * latency)
    sent = float(sched.offsets[min(n, len(sched.offsets)) - 1]) if n and len(sched.offsets) else 0.0
    return min(max(sched.earliest, sent + latency if n else 0.0), sched.warmup.bound)


def warmup_warnings(prof: Profile) -> list[str]:
    """One line per group of ladder steps whose warm-up is shorter than a request (module doc); [] when none."""
    latency = request_seconds(prof)
    phases = ("screen", "final") if prof.search.screening.enabled else ("final",)
    by_est: dict[tuple[str, float], list[int]] = {}
    for phase in phases:
        window = phase_window(prof, phase)
        for c in prof.ladder:
            if (est := warmup_seconds(prof, window, c)) < latency:
                by_est.setdefault((phase, round(est, 1)), []).append(c)
    groups: dict[tuple[float, tuple[int, ...]], list[str]] = {}
    for (phase, est), cs in by_est.items():
        groups.setdefault((est, tuple(cs)), []).append(phase)
    return [f"warning: {prof.name} c={', '.join(map(str, cs))} ({' and '.join(ph)} windows): the warm-up takes about "
            f"{est:,.1f} s, less than one request ({latency:,.2f} s on the fastest plausible server), so the window "
            "may open on the step's first burst: set window.warmup_requests (default 100) or a longer "
            "window.warmup_seconds" for (est, cs), ph in groups.items()]
