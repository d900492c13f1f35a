"""The lean night (issue 29, session 13): the shipped rule with the three levers the interactive profile can turn on
for a night of at most 6 GPU-hours, on bench.night's noisy landscape; `make bench ARGS=night` prints its rows after
bench.night's tables (docs/bench-search.md, "The lean night").

The shipped rule (bench.night.shipped with SameWinner(screen_again=True, tiebreak=True): the prior's margin survivors,
a real quarter-window screen among them when more survive than the cut, the screen's ties measured again at full
length, the finals' tie-break) plus:

1. `near_knee` (search.screening.near_knee): a screen ladder skips its steps below the prior's predicted knee /
   FACTOR (far_windows.factor, 2.0) and climbs from the next step (sweep's saturation stop); when that first step
   fails, the skipped steps are measured downward, one window each on the same launch, until one passes. The screen
   knee is found on the steps measured. The predicted knee is the prior's under its latency error
   (bench.night_ladder.latency_error / predicted_knee, as the probe rows): a wrong prediction can start the ladder past
   the knee. No prediction: nothing is skipped.
2. `near_short` (search.far_windows.near: short): every coarse step of a final ladder runs a short (quarter) window,
   its climb included; the knee step is found on that ladder with short-window noise (the screen's: cv / sqrt(0.25)
   under BENCH_NIGHT_NOISE=sampling, the landscape's CV under mixed; noise salt 2), and the knee's goodput is then a
   fresh full-window draw at that step (salt 3: the refinement's full windows decide it). Bill: the short ladder,
   refinement as bench.night_ladder.refine_bill, and one full re-measure window a final (a bracket end left on a
   short window; the pessimistic bound). `far_fraction` (search.far_windows.fraction, 0.25 or 0.125): the short
   windows' length x the full window (their noise under sampling cv / sqrt(fraction), and their bill); the screen's
   stay quarters. The finals' tie-break as shipped, on the final's full windows (its knee step's): its knee interval
   is the short ladder's, scaled to the full window's knee.
3. `ties_max` (search.screening.ties_max): the screen's ties measured again are at most N, the leader and the N - 1
   tied ones closest to it by screen knee goodput (bench.night_ties.capped_ties; None: all, the shipped rule). A tie
   left out keeps its place in the cut (bench.night_ties.recut). `ties_order` "screen_and_prior": the leader and the
   N - 1 tied ones of the best (screen knee / the leader's + prior goodput / the ties' largest prior goodput) / 2
   (bench.night_ties.capped_ties_by_prior; the prior's values are bench.search_prior.prior_values, the margin
   step's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.night import (
    ALL_LEVERS,
    SEEDS,
    TABLE_HEAD,
    Outcome,
    run,
    run_finals,
    screen_again,
    space_best,
    space_of,
    summary,
    survivors,
    tiebreak,
    today,
)
from bench.night import main as night_main
from bench.night_ladder import (
    DRAIN_S,
    FULL_S,
    NOISE,
    QUARTER_S,
    SOAK_S,
    STARTUP_S,
    WARM_S,
    Ladder,
    climbed,
    ladder_of,
    latency_error,
    noisy_steps,
    predicted_knee,
    refine_bill,
    screen_ladder,
    window_s,
)
from bench.night_ties import SameWinner, capped_ties, capped_ties_by_prior, tied_with_leader
from bench.search_oracle import within
from bench.search_prior import CVS, VARIANTS, Landscape, prior_values

FACTOR = 2.0  # search.far_windows.factor
SHIPPED = SameWinner(screen_again=True, tiebreak=True)  # profiles/interactive.yaml's same-winner levers
TOL = 0.05


@dataclass(frozen=True)
class Lean:
    """One lean row: the shipped rule with near_knee (1), near: short (2) and ties_max (3)."""

    near_knee: bool = True
    near_short: bool = True
    ties_max: int | None = None
    ties_order: str = "screen"  # "screen": capped_ties; "screen_and_prior": capped_ties_by_prior
    far_fraction: float = 0.25  # far_windows.fraction: the short final ladders' windows, x FULL_S

    def name(self) -> str:
        parts = ["lean: shipped now"] + (["near_knee"] if self.near_knee else [])
        parts += ["far_windows.near short"] if self.near_short else []
        parts.append(f"ties_max {self.ties_max}" if self.ties_max is not None else "ties_max none")
        parts += [f"ties_order {self.ties_order}"] if self.ties_order != "screen" else []
        parts += [f"far_windows.fraction {self.far_fraction:g}"] if self.far_fraction != 0.25 else []
        return " + ".join(parts)


def short_cv(land: Landscape, fraction: float = QUARTER_S / FULL_S) -> float | None:
    """A window's CV, `fraction` x FULL_S long (a quarter: the screen's), under the NOISE model (None: the
    landscape's own)."""
    return land.cv / math.sqrt(fraction) if NOISE == "sampling" else None


def near_knee_ladder(land: Landscape, key: str, seed: int, predicted: int | None) -> Ladder:
    """One quarter-window screen ladder (salt 1, the screen's noise) that skips its steps below `predicted` / FACTOR:
    it climbs from the first step at or above that (saturation stop); when that step fails, the skipped steps are
    measured downward until one passes. Its knee is found on the steps measured."""
    steps = noisy_steps(land, key, seed, 1, short_cv(land))
    if not steps:
        return ladder_of([], land.flatten)
    start = 0 if predicted is None else next(
        (i for i, s in enumerate(steps) if s.concurrency >= predicted / FACTOR), len(steps) - 1)
    measured = climbed(steps[start:])
    if not measured[0].stats.passes_sla:
        for step in reversed(steps[:start]):
            measured.insert(0, step)
            if step.stats.passes_sla:
                break
    return ladder_of(measured, land.flatten)


def screen_bill(lad: Ladder) -> float:
    """GPU seconds of one screen ladder: a launch and its quarter windows, early stop on."""
    return STARTUP_S + sum(window_s(QUARTER_S, r, True) for _, r in lad.steps) if lad.steps else 0.0


def lean(land: Landscape, space: list[str], seed: int, variant: str, rule: Lean) -> Outcome:
    """The lean night on one seed's space with this prior."""
    kept, cut = survivors(land, space, seed, variant, SHIPPED.min_keep)
    if not kept:
        return today(land, space, seed)
    seconds, screened = 0.0, 0
    if len(kept) > cut:
        errs = latency_error(land, variant, seed)
        lads = {k: near_knee_ladder(land, k, seed, predicted_knee(land, k, errs[k])) if rule.near_knee
                else screen_ladder(land, k, seed) for k in kept}
        seconds += sum(screen_bill(lad) for lad in lads.values())
        screened = len(kept)
        ranked = sorted((k for k in kept if lads[k].knee is not None), key=lambda k: -(lads[k].knee or 0.0))
        ties = tied_with_leader({k: lads[k].interval() for k in ranked})
        knees = {k: lads[k].knee or 0.0 for k in ties}
        ties = (capped_ties_by_prior(ties, knees, prior_values(land, variant, seed), rule.ties_max)
                if rule.ties_order == "screen_and_prior" else capped_ties(ties, knees, rule.ties_max))
        kept = ranked[:cut]
        if ties:
            kept, bill = screen_again(land, seed, lads, kept, ties)
            seconds += bill
    top = space_best(land, space)
    if not rule.near_short:
        return run_finals(land, seed, kept, seconds, screened, variant, top, ALL_LEVERS, SHIPPED)
    return short_finals(land, seed, kept, seconds, screened, top, rule.far_fraction)


def full_knee(land: Landscape, key: str, seed: int, lad: Ladder) -> Ladder:
    """A short final ladder with its knee decided on a full window: the knee step's fresh full-window draw (salt 3)
    as its knee and as its only window (the one the tie-break pools); its interval scaled to that knee."""
    full = next(s.stats.goodput_tps or 0.0 for s in noisy_steps(land, key, seed, 3) if s.concurrency == lad.knee_c)
    knee = lad.knee or 0.0
    low, high = (None if b is None or knee <= 0 else b * full / knee for b in lad.ci)
    goodputs = tuple(full if c == lad.knee_c else None for c, _ in lad.steps)
    return Ladder(full, lad.knee_c, lad.steps, goodputs, (low, high))


def short_bill(lad: Ladder, fraction: float) -> float:
    """GPU seconds of one launch and its ladder of short windows, `fraction` x FULL_S each, early stop on
    (bench.night_ladder.ladder_bill's with every step short when `fraction` is a quarter)."""
    return STARTUP_S + sum(window_s(FULL_S * fraction, r, True) for _, r in lad.steps)


def short_finals(land: Landscape, seed: int, finals: list[str], seconds: float, screened: int,
                 top: float, fraction: float = QUARTER_S / FULL_S) -> Outcome:
    """bench.night.run_finals with far_windows.near short: every coarse step short (`fraction` x FULL_S, its noise
    short_cv's), the knee on a full window, one full re-measure a final billed; SGLang's defaults (the median final's
    bill), the soak and the tie-break."""
    best: tuple[float, str] | None = None
    bills = []
    ladders: dict[str, Ladder] = {}
    for k in finals:
        lad = ladder_of(climbed(noisy_steps(land, k, seed, 2, short_cv(land, fraction))), land.flatten)
        bills.append(short_bill(lad, fraction) + refine_bill(True) + window_s(FULL_S, 1.0, True))
        if lad.knee is None:
            continue
        ladders[k] = full_knee(land, k, seed, lad)
        knee = ladders[k].knee or 0.0
        if best is None or knee > best[0]:
            best = (knee, k)
    defaults = float(np.median(bills)) if bills else 0.0
    seconds += sum(bills) + defaults + STARTUP_S + WARM_S + SOAK_S + DRAIN_S
    extra, best = tiebreak(land, seed, ladders, best, True, False)
    seconds += extra
    hit = best is not None and within(land.truth[best[1]], top, TOL)
    return Outcome(hit, seconds, len(finals), screened)


LEAN_ROWS = (Lean(ties_max=2), Lean(ties_max=3), Lean(), Lean(near_knee=False, ties_max=2),
             Lean(near_short=False, ties_max=2), Lean(near_knee=False, ties_max=3),
             Lean(near_short=False, ties_max=3), Lean(near_knee=False), Lean(near_short=False),
             *(Lean(ties_max=n, ties_order="screen_and_prior", far_fraction=f) for n in (2, 3) for f in (0.25, 0.125)),
             Lean(far_fraction=0.125))


def run_lean(land: Landscape, variant: str, rule: Lean) -> dict[str, float]:
    """One lean row over the seeds: hits, GPU-hours (median, worst), finals and screened (medians)."""
    return summary([lean(land, space_of(land, seed), seed, variant, rule) for seed in range(SEEDS)])


def lean_lines(land: Landscape) -> list[str]:
    """The lean rows, a table after bench.night's (the same columns)."""
    lines = ["", "The lean night (bench.night_lean): the shipped rule (screen ties measured again + tie-break) with "
             "near_knee, far_windows.near short and ties_max:", "", *TABLE_HEAD]
    for cv in CVS:
        land.cv = cv
        base = run(land, None)
        for rule in LEAN_ROWS:
            for variant in VARIANTS:
                r = run_lean(land, variant, rule)
                lines.append(f"| {cv:.0%} | {rule.name()} | {variant} | {r['hits']}/{SEEDS} | {r['hours']:.1f} "
                             f"({r['max_hours']:.1f}) | {1 - r['hours'] / base['hours']:.0%} | {r['finals']:.0f} | "
                             f"{r['screened']:.0f} |")
    return lines


def main() -> int:
    return night_main(lean_lines)


if __name__ == "__main__":
    raise SystemExit(main())
