"""Where a final ladder goes after its last step (issue 28 §2, §5), as pure choices the ladder runs on its warm server:

- Climbing on: a final ladder whose top step passes has not bracketed its knee (the goodput peak may lie higher).
  It climbs on, one window at a time, doubling the concurrency (capped at the profile's ladder_max and at twice the
  max_running_requests the server resolved) or, in an open-loop rate ladder, the offered rate (at most
  CLIMB_RATE_DOUBLINGS doublings past the ladder's top rate), until a step fails; refinement then bisects the
  bracket it found.
- Measuring again: a window the client's self-check flagged (client_bound) cannot be the knee; when it is the
  passing window with the highest goodput, its load is measured again (at most twice), and an unflagged pass there
  can be the knee (sweep.analysis.knee.flagged_peak).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sweep.analysis.knee import flagged_peak
from sweep.analysis.ladder_steps import LadderStep, step_points
from sweep.analysis.loads import load_words
from sweep.core.types import JSON, ServerConfig
from sweep.profile import Profile
from sweep.profile.phases import CLIMB_RATE_DOUBLINGS


@dataclass(frozen=True)
class NextWindow:
    """One more window of a ladder: its concurrency (a rate ladder's label: the top step's), its offered rate (req/s)
    in an open-loop rate ladder, and its phase."""

    concurrency: int
    rate: float | None
    phase: str

    def at(self) -> str:
        """Its load in a sentence: "concurrency 16", or "12.50 req/s" (sweep.analysis.loads)."""
        return load_words(self.concurrency, self.rate)


def resolved_max_running(server_info: Mapping[str, JSON]) -> int | None:
    """The server's own max_running_requests (/server_info: SGLang resolves it from the KV pool when unset), read as
    every knob of /server_info is (ServerConfig.from_mapping); None when it is missing or does not parse."""
    try:
        return ServerConfig.from_mapping(server_info).max_running_requests or None
    except ValueError:
        return None


def next_climb(profile: Profile, steps: Sequence[LadderStep], max_running: int | None) -> NextWindow | None:
    """The next window past a final ladder's top while its top window passes (module docstring); None when a window
    already fails at the top, or the cap is reached."""
    if not steps:
        return None
    top = max(steps, key=lambda s: s.load)
    if not top.stats.passes_sla:
        return None
    if profile.rate_ladder:
        rates = profile.ladder_rates
        if top.offered_rps is None or not rates or top.offered_rps >= max(rates) * 2 ** CLIMB_RATE_DOUBLINGS:
            return None
        return NextWindow(top.concurrency, round(top.offered_rps * 2, 6), top.phase)
    cap = profile.ladder_max if max_running is None else min(profile.ladder_max, 2 * max_running)
    if top.concurrency >= cap:
        return None
    return NextWindow(min(2 * top.concurrency, cap), None, top.phase)


def measure_again(steps: Sequence[LadderStep]) -> NextWindow | None:
    """The flagged peak's load, measured again in its own phase; None when the knee needs no second look."""
    i = flagged_peak(step_points(steps))
    if i is None:
        return None
    s = steps[i]
    return NextWindow(s.concurrency, s.offered_rps, s.phase)
