"""Final-ladder steps far from the prior's predicted knee run short windows (search.far_windows, issue 29).

The simulated prior (search.prior: sim) predicts each configuration's knee. A final ladder's step below
knee / factor or above knee x factor runs a window of measure_seconds x fraction: it draws the curve, it does not
decide the answer. The knee rule never picks a short window (sweep.analysis.ladder_steps.deciding); where the rule
would land on one if short windows decided (`knee_on_short`), that load is measured again at full length on the
same warm server before anything is concluded. Refinement windows, the soak and every step near the predicted knee
run the full window.

With far_windows.near "short" and the final ladder refined (refine.enabled), the steps near the predicted knee run
the short window too: the whole ladder (its climb included) only brackets the knee, and the refinement's full
windows decide it. The knee is not measured again before the refinement (its windows will be the full ones around
it); after it, a bracket end left on a short window is measured again at full length: the passing end by the rule
above, the failing end by `short_failing_end` (issue 29: a night of at most 6 GPU-hours).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweep.analysis.ladder_steps import LadderStep
from sweep.core.types import ServerConfig
from sweep.profile import FarWindows, Profile, Window
from sweep.profile.phases import refines

KneeGuess = Callable[[ServerConfig], "float | None"]  # a configuration -> the prior's predicted knee (None: none)


@dataclass(frozen=True)
class FarPlan:
    """One final ladder's windows: the full window, the short one, and the predicted knee they are judged by."""

    predicted_knee: float
    rule: FarWindows
    full: Window
    short: Window
    near_short: bool = False  # far_windows.near "short" on a refined ladder: every step short, the refinement decides

    def window_for(self, load: float) -> tuple[Window, bool]:
        """The window of a step at `load` and whether it is a short one."""
        if self.near_short or self.rule.far(load, self.predicted_knee):
            return self.short, True
        return self.full, False


def far_plan(profile: Profile, full: Window, predicted_knee: float | None, refine: bool = True) -> FarPlan | None:
    """The far-window plan of one final ladder (None: far windows off, no prediction, or a short window no shorter
    than the full one); `refine` False: the study does not refine this ladder (search.baseline_refine), so its steps
    near the knee run full whatever far_windows.near says."""
    rule = profile.search.far_windows
    if not rule.enabled or predicted_knee is None or predicted_knee <= 0 or rule.fraction >= 1:
        return None
    short = full.model_copy(update={"measure_seconds": full.measure_seconds * rule.fraction})
    return FarPlan(predicted_knee, rule, full, short, near_short=rule.near == "short" and refines(profile, "final") and refine)


def short_failing_end(steps: Sequence[LadderStep]) -> LadderStep | None:
    """The failing end of a refined ladder's bracket when only a short window measured it: the lowest failing window
    above the highest passing full-length one, where that load has no full-length window; None when the bracket's
    failing end is a full window, or there is no passing full window with a failing one above it."""
    full_pass = [s.load for s in steps if not s.short and s.stats.passes_sla]
    if not full_pass:
        return None
    top = max(full_pass)
    above = sorted((s for s in steps if s.load > top and not s.stats.passes_sla), key=lambda s: s.load)
    if not above:
        return None
    end = above[0]
    full_loads = {s.load for s in steps if not s.short}
    return end if end.short and end.load not in full_loads else None


def unrefined_near(steps: Sequence[LadderStep], far: FarPlan | None) -> list[LadderStep]:
    """A near-short ladder with no bracket to refine (it passed to its cap, or failed from its first step): its short
    windows near the predicted knee with no full window at their load, lowest first; near "full" would have run them
    full, and the knee rule must compare them at full length (a short window's goodput never decides)."""
    if far is None:
        return []
    full_loads = {s.load for s in steps if not s.short}
    near = {s.load: s for s in steps if s.short and s.load not in full_loads
            and not far.rule.far(s.load, far.predicted_knee)}
    return [near[x] for x in sorted(near)]
