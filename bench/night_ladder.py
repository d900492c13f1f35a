"""bench.night's ladders and windows on the noisy landscape (issue 29): one configuration's noisy ladder as sweep
runs it (its steps, saturation stop, knee and the knee's interval), the GPU seconds of its windows (warm-up, measure,
drain; a failing one stopped early), and the prior's predicted knee step under its latency error with the probe window
it aims. bench.night's docstring describes the landscape and the noise; its rules (today, new, shipped) and
bench.night_lean's run on these."""

from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import dataclass

import numpy as np

from bench.night_ties import Knee, Windows
from bench.search_prior import NOISY, Landscape
from sweep.analysis.knee import find_knee
from sweep.analysis.ladder_steps import LadderStep, ladder_knee, step_points
from sweep.analysis.run_stats import RunStats
from sweep.ladder.step_verdicts import saturated

ORACLE_S = 30.0  # the oracle's simulated windows (bench.search_prior's BENCH_PRIOR_WINDOW_S)
WARM_S, FULL_S, DRAIN_S, STARTUP_S, SOAK_S = 30.0, 900.0, 60.0, 140.0, 3600.0
QUARTER_S = FULL_S / 4
MIN_S = 60.0  # window.early_stop.min_seconds
# (SLA ratio of a failing window, the share of its 900 s it measured before it stopped): docs/early-stop.md's
# medians at bounds of 0.9, 0.8 and 0.5 x the load's P95 (ratios 1.11, 1.25, 2.0), the slower of its two loads
# (316, 157 and 61 s of 900 at c=40; 186, 79 and 60 s at c=64); past the last, its share
STOP_AT: tuple[tuple[float, float], ...] = ((1.11, 0.35), (1.25, 0.17), (2.0, 0.07))
REFINE = 3  # refinement windows of a final ladder


@dataclass(frozen=True)
class Ladder:
    """One noisy ladder as run: its knee (goodput, concurrency; None: none passes) and each step's (concurrency,
    SLA ratio: its worst P95 over its bound, <= 1 passes)."""

    knee: float | None
    knee_c: int | None
    steps: tuple[tuple[int, float], ...]
    goodputs: tuple[float | None, ...] = ()  # each step's noisy goodput, None where it failed the SLA
    ci: tuple[float | None, float | None] = (None, None)  # the knee's 95% interval as sweep computes it (ladder_knee)

    def interval(self) -> Knee:
        """The knee with its interval, as bench.night_ties compares knees."""
        return Knee(self.knee or 0.0, *self.ci)

    def windows(self) -> Windows:
        """The steps as bench.night_ties reads them: (concurrency, goodput of a passing step)."""
        return Windows(tuple((c, g) for (c, _), g in zip(self.steps, self.goodputs, strict=True)))


def noisy_ladder(land: Landscape, key: str, seed: int, salt: int, cv: float | None = None,
                 latency: float = 1.0) -> Ladder:
    """Landscape.noisy_ladder with its steps, the noise drawn per measurement (`salt`: screen, final, again; `cv`:
    the windows' CV when not the landscape's, the same seeded draws scaled; `latency`: each step's SLA ratio x this
    decides its pass, as a prior whose latencies err by it sees the ladder)."""
    return ladder_of(climbed(noisy_steps(land, key, seed, salt, cv, latency)), land.flatten)


def noisy_steps(land: Landscape, key: str, seed: int, salt: int, cv: float | None = None,
                latency: float = 1.0) -> list[LadderStep]:
    """Every step of the configuration's ladder up to an aborted one ([] when it OOMs), each drawn as noisy_ladder
    draws it (one seeded stream per (seed, configuration, CV, salt), a draw a step in order)."""
    entry = land.table[key]
    if entry["oom"]:
        return []
    rng = np.random.default_rng([seed, land.keys.index(key), int(land.cv * 1000), salt])
    c = land.cv if cv is None else cv
    sigma = math.sqrt(math.log(1.0 + c ** 2))
    steps: list[LadderStep] = []
    for row in entry["steps"]:
        factor = float(rng.lognormal(-sigma * sigma / 2, sigma)) if c > 0 else 1.0
        stats = RunStats.from_row({k: (v * factor if k in NOISY and v is not None else v) for k, v in row.items()})
        if latency != 1.0:
            stats = dataclasses.replace(stats, passes_sla=sla_ratio(stats) * latency <= 1.0)
        steps.append(LadderStep(0, int(row["concurrency"]), "final", stats))
        if row.get("aborted") is not None:
            break
    return steps


