"""What the same-winner re-measures (issue 29) did, as the answer states it: the finals' tie-break (search.tie_break:
which configurations' knee loads were measured again, the winner by each configuration's first final windows alone,
and the winner by every window, a load measured twice counted as the mean of its windows) and the screen's ties
measured again (search.screening.ties: which, and which of them went on to the finals)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sweep.analysis.ladder_steps import ladder_phase
from sweep.core.types import JSON
from sweep.store import ConfigRecord, EnvironmentRecord, RunRecord
from sweep.views.read_model import config_knees, decide_winner, launch_steps, remeasured


@dataclass(frozen=True)
class TieBreak:
    """A tie-break re-measure as the answer reports it (configuration ids are the first final launch's)."""

    remeasured: tuple[int, ...]  # the configurations measured again, each at its knee's load
    first_winner: int | None  # the winner by the first final windows alone (before the re-measure)
    winner: int | None  # the winner by every window (the one winner rule)

    @property
    def changed(self) -> bool:
        """Whether the re-measure named another winner than the first windows alone."""
        return self.first_winner != self.winner

    def line(self, labels: Mapping[int, str]) -> str:
        """One line for the report and the terminal."""
        names = ", ".join(labels.get(c, str(c)) for c in self.remeasured)
        won = labels.get(self.winner, "none") if self.winner is not None else "none"
        first = labels.get(self.first_winner, "none") if self.first_winner is not None else "none"
        verdict = (f"it changed the winner from {first} to {won}" if self.changed
                   else f"it kept {won}, the winner of the first windows")
        return (f"tie-break: {names} were within each other's window noise after their final ladders; each one's "
                f"knee load was measured again at full length on a fresh launch, a load measured twice counting as "
                f"the mean of its windows: {verdict}")


def tie_break(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord], flatten_threshold: float,
              env: EnvironmentRecord, profile_raw: Mapping[str, JSON], winner: int | None) -> TieBreak | None:
    """The study's tie-break (None when no final was measured again); `winner`: the study's winner."""
    onto = remeasured(configs, launch_steps(configs, runs))
    if not onto:
        return None
    first_configs = [c for c in configs if c.id not in onto]
    first_runs = [r for r in runs if r.server_config_id not in onto]
    knees = config_knees(first_configs, first_runs, flatten_threshold)
    before = decide_winner(first_configs, first_runs, knees, env, profile_raw).winner
    return TieBreak(tuple(sorted(set(onto.values()))), before.id if before is not None else None, winner)


@dataclass(frozen=True)
class ScreenAgain:
    """The screen's ties measured again at full length, as the answer reports them (ids of their screen launches)."""

    remeasured: tuple[int, ...]  # the screened configurations measured again at their screen knee's load
    promoted: tuple[int, ...]  # those of them that then got a final ladder

    def line(self, labels: Mapping[int, str]) -> str:
        """One line for the report and the terminal."""
        names = ", ".join(labels.get(c, str(c)) for c in self.remeasured)
        went = ", ".join(labels.get(c, str(c)) for c in self.promoted) or "none of them"
        return (f"screen ties: {names} were within each other's window noise on the screen; each one's screen knee "
                f"load was measured again at full length on a fresh launch, and by those windows {went} went to the "
                "finals")


def screen_again(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord]) -> ScreenAgain | None:
    """The screen's ties measured again (a later screen launch of a configuration's knobs); None when none was."""
    steps = launch_steps(configs, runs)
    screens: dict[str, list[int]] = {}
    finals: set[str] = set()
    for c in sorted(configs, key=lambda c: c.id):
        ss = steps.get(c.id)
        if ss and ladder_phase(ss[0].phase) == "screen":
            screens.setdefault(c.config.key(), []).append(c.id)
        elif ss:
            finals.add(c.config.key())
    again = {key: ids[0] for key, ids in screens.items() if len(ids) > 1}
    if not again:
        return None
    return ScreenAgain(tuple(sorted(again.values())), tuple(sorted(i for k, i in again.items() if k in finals)))
