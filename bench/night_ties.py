"""bench.night's same-winner rules (issue 29, "the same winner"): when two knees are within the window noise of each
other, measure again instead of trusting one noisy window (pure; bench.night runs them on the noisy landscape).

- Tie: sweep's own rule (sweep.analysis.significance.prob_higher < TIE_BELOW) on each knee's 95% interval as sweep
  computes it from the noisy ladder's windows (sweep.analysis.ladder_steps.ladder_knee: the knee re-chosen in every
  resample, widened by the window-to-window noise measured from the ladder's own passing windows).
- Screen ties: the real screen among the prior's survivors keeps its cut, and also every screened configuration tied
  with the screen's leader (it goes to the finals too).
- Tie-break re-measure: after the finals, the leader and every final tied with it are launched again and their knee
  window and the step above it are measured once more at full length; a load measured twice counts as the mean of
  its two windows (failing if either fails); each one's knee is the best pooled window; the winner is the best knee.
- Ties cap (`capped_ties`, the lean night): the screen ties measured again are at most N, the leader and the
  N - 1 tied ones closest to it by screen knee goodput; by the screen and the prior together
  (`capped_ties_by_prior`, ties_order "screen_and_prior"): the leader and the N - 1 of the best mean of their screen
  knee over the leader's and their prior goodput over the ties' largest.
- Probe screen (`probe`): instead of quarter-window ladders, each survivor gets one launch and one window at the
  prior's predicted knee load, `probe` x the full window long; the cut is the survivors of the best probe goodput (a
  probe failing its SLA counts 0; ties, and every probe failing, in the prior's order): `probe_cut`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.significance import TIE_BELOW, prob_higher
from sweep.study.tiebreak import leader_and_ties, recut_by


@dataclass(frozen=True)
class SameWinner:
    """The same-winner levers of one bench row: screening's minimum cut, screen ties to the finals, the finals'
    tie-break (`above`: the step above the knee measured again too); `screen_again`: the screen's ties measured again
    at full length, the cut taken by those windows (`recut`); `probe` (0: off): the survivors' screen is one window
    each at the prior's predicted knee load, `probe` x the full window long, the cut taken by those (`probe_cut`), in
    place of the quarter-window ladders (screen_ties and screen_again then have nothing to act on)."""

    min_keep: int = 1
    screen_ties: bool = False
    tiebreak: bool = False
    above: bool = False
    screen_again: bool = False
    probe: float = 0.0

    def name(self) -> str:
        parts = [f"min {self.min_keep}"] + (["screen ties"] if self.screen_ties else [])
        parts += ["screen ties measured again"] if self.screen_again else []
        if self.probe:
            parts.append(f"probe screen (one {self.probe:g} x 900 s window at the prior's knee step)")
        if self.tiebreak:
            parts.append("tie-break (knee window" + (" and the step above)" if self.above else ")"))
        return " + ".join(parts)


class Knee(NamedTuple):
    """A ladder's knee goodput and its 95% interval (None: unknown, the knee counts as exact)."""

    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Windows:
    """One ladder's windows as the bench sees them: (load, goodput when it passed the SLA, else None) in order."""

    steps: tuple[tuple[int, float | None], ...]

    def knee(self) -> tuple[int, float] | None:
        """The knee rule: the passing window of the highest goodput (the lower load on a tie)."""
        passing = [(c, g) for c, g in self.steps if g is not None]
        return max(passing, key=lambda cg: (cg[1], -cg[0])) if passing else None


def _config_knee(k: Knee) -> ConfigKnee:
    return ConfigKnee(0, k.value, 0.0, k.low, k.high, "final", "bench")


def tied(leader: Knee, other: Knee) -> bool:
    """Whether sweep's tie rule leaves `other` unranked below `leader` (P(leader > other) < TIE_BELOW)."""
    return prob_higher(_config_knee(leader), _config_knee(other)) < TIE_BELOW


def tied_with_leader(knees: dict[str, Knee]) -> list[str]:
    """The leader of `knees` and every key tied with it, best first ([] when none is tied with it)."""
    return leader_and_ties(list(knees), lambda k: _config_knee(knees[k]))  # the study's own rule


def recut(cut: list[str], ties: list[str], again: dict[str, float]) -> list[str]:
    """The screen's cut after its ties were measured again: the cut's members not tied keep their places; the tied
    ones (the leader among them) fill the rest, best full-length window first (`again`: key -> its goodput, 0 when
    the window failed)."""
    return recut_by(cut, [(k, again[k]) for k in ties], lambda k: k)  # the study's own rule


def remeasured_loads(first: Windows, above: bool = False) -> tuple[int, ...]:
    """The loads a tie-break measures again: the knee's (`above`: and the next load above it in the ladder)."""
    knee = first.knee()
    if knee is None:
        return ()
    higher = [c for c, _ in first.steps if c > knee[0]] if above else []
    return (knee[0], min(higher)) if higher else (knee[0],)


def pooled(first: Windows, again: Windows, loads: tuple[int, ...]) -> Windows:
    """The ladder with the loads in `loads` measured twice: each such load the mean of its two windows, failing if
    either fails; a load `again` did not reach keeps its one window."""
    second = dict(again.steps)
    out = []
    for c, g in first.steps:
        if c in loads and c in second:
            h = second[c]
            g = None if g is None or h is None else (g + h) / 2
        out.append((c, g))
    return Windows(tuple(out))


def probe_cut(order: list[str], goodput: dict[str, float], cut: int) -> list[str]:
    """The probe screen's cut: the `cut` keys of `order` (the prior's, best first) with the best probe goodput (0: the
    probe failed); equal goodputs, every probe failing among them, keep the prior's order."""
    return sorted(order, key=lambda k: -goodput[k])[:cut]  # stable: the prior's order breaks ties


def capped_ties(ties: list[str], knees: dict[str, float], most: int | None) -> list[str]:
    """search.screening.ties_max: of the leader and its ties (`ties`, the leader first), at most `most` measured again:
    the leader and the `most` - 1 tied ones closest to it by their screen knee goodput (`knees`), closest first; None:
    all of them, as given."""
    if most is None or len(ties) <= most:
        return ties
    leader = ties[0]
    closest = sorted(ties[1:], key=lambda k: abs(knees[leader] - knees[k]))  # stable: equal gaps keep their order
    return [leader, *closest[:most - 1]]


def capped_ties_by_prior(ties: list[str], knees: dict[str, float], prior: dict[str, float | None],
                         most: int | None) -> list[str]:
    """ties_order "screen_and_prior": of the leader and its ties (`ties`, the leader first), at most `most` measured
    again: the leader always, and the `most` - 1 others of the best score (s + p) / 2, best first, where s is a tie's
    screen knee goodput (`knees`) over the leader's and p its prior goodput (`prior`) over the largest prior goodput
    among `ties` (a tie without a prior value: p = s; a common bias of the prior cancels in p); None: all, as given."""
    if most is None or len(ties) <= most:
        return ties
    leader = ties[0]
    valued = [v for k in ties if (v := prior.get(k)) is not None]
    top = max(valued, default=0.0)

    def score(k: str) -> float:
        s = knees[k] / knees[leader] if knees[leader] > 0 else 0.0
        v = prior.get(k)
        return (s + (v / top if v is not None and top > 0 else s)) / 2

    ranked = sorted(ties[1:], key=lambda k: -score(k))  # stable: equal scores keep their order
    return [leader, *ranked[:most - 1]]
