"""The answer in one night (issue 29): today's interactive study against the new settings on the noisy landscape,
`make bench ARGS=night` (docs/bench-search.md holds the reading).

Landscape: bench.search_prior's (the search bench's 6 x 4 x 4 x 2 oracle, every ladder simulated once, window noise a
lognormal factor of mean 1 and CV 5% or 9% on goodput, seeded per (seed, configuration, step, measurement)). Each
seed draws its own 16-configuration space of the interactive profile's shape (4 max_running_requests x 2
mem_fraction_static x 2 chunked_prefill_size x 1 schedule_policy, out of the oracle's values): the exhaustive grid's
best is the best noiseless knee inside that space; a hit is a winner whose noiseless knee is within 5% of it.

Strategies (the bill in the interactive profile's real window lengths: warm-up 30 s, windows of 900 s, drain 60 s,
140 s a launch, the soak's hour):

- today: every configuration's ladder on quarter windows (225 s) with sweep's saturation stop; the best 25% (4 of
  16) by their noisy screened knee, then SGLang's defaults and those 4 on full ladders (fresh noise); the winner is
  the best noisy final knee; up to 3 refinement windows per final ladder; the soak.
- new: the prior (bench.search_prior's variants: exact, bias, bias+err7, bias+err15) ranks the space; what it puts
  within its error band of its leader (`BAND`) is kept, at least 2; kept <= 4: they are the finals, no real screen;
  more: a real quarter-window screen among them picks 4. Finals' steps far from the prior's predicted knee (below
  half or above twice its concurrency) run quarter windows; a noisy knee landing on one is measured again at full
  length. A failing window stops early, with no drain, after the share of its window `STOP_AT` gives for its SLA
  ratio (its worst P95 over its bound; docs/early-stop.md measured the stop times on the simulator), at least
  min_seconds; refinement windows half pass, half fail just over the bound (they stop late); the soak runs its hour
  (it never stops early). SGLang's defaults: one more ladder on the new windows.

Same-winner rows (bench.night_ties, issue 29): the shipped rule with screen ties sent to the finals or measured again
at full length (the cut then taken by those windows), a minimum of two finals, and the finals' tie-break (the tied
finals' knee loads measured again, a load measured twice counting as the mean of its windows), alone and combined.

The probe screen (rows "probe screen ... + tie-break", `SameWinner.probe`): the shipped rule's survivors, when more
survive than the cut, get no quarter-window ladders: each gets one launch and one window at the prior's predicted knee
load, `probe` x 900 s long (1.0 and 0.5), with early stop; the cut is the survivors of the best probe goodput (a
failing probe counts 0; every probe failing: the prior's order); then the finals and their tie-break as shipped now
(no re-measure of the screen's ties). Bill: STARTUP_S + window_s(900 x probe, that step's true SLA ratio, early) each.
Two things it models that the other rows need not:

1. The prior's knee step is not exact. `knee_concurrency` (the noiseless ladder's knee, used for the short windows
   above) is exact; a real prior errs on latency too. Per (seed, variant, configuration) the prior's latencies are the
   simulator's x e (`latency_error`): "exact" e = 1; "bias" e = 1/(1 - u), u the same U(0.10, 0.15) draw that makes
   prior_values' knee 10-15% low (its latencies over-predicted by as much); "+errN" e also x an independent lognormal
   of mean 1 and CV N% (its own seeded stream: a simulator's throughput and latency errors need not move together).
   The predicted knee step (`predicted_knee`) is the knee of the noiseless ladder run again with each step passing
   when its SLA ratio x e <= 1 (find_knee with the landscape's flatten threshold, the same saturation stop; each
   step's goodput the simulator's: the prior errs on latency only here); e = 1 gives the true knee. One step too high,
   the probe fails; too low, it measures below the knee: both undervalue the configuration. The probe's outcome is
   the truth: the step's noiseless pass/fail, and when it passes its noisy goodput (noise salt 6); a predicted step the
   noiseless ladder never reached (it stopped, saturated, before it) fails. With no predicted knee (e fails every
   step) the probe runs at the ladder's first step. The bench prints how often the predicted step is off.
2. A shorter window is noisier. Every other window in this bench, quarter or full, draws the same CV whatever its
   length. The probe's noise is drawn with CV = cv / sqrt(probe) (pessimistic: as if all of a window's noise were
   sampling noise), the same normal draw for both probe lengths (only its scale differs).

The ladders, their windows' bill and the prior's predicted knee step live in bench.night_ladder; bench.night_lean adds
the lean night's rows (near_knee, far_windows.near short, ties_max) after this bench's tables.

The defaults' own ladder is billed as the median final ladder (the landscape has no "defaults" configuration); it
cannot win here, so hits are the same with or without it.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench import write_result
from bench.night_ladder import (
    DRAIN_S,
    FULL_S,
    MIN_S,
    NOISE,
    ORACLE_S,
    QUARTER_S,
    SOAK_S,
    STARTUP_S,
    STOP_AT,
    WARM_S,
    Ladder,
    knee_concurrency,
    ladder_bill,
    latency_error,
    noisy_ladder,
    predicted_knee,
    probe_window,
    refine_bill,
    screen_ladder,
    window_s,
)
from bench.night_ties import (
    SameWinner,
    pooled,
    probe_cut,
    recut,
    remeasured_loads,
    tied_with_leader,
)
from bench.search_oracle import all_configs, bench_profile, load_or_simulate, truth, within
from bench.search_prior import CVS, VARIANTS, Landscape, prior_values
from sweep.core.types import ServerConfig
from sweep.profile.grid import grid

SEEDS = int(os.environ.get("BENCH_SEARCH_SEEDS", "20"))
KEEP, MIN_KEEP = 4, 2
# the prior's error band by variant: the per-configuration spread of the 10-15% bias (~6%) plus 2 x its error's CV
BAND = {"exact": 0.05, "bias": 0.06, "bias+err7": 0.20, "bias+err15": 0.36}
TOL = 0.05


def knee_step_errors(land: Landscape, variant: str, seeds: int, probed: bool = False) -> tuple[int, int, int]:
    """How often the prior's predicted knee step is off, over every feasible configuration of the seeds' spaces
    (`probed`: only the survivors the probe screen probes): (predicted lower, predicted higher or none, how many)."""
    low = high = n = 0
    for seed in range(seeds):
        errs = latency_error(land, variant, seed)
        space = space_of(land, seed)
        if probed:
            kept, cut = survivors(land, space, seed, variant, 1)
            space = kept if len(kept) > cut else []
        for k in space:
            true = knee_concurrency(land, k)
            if true is None:
                continue
            pred = predicted_knee(land, k, errs[k])
            n += 1
            low += pred is not None and pred < true
            high += pred is None or pred > true
    return low, high, n


def space_of(land: Landscape, seed: int) -> list[str]:
    """The seed's 16-configuration space of the interactive shape (4 x 2 x 2 x 1 of the oracle's values)."""
    rng = random.Random(f"space-{seed}")
    values: dict[str, list[Any]] = {k: list(v) for k, v in grid(bench_profile().search.space).items()}
    pick = {"max_running_requests": 4, "mem_fraction_static": 2, "chunked_prefill_size": 2, "schedule_policy": 1}
    chosen = [sorted(rng.sample(values[k], n)) for k, n in pick.items()]
    keys = [ServerConfig.from_mapping(dict(zip(pick, combo, strict=True))).key()
            for combo in itertools.product(*chosen)]
    return [k for k in keys if k in land.table]


@dataclass
class Outcome:
    hit: bool
    seconds: float
    finals: int
    screened: int


def today(land: Landscape, space: list[str], seed: int) -> Outcome:
    seconds = 0.0
    screened = {k: screen_ladder(land, k, seed) for k in space}
    for lad in screened.values():
        seconds += STARTUP_S + sum(window_s(QUARTER_S, r, False) for _, r in lad.steps) if lad.steps else 0.0
    ranked = sorted((k for k in space if screened[k].knee is not None), key=lambda k: -(screened[k].knee or 0.0))
    finals = ranked[:max(MIN_KEEP, KEEP)]
    return run_finals(land, seed, finals, seconds, len(space), None, space_best(land, space))


ALL_LEVERS = frozenset({"short", "early"})


def new(land: Landscape, space: list[str], seed: int, variant: str, levers: frozenset[str] = ALL_LEVERS) -> Outcome:
    """The new settings with this prior; `levers` ("short": short windows far from the predicted knee, "early":
    early stop) say which of the window levers are on (the prior as the screen always is)."""
    values = {k: v for k, v in prior_values(land, variant, seed).items() if k in space}
    feasible = {k: v for k, v in values.items() if v is not None}
    if not feasible:  # nothing the prior can rank: today's screening
        return today(land, space, seed)
    top = max(feasible.values())
    order = sorted(feasible, key=lambda k: -feasible[k])
    kept = [k for k in order if feasible[k] >= (1 - BAND[variant]) * top] or order[:1]
    kept = kept if len(kept) >= MIN_KEEP else order[:MIN_KEEP]
    seconds, screened = 0.0, 0
    if len(kept) > KEEP:  # the prior cannot rank them apart: a real quarter-window screen among them
        lads = {k: screen_ladder(land, k, seed) for k in kept}
        seconds += sum(STARTUP_S + sum(window_s(QUARTER_S, r, "early" in levers) for _, r in lad.steps)
                       for lad in lads.values() if lad.steps)
        screened = len(kept)
        kept = sorted((k for k in kept if lads[k].knee is not None), key=lambda k: -(lads[k].knee or 0.0))[:KEEP]
    return run_finals(land, seed, kept, seconds, screened, variant, space_best(land, space), levers)


SHIPPED_MARGIN, SHIPPED_KEEP = 0.15, 0.25  # profiles/interactive.yaml's search settings
# bench.night_ties' same-winner rules measured beside the shipped one (rows of the table): profiles/interactive.yaml
# ships SameWinner(screen_again=True, tiebreak=True) (the screen's ties measured again at full length, the finals'
# tie-break on the knee window); the last two, the probe screen in place of its screen (issue 29), are not shipped
SAME_WINNER = (SameWinner(screen_ties=True), SameWinner(screen_ties=True, tiebreak=True), SameWinner(min_keep=2),
               SameWinner(min_keep=2, screen_ties=True),
               SameWinner(min_keep=2, screen_ties=True, tiebreak=True, above=True),
               SameWinner(min_keep=2, screen_ties=True, tiebreak=True), SameWinner(screen_again=True),
               SameWinner(screen_again=True, tiebreak=True), SameWinner(probe=1.0, tiebreak=True),
               SameWinner(probe=0.5, tiebreak=True))


def survivors(land: Landscape, space: list[str], seed: int, variant: str, min_keep: int) -> tuple[list[str], int]:
    """The shipped rule's survivors (what the prior puts within SHIPPED_MARGIN of its leader, best first; [] when it
    ranks none) and screening's cut of them (the top SHIPPED_KEEP, at least `min_keep`)."""
    values = {k: v for k, v in prior_values(land, variant, seed).items() if k in space}
    feasible = {k: v for k, v in values.items() if v is not None}
    if not feasible:
        return [], 0
    top = max(feasible.values())
    kept = sorted((k for k in feasible if feasible[k] >= (1 - SHIPPED_MARGIN) * top), key=lambda k: -feasible[k])
    return kept, min(len(kept), max(min_keep, math.ceil(SHIPPED_KEEP * len(kept))))


