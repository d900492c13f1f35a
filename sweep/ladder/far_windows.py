"""Final-ladder steps far from the prior's predicted knee run short windows (search.far_windows, issue 29).

The simulated prior (search.prior: sim) predicts each configuration's knee. A final ladder's step below
knee / factor or above knee x factor runs a window of measure_seconds x fraction: it draws the curve, it does not
decide the answer. The knee rule never picks a short window (sweep.analysis.ladder_steps.deciding); where the rule
would land on one if short windows decided (`knee_on_short`), that load is measured again at full length on the
same warm server before anything is concluded. Refinement windows, the soak and every step near the predicted knee
run the full window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sweep.core.types import ServerConfig
from sweep.profile import FarWindows, Profile, Window

KneeGuess = Callable[[ServerConfig], "float | None"]  # a configuration -> the prior's predicted knee (None: none)


@dataclass(frozen=True)
class FarPlan:
    """One final ladder's windows: the full window, the short one, and the predicted knee they are judged by."""

    predicted_knee: float
    rule: FarWindows
    full: Window
    short: Window

    def window_for(self, load: float) -> tuple[Window, bool]:
        """The window of a step at `load` and whether it is a short one."""
        return (self.short, True) if self.rule.far(load, self.predicted_knee) else (self.full, False)


def far_plan(profile: Profile, full: Window, predicted_knee: float | None) -> FarPlan | None:
    """The far-window plan of one final ladder (None: far windows off, no prediction, or a short window no shorter
    than the full one)."""
    rule = profile.search.far_windows
    if not rule.enabled or predicted_knee is None or predicted_knee <= 0 or rule.fraction >= 1:
        return None
    short = full.model_copy(update={"measure_seconds": full.measure_seconds * rule.fraction})
    return FarPlan(predicted_knee, rule, full, short)
