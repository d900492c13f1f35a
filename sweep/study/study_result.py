"""What a search returns and what it spends: its result (every ladder, the finals, the defaults, the tie-break
re-measures), its time budget, and successive halving's cut of a screen (sweep.study.search runs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sweep.ladder.runner import LadderOutcome
from sweep.profile import Screening


@dataclass
class Budget:
    """The search's time budget: its limit, when the search started and what each trial took."""

    limit_s: float | None
    started: float
    clock: Callable[[], float]
    durations: list[float] = field(default_factory=list)

    def left(self) -> float | None:
        """Seconds of the budget left; None without a budget."""
        return None if self.limit_s is None else self.limit_s - (self.clock() - self.started)

    def trial_s(self) -> float:
        """What the longest trial so far took (0 before any)."""
        return max(self.durations) if self.durations else 0.0


@dataclass
class StudyResult:
    outcomes: list[LadderOutcome] = field(default_factory=list)  # every trial of this process (screen or final)
    finals: list[LadderOutcome] = field(default_factory=list)  # long-window ladders of promoted configurations
    baseline: LadderOutcome | None = None  # SGLang's own defaults (every knob unset), measured first by this process
    tiebreaks: list[LadderOutcome] = field(default_factory=list)  # knee loads measured again (search.tie_break)
    stopped_reason: str = ""

    def winner(self) -> LadderOutcome | None:
        """The feasible configuration with the highest knee goodput (among final measurements when screening)."""
        pool = self.finals or self.outcomes
        feasible = [o for o in pool if o.value is not None]
        return max(feasible, key=lambda o: o.value or 0.0) if feasible else None


def promoted(values: list[tuple[dict[str, Any], float]], screening: Screening) -> list[dict[str, Any]]:
    """Successive halving's cut (`Screening.kept`) of the feasible screened configurations, best first."""
    ranked = sorted(values, key=lambda pv: -pv[1])
    n = screening.kept(len(ranked))
    seen: list[dict[str, Any]] = []
    for params, _ in ranked:
        if params not in seen:
            seen.append(params)
        if len(seen) >= n:
            break
    return seen