def climbed(steps: list[LadderStep]) -> list[LadderStep]:
    """The steps a ladder climbing `steps` measures: up to sweep's saturation stop (a failing, saturated step)."""
    out: list[LadderStep] = []
    for step in steps:
        out.append(step)
        if not step.stats.passes_sla and saturated(step.stats, out[-2].stats if len(out) > 1 else None):
            break
    return out


def ladder_of(steps: list[LadderStep], flatten: float) -> Ladder:
    """The measured steps as a Ladder: the knee by find_knee, its interval by ladder_knee."""
    if not steps:
        return Ladder(None, None, ())
    point = find_knee(step_points(steps), flatten).point
    real = ladder_knee(steps, flatten) if point is not None else None
    return Ladder(point.goodput_tps if point else None, point.concurrency if point else None,
                  tuple((s.concurrency, sla_ratio(s.stats)) for s in steps),
                  tuple(s.stats.goodput_tps if s.stats.passes_sla else None for s in steps),
                  (real.ci_low, real.ci_high) if real is not None else (None, None))


# The noise model of the screen's windows (BENCH_NIGHT_NOISE): "mixed" (the tables of docs/bench-search.md: every
# window draws the landscape's CV whatever its length, but a probe, cv / sqrt(its fraction)); "sampling" (every
# screen window as if all window noise were sampling noise: the quarter screen's cv / sqrt(0.25), a probe's cv /
# sqrt(its fraction)). Final ladders draw the landscape's CV in both.
NOISE = os.environ.get("BENCH_NIGHT_NOISE", "mixed")


def screen_ladder(land: Landscape, key: str, seed: int) -> Ladder:
    """One quarter-window screen ladder (noise salt 1) under the NOISE model."""
    return noisy_ladder(land, key, seed, 1, land.cv / math.sqrt(QUARTER_S / FULL_S) if NOISE == "sampling" else None)


def sla_ratio(stats: RunStats) -> float:
    """The step's worst P95 over its bound (the bench profile's TTFT 1000 ms, TPOT 60 ms); a failing step without
    figures (every request failed) reads 10; a passing one at most 1."""
    ratios = [v / b for v, b in ((stats.ttft_p95_ms, 1000.0), (stats.tpot_p95_ms, 60.0)) if v is not None]
    worst = max(ratios, default=10.0)
    return min(worst, 1.0) if stats.passes_sla else max(worst, math.nextafter(1.0, 2.0))


def knee_concurrency(land: Landscape, key: str) -> int | None:
    """The prior's predicted knee: the noiseless ladder's knee concurrency."""
    return noisy_ladder_noiseless(land, key).knee_c


def noisy_ladder_noiseless(land: Landscape, key: str) -> Ladder:
    cv, land.cv = land.cv, 0.0
    try:
        return noisy_ladder(land, key, 0, 0)
    finally:
        land.cv = cv


PROBE_SALT = 6  # the probe window's noise (1 screen, 2 final, 3 and 5 again, 4 tie-break)


