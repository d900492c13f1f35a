"""Finding the boundary, not the ladder step: a final ladder that brackets its knee (a passing step below a
failing one) is bisected on the same warm server (profile section refine): its concurrency, or for an open-loop rate
ladder (arrival.rates) its offered rate (req/s), each bisection a full judged window
(phase 'refine') that the ladder runs through its own climb (`WindowRun`); then the SLA boundary of all its windows
(sweep.analysis.boundary), which the ladder stores on the configuration's server_configs row.

The ladder hands this module what it needs as values and callables, so refine imports nothing of the ladder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweep.analysis.boundary import Boundary, estimate_boundary, steps_windows
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.tiers import StoredRequest
from sweep.profile import SLA, Refine

REFINE_PHASE = "refine"

# One refinement window at a load (a concurrency, or an open-loop rate ladder's offered req/s), run by the ladder on
# its warm server: the steps it completed, and why it stopped short (None when it completed).
WindowRun = Callable[[float], tuple[Sequence[LadderStep], str | None]]
RequestsOf = Callable[[int], Sequence[StoredRequest]]  # a stored run's requests, by run id


@dataclass(frozen=True)
class Refinement:
    """What refining one ladder gave: the windows it ran, the SLA boundary of every window, and a note for the
    configuration's stop_reason."""

    steps: tuple[LadderStep, ...]
    boundary: Boundary | None
    note: str


def step_bracket(steps: Sequence[LadderStep]) -> tuple[float, float] | None:
    """(passing, failing) loads (LadderStep.load: concurrency, or offered req/s in a rate ladder): the highest step
    passing the SLA with a failing step above it, and the lowest failing step above that; None when nothing passes
    or nothing above the highest pass fails."""
    ordered = sorted(steps, key=lambda s: s.load)
    for i in reversed(range(len(ordered))):
        if not ordered[i].stats.passes_sla:
            continue
        above = [s.load for s in ordered[i + 1:] if not s.stats.passes_sla]
        if above:
            return ordered[i].load, above[0]
    return None


def next_concurrency(bracket: tuple[float, float], tolerance: float) -> int | None:
    """The bisection's next concurrency; None when the bracket is within `tolerance` of its passing concurrency
    (or no integer lies inside it)."""
    lo, hi = int(bracket[0]), int(bracket[1])
    if hi - lo <= 1 or hi - lo <= tolerance * lo:
        return None
    return (lo + hi) // 2


def next_rate(bracket: tuple[float, float], tolerance: float) -> float | None:
    """The bisection's next offered rate (req/s) of an open-loop rate ladder: the bracket's midpoint; None when the
    bracket is within `tolerance` of its passing rate."""
    lo, hi = bracket
    if hi - lo <= tolerance * lo:
        return None
    return round((lo + hi) / 2, 6)


def refine(settings: Refine, sla: SLA, steps: Sequence[LadderStep], run_window: WindowRun,
           requests_of: RequestsOf, by_rate: bool = False, rates_field: str = "arrival.rates") -> Refinement:
    """Bisect the bracket of `steps` with up to settings.max_steps more windows (`run_window`), then the SLA
    boundary of every window. `by_rate`: the steps are an open-loop rate ladder's, bisected by offered rate (req/s);
    `rates_field` is the profile field that ladder comes from (arrival.rates, or a trace's arrival.scales), named
    when the top step passes.

    A refinement window that cannot complete (the server died, a window aborted) ends the refinement; the
    ladder's own result stands, and the note says so.
    """
    note = ""
    ran: list[LadderStep] = []
    top = max((s.load for s in steps), default=None)
    at = _rate_text if by_rate else _concurrency_text
    bisect = next_rate if by_rate else next_concurrency
    for _ in range(settings.max_steps):
        b = step_bracket([*steps, *ran])
        c = bisect(b, settings.tolerance) if b is not None else None
        if c is None:
            break
        done, stopped = run_window(c)
        ran += done
        if stopped is not None or not done:
            note = f"; refinement stopped at {at(c)}: {stopped or 'no window completed'}"
            break
    every = [*steps, *ran]
    boundary = boundary_of(sla, every, requests_of)
    b = step_bracket(every)
    if b is None:
        passing = [s.load for s in every if s.stats.passes_sla]
        if passing and max(passing) == top and by_rate:
            note += f"; not bracketed: passes at the top step; extend {rates_field} past {top:g} req/s"
        elif passing and max(passing) == top:
            note += f"; not bracketed: passes at the top step; extend the ladder past {top:g}"
    elif by_rate:
        note += f"; refined with {len(ran)} window(s): bracket {b[0]:.2f}–{b[1]:.2f} req/s"
    else:
        note += f"; refined with {len(ran)} window(s): bracket {b[0]:g}–{b[1]:g}"
    if b is not None and "refinement stopped" not in note and bisect(b, settings.tolerance) is not None:
        note += (f"; refinement stopped above its tolerance: the bracket is {b[1] / b[0] - 1:.0%} of its passing "
                 f"load wide after refine.max_steps ({settings.max_steps}) windows, tolerance {settings.tolerance:.0%}")
    if boundary is not None and by_rate:
        note += (f"; SLA boundary at {boundary.concurrency:.2f} req/s (95% CI {boundary.ci_low:.2f}–"
                 f"{boundary.ci_high:.2f}, {boundary.shape})")
    elif boundary is not None:
        note += (f"; SLA boundary c≈{boundary.concurrency:.1f} (95% CI {boundary.ci_low:.1f}–{boundary.ci_high:.1f}, "
                 f"{boundary.shape})")
    return Refinement(tuple(ran), boundary, note)


def _concurrency_text(load: float) -> str:
    return f"concurrency {load:g}"


def _rate_text(load: float) -> str:
    return f"{load:g} req/s"


def boundary_of(sla: SLA, steps: Sequence[LadderStep], requests_of: RequestsOf) -> Boundary | None:
    """The SLA boundary of a configuration's stored windows (their requests read back from the store)."""
    return estimate_boundary(steps_windows(steps, requests_of), sla) if steps else None
