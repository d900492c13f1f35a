"""Finding the boundary, not the ladder step: a final ladder that brackets its knee (a passing step below a
failing one) is bisected on the same warm server (profile section refine), each bisection a full judged window
(phase 'refine') through the ladder's own climb; then the SLA boundary of all its windows (sweep.analysis.boundary)
is stored on its server_configs row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sweep.analysis.boundary import Boundary, estimate_boundary, window_sample
from sweep.analysis.ladder_steps import LadderStep
from sweep.core.types import ServerConfig
from sweep.launchers.base import ServerHandle

if TYPE_CHECKING:
    from sweep.study.ladder import Climb, LadderOutcome, LadderRunner

REFINE_PHASE = "refine"


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


def refine(runner: LadderRunner, handle: ServerHandle, config: ServerConfig, config_id: int, climb: Climb,
           outcome: LadderOutcome) -> None:
    """Bisect `outcome`'s bracket with up to refine.max_steps more windows on `handle`, then store its boundary.

    A refinement window that cannot complete (the server died, a window aborted) ends the refinement; the
    ladder's own result stands, and its stop_reason says so.
    """
    ref = runner.profile.refine
    note = ""
    ran = 0
    top = max((s.concurrency for s in outcome.steps), default=None)
    for _ in range(ref.max_steps):
        b = step_bracket(outcome.steps)
        c = next_concurrency(b, ref.tolerance) if b is not None else None
        if c is None:
            break
        scratch = runner.refine_window(handle, config, config_id, c, climb.window)
        outcome.steps += scratch.steps
        ran += len(scratch.steps)
        if scratch.status != "completed" or not scratch.steps:
            note = f"; refinement stopped at concurrency {c}: {scratch.failure or scratch.stop_reason}"
            break
    outcome.boundary = boundary_of(runner, outcome.steps)
    b = step_bracket(outcome.steps)
    if b is None:
        passing = [s.concurrency for s in outcome.steps if s.stats.passes_sla]
        if passing and max(passing) == top:
            note += f"; not bracketed: passes at the top step; extend the ladder past {top}"
    else:
        note += f"; refined with {ran} window(s): bracket {b[0]}–{b[1]}"
    if outcome.boundary is not None:
        bd = outcome.boundary
        note += (f"; SLA boundary c≈{bd.concurrency:.1f} (95% CI {bd.ci_low:.1f}–{bd.ci_high:.1f}, {bd.shape})")
        runner.store.update_server_config(config_id, boundary_concurrency=bd.concurrency, boundary_ci_low=bd.ci_low,
                                          boundary_ci_high=bd.ci_high, boundary_shape=bd.shape)
    outcome.stop_reason += note


def boundary_of(runner: LadderRunner, steps: Sequence[LadderStep]) -> Boundary | None:
    """The SLA boundary of a configuration's stored windows (their requests read back from the store)."""
    windows = [window_sample(s.concurrency, [r.judged() for r in runner.store.requests_for_run(s.run_id)],
                             s.stats.window_s, s.stats.goodput_tps) for s in steps]
    return estimate_boundary(windows, runner.profile.sla) if windows else None