def latency_error(land: Landscape, variant: str, seed: int) -> dict[str, float]:
    """The prior's latency error factor e per configuration (its predicted P95s = the simulator's x e): "exact" 1;
    "bias" 1/(1 - u), u prior_values' own U(0.10, 0.15) draw for the configuration (its knee low by u: its latencies
    high by as much); "+errN" also x a lognormal of mean 1 and CV N%, from its own seeded stream."""
    rng = random.Random(f"prior-{variant}-{seed}")  # prior_values' stream, replayed draw for draw
    own = random.Random(f"prior-latency-{variant}-{seed}")
    err = float(variant.split("+err")[1]) / 100 if "+err" in variant else 0.0
    sigma = math.sqrt(math.log(1.0 + err ** 2))
    out: dict[str, float] = {}
    for k in land.keys:
        e = 1.0
        if land.truth[k]:
            if variant.startswith("bias"):
                e /= 1.0 - rng.uniform(0.10, 0.15)
            if err:
                rng.lognormvariate(-sigma * sigma / 2, sigma)  # prior_values' goodput error: drawn, not used here
        if err:
            e *= own.lognormvariate(-sigma * sigma / 2, sigma)
        out[k] = e
    return out


def predicted_knee(land: Landscape, key: str, e: float) -> int | None:
    """The prior's predicted knee concurrency when its latencies are the simulator's x `e`: the noiseless ladder run
    again (the same steps and saturation stop) with each step passing when its SLA ratio x e <= 1, its knee by
    find_knee; e = 1: knee_concurrency's."""
    return noisy_ladder(land, key, 0, 0, cv=0.0, latency=e).knee_c


def probe_window(land: Landscape, key: str, seed: int, load: int | None, fraction: float) -> tuple[float, float]:
    """One probe: a launch and one window at `load` (None: the ladder's first step), `fraction` x FULL_S long, early
    stop on; (its goodput, 0 when it fails; GPU seconds). Pass/fail is the noiseless ladder's at that load (a load it
    never reached fails, billed at ratio 10); a passing probe's goodput is the noiseless one x a lognormal of mean 1
    and CV cv / sqrt(fraction) (noise salt PROBE_SALT)."""
    lad = noisy_ladder_noiseless(land, key)
    if not lad.steps:
        return 0.0, 0.0  # OOM: never a survivor (the prior has no value for it)
    load = lad.steps[0][0] if load is None else load
    at = {c: (r, g) for (c, r), g in zip(lad.steps, lad.goodputs, strict=True)}
    ratio, good = at.get(load, (10.0, None))
    seconds = STARTUP_S + window_s(FULL_S * fraction, ratio, True)
    if ratio > 1.0 or good is None:
        return 0.0, seconds
    cv = land.cv / math.sqrt(fraction)
    if cv > 0:
        sigma = math.sqrt(math.log(1.0 + cv ** 2))
        rng = np.random.default_rng([seed, land.keys.index(key), int(land.cv * 1000), PROBE_SALT])
        good *= float(rng.lognormal(-sigma * sigma / 2, sigma))
    return good, seconds


def stop_fraction(ratio: float) -> float:
    """The share of its window a failing window of this SLA ratio measures before it stops (STOP_AT, interpolated;
    1 at the bound)."""
    points = ((1.0, 1.0), *STOP_AT)
    for (r0, f0), (r1, f1) in zip(points, points[1:], strict=False):
        if ratio <= r1:
            return f0 + (f1 - f0) * (ratio - r0) / (r1 - r0)
    return STOP_AT[-1][1]


def window_s(measure: float, ratio: float, early: bool) -> float:
    """GPU seconds of one window of this SLA ratio: warm-up, measured part (a failing one stopped early: its
    stop_fraction of the window, at least min_seconds, and no drain), drain."""
    if early and ratio > 1.0:
        return WARM_S + min(measure, max(MIN_S, stop_fraction(ratio) * measure))
    return WARM_S + measure + DRAIN_S


def ladder_bill(lad: Ladder, short: set[int] | None = None, early: bool = False) -> float:
    """GPU seconds of one launch and its ladder: full windows, or quarter ones at the concurrencies in `short`."""
    return STARTUP_S + sum(window_s(QUARTER_S if short and c in short else FULL_S, r, early) for c, r in lad.steps)


def refine_bill(early: bool) -> float:
    """REFINE bisection windows of a final ladder: half pass, half fail just over the bound (STOP_AT's first point:
    those stop late, if at all)."""
    return REFINE * (window_s(FULL_S, 1.0, early) + window_s(FULL_S, STOP_AT[0][0], early)) / 2