def shipped(land: Landscape, space: list[str], seed: int, variant: str, rule: SameWinner = SameWinner()) -> Outcome:
    """The rule profiles/interactive.yaml ships (sweep.study.prior.needs_screen, Screening.kept): what the prior puts
    within SHIPPED_MARGIN of its leader survives; more survivors than screening's cut of them (the top 25%, at least
    1) get a real quarter-window screen among them, and that cut goes to the finals; both window levers on. `rule`:
    bench.night_ties' same-winner levers (the cut's minimum, screen ties to the finals, the finals' tie-break; `probe`:
    the survivors' screen is one probe window each at the prior's predicted knee step, `probe_window`)."""
    kept, cut = survivors(land, space, seed, variant, rule.min_keep)
    if not kept:
        return today(land, space, seed)
    seconds, screened = 0.0, 0
    if len(kept) > cut and rule.probe:  # the probe screen: one window each at the prior's predicted knee
        errs = latency_error(land, variant, seed)
        got: dict[str, float] = {}
        for k in kept:
            got[k], bill = probe_window(land, k, seed, predicted_knee(land, k, errs[k]), rule.probe)
            seconds += bill
        screened = len(kept)
        kept = probe_cut(kept, got, cut)
    elif len(kept) > cut:
        lads = {k: screen_ladder(land, k, seed) for k in kept}
        seconds += sum(STARTUP_S + sum(window_s(QUARTER_S, r, True) for _, r in lad.steps)
                       for lad in lads.values() if lad.steps)
        screened = len(kept)
        ranked = sorted((k for k in kept if lads[k].knee is not None), key=lambda k: -(lads[k].knee or 0.0))
        ties = tied_with_leader({k: lads[k].interval() for k in ranked}) if rule.screen_ties or rule.screen_again else []
        if rule.screen_again and ties:
            kept, bill = screen_again(land, seed, lads, ranked[:cut], ties)
            seconds += bill
        else:
            kept = ranked[:cut] + [k for k in ties if k not in ranked[:cut]]
    return run_finals(land, seed, kept, seconds, screened, variant, space_best(land, space), ALL_LEVERS, rule)


