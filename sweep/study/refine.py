"""Finding the boundary, not the ladder step: a final ladder that brackets its knee (a passing step below a
failing one) is bisected on the same warm server (profile section refine), each bisection a full judged window
(phase 'refine') that the ladder runs through its own climb (`WindowRun`); then the SLA boundary of all its windows
(sweep.analysis.boundary), which the ladder stores on the configuration's server_configs row.

The ladder hands this module what it needs as values and callables, so refine imports nothing of the ladder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweep.analysis.boundary import Boundary, estimate_boundary, window_sample
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.tiers import StoredRequest
from sweep.profile import SLA, Refine

REFINE_PHASE = "refine"

# One refinement window at a concurrency, run by the ladder on its warm server: the steps it completed, and why it
# stopped short (None when it completed).
WindowRun = Callable[[int], tuple[Sequence[LadderStep], str | None]]
RequestsOf = Callable[[int], Sequence[StoredRequest]]  # a stored run's requests, by run id


@dataclass(frozen=True)
class Refinement:
    """What refining one ladder gave: the windows it ran, the SLA boundary of every window, and a note for the
    configuration's stop_reason."""

    steps: tuple[LadderStep, ...]
    boundary: Boundary | None
    note: str


def step_bracket(steps: Sequence[LadderStep]) -> tuple[int, int] | None:
    """(passing, failing) concurrencies: the highest step passing the SLA with a failing step above it, and the
    lowest failing step above that; None when nothing passes or nothing above the highest pass fails."""
    ordered = sorted(steps, key=lambda s: s.concurrency)
    for i in reversed(range(len(ordered))):
        if not ordered[i].stats.passes_sla:
            continue
        above = [s.concurrency for s in ordered[i + 1:] if not s.stats.passes_sla]
        if above:
            return ordered[i].concurrency, above[0]
    return None


def next_concurrency(bracket: tuple[int, int], tolerance: float) -> int | None:
    """The bisection's next concurrency; None when the bracket is within `tolerance` of its passing concurrency
    (or no integer lies inside it)."""
    lo, hi = bracket
    if hi - lo <= 1 or hi - lo <= tolerance * lo:
        return None
    return (lo + hi) // 2


def refine(settings: Refine, sla: SLA, steps: Sequence[LadderStep], run_window: WindowRun,
           requests_of: RequestsOf) -> Refinement:
    """Bisect the bracket of `steps` with up to settings.max_steps more windows (`run_window`), then the SLA
    boundary of every window.

    A refinement window that cannot complete (the server died, a window aborted) ends the refinement; the
    ladder's own result stands, and the note says so.
    """
    note = ""
    ran: list[LadderStep] = []
    top = max((s.concurrency for s in steps), default=None)
    for _ in range(settings.max_steps):
        b = step_bracket([*steps, *ran])
        c = next_concurrency(b, settings.tolerance) if b is not None else None
        if c is None:
            break
        done, stopped = run_window(c)
        ran += done
        if stopped is not None or not done:
            note = f"; refinement stopped at concurrency {c}: {stopped or 'no window completed'}"
            break
    every = [*steps, *ran]
    boundary = boundary_of(sla, every, requests_of)
    b = step_bracket(every)
    if b is None:
        passing = [s.concurrency for s in every if s.stats.passes_sla]
        if passing and max(passing) == top:
            note += f"; not bracketed: passes at the top step; extend the ladder past {top}"
    else:
        note += f"; refined with {len(ran)} window(s): bracket {b[0]}–{b[1]}"
    if boundary is not None:
        note += (f"; SLA boundary c≈{boundary.concurrency:.1f} (95% CI {boundary.ci_low:.1f}–{boundary.ci_high:.1f}, "
                 f"{boundary.shape})")
    return Refinement(tuple(ran), boundary, note)


def boundary_of(sla: SLA, steps: Sequence[LadderStep], requests_of: RequestsOf) -> Boundary | None:
    """The SLA boundary of a configuration's stored windows (their requests read back from the store)."""
    windows = [window_sample(s.concurrency, requests_of(s.run_id), s.stats.window_s, s.stats.goodput_tps)
               for s in steps]
    return estimate_boundary(windows, sla) if windows else None
