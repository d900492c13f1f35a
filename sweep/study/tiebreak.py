"""The same winner (issue 29): knees the data cannot rank apart are measured again before one wins.

Two levers, each off by default (profiles/interactive.yaml turns both on; docs/bench-search.md, "The same winner",
measured them):

- search.screening.ties: the screen's leader and every screened configuration that the report's tie rule
  (sweep.analysis.significance: P(leader > it) < TIE_BELOW on their knee intervals) cannot rank below it are
  launched again and their screen knee's load measured once more at full length (a screen window of its own); the
  cut to the finals is then taken among them by those full-length windows (`recut`), the cut's other members kept;
  search.screening.ties_max caps how many: the leader and the ties closest to it, by their screen knee goodput or
  (ties_order screen_and_prior) by the screen and the prior's simulated goodput together (`closeness`).
- search.tie_break: after the final ladders, the leader and every final tied with it under the same rule are
  launched again, and each one's knee load is measured once more at full length (LadderRunner.run_again). The
  windows are stored as final windows like any other; the read model joins them to the configuration's first final
  launch and counts a load measured twice as the mean of its windows (sweep.analysis.ladder_steps.pooled), and the
  one winner rule decides on that.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.significance import TIE_BELOW, prob_higher
from sweep.core.types import ServerConfig
from sweep.store import Store
from sweep.views.read_model import read_study


@dataclass(frozen=True)
class Measured:
    """A configuration of the study and its knee in one phase (screen or final), from the store."""

    config: ServerConfig
    knee: ConfigKnee


KneesOf = Callable[[str], list[Measured]]  # a phase (screen | final) -> the completed configurations' knees in it


def study_knees(store: Store, study_id: int) -> KneesOf:
    """The study's knees by phase, read from the store each time (every worker's ladders count)."""

    def knees(phase: str) -> list[Measured]:
        model = read_study(store, study_id)
        done = {c.id: c.config for c in model.configs if c.status == "completed"}
        return [Measured(done[i], k) for i, k in model.knees.items() if k.phase == phase and i in done]

    return knees


T = TypeVar("T")


def leader_and_ties(items: Sequence[T], knee: Callable[[T], ConfigKnee], most: int | None = None,
                    prior_of: Callable[[T], float | None] | None = None) -> list[T]:
    """The leader of `items` (highest knee goodput) and every item the tie rule cannot rank below it, leader first,
    the ties by knee goodput (closest to the leader first); at most `most` of them in all (search.screening.ties_max:
    the leader and the `most` - 1 ties closest to it; None: every one); [] when none is tied with it. With `prior_of`
    (an item's simulated knee goodput: search.screening.ties_order screen_and_prior) a cap that leaves ties out
    fills its places by `closeness` instead. The study's rule (`tied_with_leader`) and bench.night's noisy landscape
    share it."""
    if len(items) < 2:
        return []
    order = sorted(items, key=lambda m: -knee(m).goodput_tps)
    ties = [m for m in order[1:] if prob_higher(knee(order[0]), knee(m)) < TIE_BELOW]
    if most is not None and prior_of is not None and len(ties) + 1 > most:
        score = closeness(order[0], ties, knee, prior_of)
        ties = sorted(ties, key=lambda m: -score(m))
    return [order[0], *ties][:most] if ties else []


def closeness(leader: T, ties: Sequence[T], knee: Callable[[T], ConfigKnee],
              prior_of: Callable[[T], float | None]) -> Callable[[T], float]:
    """A tie's closeness to the leader by the screen and the prior together: the mean of its screen knee goodput
    over the leader's and its simulated knee goodput over the best simulated among the leader and the ties (a common
    bias of the prior cancels); where the prior has no value for it, the screen ratio alone."""
    sims = [v for v in (prior_of(m) for m in [leader, *ties]) if v is not None and v > 0]
    top_sim = max(sims, default=None)
    lead = knee(leader).goodput_tps or 1.0

    def score(m: T) -> float:
        s = knee(m).goodput_tps / lead
        p = prior_of(m)
        return s if p is None or top_sim is None else (s + p / top_sim) / 2

    return score


def tied_with_leader(measured: Sequence[Measured], most: int | None = None,
                     prior_of: Callable[[ServerConfig], float | None] | None = None) -> list[Measured]:
    """The leader (highest knee goodput) and every configuration the tie rule cannot rank below it, leader first,
    at most `most` in all, a cap filled by the screen and the prior together where `prior_of` is given
    (`leader_and_ties`); [] when none is tied with it."""
    by_prior = None if prior_of is None else (lambda m: prior_of(m.config))
    return leader_and_ties(measured, lambda m: m.knee, most, by_prior)


def recut_by(cut: Sequence[T], again: Sequence[tuple[T, float]], key: Callable[[T], Hashable]) -> list[T]:
    """The screen's cut once its ties were measured again (`again`: each tied item and its full-length window's
    goodput, 0 when it failed; `key`: what makes two items one configuration): the cut's members not tied keep their
    places, the tied ones fill the rest, best window first."""
    tied = {key(p) for p, _ in again}
    fixed = [p for p in cut if key(p) not in tied]
    best = [p for p, _ in sorted(again, key=lambda pv: -pv[1])]
    return [*fixed, *best[:len(cut) - len(fixed)]]


def recut(cut: Sequence[dict[str, Any]], again: Sequence[tuple[dict[str, Any], float]]) -> list[dict[str, Any]]:
    """`recut_by` over trial parameters, one configuration per ServerConfig key."""
    return recut_by(cut, again, lambda params: ServerConfig.of(params).key())