def screen_again(land: Landscape, seed: int, lads: dict[str, Ladder], cut: list[str],
                 ties: list[str]) -> tuple[list[str], float]:
    """Each tie's screen knee load measured again at full length on a launch (noise salt 5); (the cut recut by those
    windows, GPU seconds)."""
    again: dict[str, float] = {}
    seconds = 0.0
    for k in ties:
        windows = dict(noisy_ladder(land, k, seed, 5).windows().steps)
        again[k] = windows.get(lads[k].knee_c or 0) or 0.0
        seconds += STARTUP_S + window_s(FULL_S, dict(lads[k].steps)[lads[k].knee_c or 0], True)
    return recut(cut, ties, again), seconds


def space_best(land: Landscape, space: list[str]) -> float:
    """The exhaustive grid's answer: the best noiseless knee of the space."""
    return max(land.truth[k] for k in space)


def run_finals(land: Landscape, seed: int, finals: list[str], seconds: float, screened: int, variant: str | None,
            top: float, levers: frozenset[str] = frozenset(), rule: SameWinner = SameWinner()) -> Outcome:
    """Final ladders (the new settings when `variant` is given: short windows far from the predicted knee, early
    stop), SGLang's defaults, refinement and the soak; `rule.tiebreak`: the finals tied with the leader measured
    again (`tiebreak`); hit: the winner's noiseless knee within TOL of `top`."""
    early = "early" in levers
    best: tuple[float, str] | None = None
    bills = []
    ladders: dict[str, Ladder] = {}
    for k in finals:
        lad = noisy_ladder(land, k, seed, 2)
        short: set[int] = set()
        if "short" in levers and (pk := knee_concurrency(land, k)) is not None:
            short = {c for c, _ in lad.steps if c < pk / 2 or c > 2 * pk}
        bill = ladder_bill(lad, short, early)
        knee = lad.knee
        if knee is not None and lad.knee_c in short:  # the knee landed on a short window: measured again, full length
            knee = noisy_ladder(land, k, seed, 3).knee
            bill += window_s(FULL_S, 1.0, early)
        bills.append(bill + refine_bill(early))
        if knee is not None:
            ladders[k] = lad
        if knee is not None and (best is None or knee > best[0]):
            best = (knee, k)
    defaults = float(np.median(bills)) if bills else 0.0  # SGLang's defaults, measured as configuration 0
    seconds += sum(bills) + defaults + STARTUP_S + WARM_S + SOAK_S + DRAIN_S  # the soak: a launch and its hour
    if rule.tiebreak:
        extra, best = tiebreak(land, seed, ladders, best, early, rule.above)
        seconds += extra
    hit = best is not None and within(land.truth[best[1]], top, TOL)
    return Outcome(hit, seconds, len(finals), screened)


