"""A screen ladder near the prior's predicted knee (search.screening.near_knee, issue 29).

With the simulated prior's predicted knee of a configuration, its screen ladder starts at its first step at or above
knee / far_windows.factor (sweep.profile.phases.near_knee_start): the steps far below the knee pass and do not rank,
so they are skipped. Where the prediction was too high, every step the ladder measured fails its SLA and nothing on
it is a knee; then the skipped steps are measured downward on the same warm server, one screen window each, until
one passes (`descend`). A window downward that fails its SLA, or in which every request failed, goes on down; one
that cannot complete (the server died, the dataset ran out) ends the descent and fails the configuration, as it
would in its ladder, and so does every request failing at the lowest step reached. The knee rule over the stored
windows is the ladder's own (sweep.analysis.ladder_steps.steps_knee): only which loads are measured changes.
"""

from __future__ import annotations

from collections.abc import Callable

from sweep.ladder.parts import Climb, LadderOutcome
from sweep.ladder.step_verdicts import step_words
from sweep.profile import Profile

OneWindow = Callable[[int], LadderOutcome]  # a concurrency -> the outcome of one screen window there


def descend(profile: Profile, climb: Climb, outcome: LadderOutcome, one_window: OneWindow) -> bool:
    """After a screen ladder that skipped steps (`climb.skipped`): note where it started and, where none of
    `outcome`'s steps passes, measure the skipped steps downward with `one_window` until one passes, adding its
    windows to `outcome` (module docstring). Whether the server can take another window."""
    if not climb.skipped:
        return True
    first = step_words(profile, climb.ladder[0])
    outcome.stop_reason += f"; started at {first} near the predicted knee {round(climb.predicted_knee or 0, 1):g}"
    if any(s.stats.passes_sla for s in outcome.steps):
        return True
    tried: list[str] = []
    for c in reversed(climb.skipped):
        scratch = one_window(c)
        outcome.steps += scratch.steps
        tried += [f"{step_words(profile, c)} ({'passes' if s.stats.passes_sla else 'fails'})" for s in scratch.steps]
        if not scratch.steps or scratch.steps[-1].stats.passes_sla:  # it passes, or the window did not complete
            break
    outcome.stop_reason += f"; {first} failed: measured {', '.join(tried) or 'nothing'} below it"
    if scratch.status != "completed":  # the server died, or every request failed at the lowest step measured
        outcome.status, outcome.failure = "failed", scratch.failure
        outcome.stop_reason += f" ({scratch.stop_reason})"
    return scratch.status == "completed"