def tiebreak(land: Landscape, seed: int, ladders: dict[str, Ladder], best: tuple[float, str] | None,
              early: bool, above: bool) -> tuple[float, tuple[float, str] | None]:
    """The finals tied with the leader (bench.night_ties) each launched again, its knee window (`above`: and the
    step above it) measured once more at full length (fresh noise); (GPU seconds, the winner by the pooled knees)."""
    tied = tied_with_leader({k: lad.interval() for k, lad in ladders.items()})
    knees = {k: lad.knee or 0.0 for k, lad in ladders.items()}
    seconds = 0.0
    for k in tied:
        first, again = ladders[k], noisy_ladder(land, k, seed, 4)
        loads = remeasured_loads(first.windows(), above)
        ratios = dict(first.steps)
        seconds += STARTUP_S + sum(window_s(FULL_S, ratios[c], early) for c in loads)
        knee = pooled(first.windows(), again.windows(), loads).knee()
        knees[k] = knee[1] if knee is not None else 0.0
    if tied:
        winner = max(knees, key=lambda k: knees[k])
        best = (knees[winner], winner)
    return seconds, best


def run(land: Landscape, variant: str | None, levers: frozenset[str] = ALL_LEVERS,
        same: SameWinner | None = None) -> dict[str, Any]:
    """One row: every seed's study with today's settings (variant None) or the new ones with this prior (rule "band":
    the error-band rule above; with `same`: the interactive profile's margin and screening cut, `shipped`, with
    these same-winner levers)."""
    outs = []
    for seed in range(SEEDS):
        space = space_of(land, seed)
        if variant is None:
            outs.append(today(land, space, seed))
        elif same is not None:
            outs.append(shipped(land, space, seed, variant, same))
        else:
            outs.append(new(land, space, seed, variant, levers))
    return {"cv": land.cv, "variant": variant or "today", **summary(outs)}


TABLE_HEAD = ("| window CV | settings | prior | hits (winner within 5% of the space's best) | GPU-h of the study: median "
              "(worst seed) | saving vs today | finals (median) | configurations screened for real (median) |",
              "|---|---|---|---|---|---|---|---|")


def summary(outs: list[Outcome]) -> dict[str, float]:
    """A row's seeds in its table's figures: hits, GPU-hours (median, worst), finals and screened (medians)."""
    return {"hits": sum(o.hit for o in outs), "hours": float(np.median([o.seconds for o in outs])) / 3600,
            "max_hours": max(o.seconds for o in outs) / 3600, "finals": float(np.median([o.finals for o in outs])),
            "screened": float(np.median([o.screened for o in outs]))}


def main(more: Callable[[Landscape], list[str]] | None = None) -> int:
    """The bench's tables; `more`: lines a caller adds after them (bench.night_lean's rows), given the landscape."""
    t0 = time.perf_counter()
    profile = bench_profile()
    configs = all_configs(profile)
    table = load_or_simulate(profile, configs, ORACLE_S)
    flatten = profile.search.flatten_threshold
    land = Landscape(table, truth(table, flatten), flatten, [c.key() for c in configs])
    lines = [f"# bench night: {SEEDS} seeds, a 16-configuration interactive-shaped space per seed; screen noise "
             f"{NOISE} (BENCH_NIGHT_NOISE); windows "
             f"{WARM_S:g} + {FULL_S:g} + {DRAIN_S:g} s (quarter: {QUARTER_S:g} s), {STARTUP_S:g} s a launch, the soak "
             f"{SOAK_S:g} s; a failing window of SLA ratio r measures its stop_fraction(r) (STOP_AT {STOP_AT}), at least "
             f"{MIN_S:g} s", "",
             *TABLE_HEAD]
    for cv in CVS:
        land.cv = cv
        base = run(land, None)
        rows: list[tuple[str | None, frozenset[str], str, SameWinner | None]] = [(None, ALL_LEVERS, "today", None)]
        rows += [(v, ALL_LEVERS, "new", None) for v in VARIANTS]
        rows += [(v, ALL_LEVERS, "shipped (margin 0.15, cut 25%, min 1)", SameWinner()) for v in VARIANTS]
        rows += [(v, ALL_LEVERS, f"shipped, {same.name()}", same) for same in SAME_WINNER for v in VARIANTS]
        rows += [("bias+err7", frozenset(), "the prior alone", None),
                 ("bias+err7", frozenset({"short"}), "+ short windows", None),
                 ("bias+err7", frozenset({"early"}), "+ early stop", None)]
        for variant, levers, name, same in rows:
            r = base if variant is None else run(land, variant, levers, same)
            saving = "—" if variant is None else f"{1 - r['hours'] / base['hours']:.0%}"
            lines.append(f"| {cv:.0%} | {name} | {variant or 'none (screening)'} | "
                         f"{r['hits']}/{SEEDS} | {r['hours']:.1f} ({r['max_hours']:.1f}) | {saving} | "
                         f"{r['finals']:.0f} | {r['screened']:.0f} |")
    lines += ["", "The probe screen's predicted knee step (the prior's latencies x e, bench.night.predicted_knee) "
              "against the noiseless ladder's, every feasible configuration of the seeds' spaces:"]
    for v in VARIANTS:
        low, high, n = knee_step_errors(land, v, SEEDS)
        plow, phigh, pn = knee_step_errors(land, v, SEEDS, probed=True)
        lines.append(f"- prior {v}: off on {(low + high) / n:.1%} of {n} ({low} below the true knee step, {high} "
                     f"above it or none); of the {pn} survivors probed: {(plow + phigh) / max(pn, 1):.1%} ({plow} "
                     f"below, {phigh} above or none)")
    lines += more(land) if more is not None else []
    lines += ["", f"bench took {time.perf_counter() - t0:.0f} s"]
    text = "\n".join(lines)
    print(text)
    write_result("night", text + "\n", "docs/bench-search.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
