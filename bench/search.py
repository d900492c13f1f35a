"""Search efficiency in virtual time: simulated GPU-hours each strategy spends before it has measured a near-best knee.

`make bench ARGS=search`. Every configuration of a 6x4x4x2 grid gets its ladder simulated once per window length
(bench.search_oracle, cached under /tmp); strategies then replay against that oracle and pay only for the ladders
and steps they would run: per ladder a 60 s restart plus each step's warm-up + measured window + drain in virtual
seconds. The cost of a strategy on one seed = GPU-hours until it first completes a full-window ladder of a
configuration whose knee goodput (full window, full ladder) is within 5% of the exhaustive grid's best. Median and
IQR over 20 seeds. Strategies: exhaustive grid (GridSampler, random order), a tiered grid (one knob at a time,
then refine around the best), TPE (sweep.study.sampler.make_sampler's settings), each with/without screening
(sweep's successive halving: short windows for all, full windows for the top share, best first) and with/without
pruning (sweep.ladder.step_verdicts.saturated's stop). docs/bench-search.md has the reading of each strategy and the results.
"""

from __future__ import annotations

import math
import os
import random
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from bench.search_oracle import (
    FULL_S,
    SCREEN_S,
    Table,
    all_configs,
    bench_profile,
    ladder_run,
    landscape_summary,
    load_or_simulate,
    truth,
    within,
)
from sweep.core.types import ServerConfig
from sweep.profile import Profile
from sweep.profile.grid import grid
from sweep.study.sampler import make_sampler, suggest
from sweep.study.search import CONSTRAINT_ATTR, FEASIBLE_ATTR, promoted

SEEDS = int(os.environ.get("BENCH_SEARCH_SEEDS", "20"))
TOL = 0.05
TPE_SCREEN_TRIALS = 48  # TPE with screening: a quarter of the grid screened, then the finals
# Grid values nearest to SGLang's own defaults on an H200 (auto mrr is large, mem ~0.88, chunk 8192, fcfs).
DEFAULTS = {"max_running_requests": 256, "mem_fraction_static": 0.85, "chunked_prefill_size": 8192,
            "schedule_policy": "fcfs"}

Params = dict[str, Any]


@dataclass
class Bill:
    """The GPU-seconds one strategy run spends; a (configuration, phase) already measured is reused for free."""

    oracle: Oracle
    prune: bool
    seconds: float = 0.0
    ladders: int = 0
    hit_s: float | None = None
    seen: dict[tuple[str, str], float | None] = field(default_factory=dict)

    def measure(self, params: Params, phase: str) -> float | None:
        cfg = ServerConfig(**params)
        key = (cfg.key(), phase)
        if key not in self.seen:
            table = self.oracle.screen if phase == "screen" else self.oracle.full
            value, secs, _ = ladder_run(table[cfg.key()], self.prune, self.oracle.flatten)
            self.seconds += secs
            self.ladders += 1
            self.seen[key] = value
            if phase == "final" and self.hit_s is None and self.oracle.near(cfg.key()):
                self.hit_s = self.seconds
        return self.seen[key]

    @property
    def hit(self) -> bool:
        return self.hit_s is not None


@dataclass
class Oracle:
    full: Table
    screen: Table
    truth: dict[str, float]
    flatten: float

    @property
    def best(self) -> float:
        return max(self.truth.values())

    def near(self, key: str) -> bool:
        return within(self.truth[key], self.best, TOL)


# A strategy proposes configurations through `measure(params) -> knee or None` and stops when told to.
Measure = Callable[[Params], "float | None"]
Strategy = Callable[[Measure, Callable[[], bool], int], None]


def optuna_strategy(profile: Profile, sampler: str, n_trials: int) -> Strategy:
    """sweep.study.search's sampler (grid: random order; tpe: multivariate with the feasibility constraint), ask/tell."""
    space = grid(profile.search.space)

    def run(measure: Measure, done: Callable[[], bool], seed: int) -> None:
        prof = profile.model_copy(update={"workload": profile.workload.model_copy(update={"seed": seed}),
                                          "search": profile.search.model_copy(update={"sampler": sampler})})
        study = optuna.create_study(direction="maximize", sampler=make_sampler(prof))
        for _ in range(n_trials):
            trial = study.ask()
            value = measure(suggest(trial, prof.search.space, space).knobs())
            trial.set_user_attr(FEASIBLE_ATTR, value is not None)
            trial.set_user_attr(CONSTRAINT_ATTR, 0.0 if value is not None else 1.0)
            trial.set_constraint("feasible", 0.0 if value is not None else 1.0)
            try:
                study.tell(trial, value if value is not None else 0.0)
            except RuntimeError:  # GridSampler calls study.stop() on the last grid point: outside optimize()
                return  # the trial is stored before after_trial raises; the grid is exhausted
            if done():
                return

    return run


def shuffled_grid_strategy(profile: Profile) -> Strategy:
    """Every configuration once, in a seeded random order (what GridSampler(seed) does, with an unbiased shuffle:
    GridSampler's first picks over seeds 0..19 landed on the 3% near-best set 5 times in 20)."""
    configs = [c.knobs() for c in all_configs(profile)]

    def run(measure: Measure, done: Callable[[], bool], seed: int) -> None:
        order = list(configs)
        random.Random(seed).shuffle(order)
        for params in order:
            measure(params)
            if done():
                return

    return run


def tiered_strategy(profile: Profile, random_start: bool) -> Strategy:
    """Coarse: one knob at a time over all its values, the others held (defaults or a random start), knobs in a
    seeded order; refine: the product of +-1 grid neighbours of the numeric knobs around the best, repeated
    while the best moves."""
    space = grid(profile.search.space)

    def run(measure: Measure, done: Callable[[], bool], seed: int) -> None:
        rng = random.Random(seed)
        cur: Params = {k: rng.choice(v) for k, v in space.items()} if random_start else dict(DEFAULTS)

        def score(p: Params) -> float:
            v = measure(p)
            return -1.0 if v is None else v

        best_v = score(cur)
        if done():
            return
        order = list(space)
        rng.shuffle(order)
        for knob in order:
            for val in space[knob]:
                cand = {**cur, knob: val}
                v = score(cand)
                if done():
                    return
                if v > best_v:
                    best_v, cur = v, cand
        moved = True
        while moved:
            moved = False
            centre = dict(cur)
            for cand in _neighbours(space, centre):
                v = score(cand)
                if done():
                    return
                if v > best_v:
                    best_v, cur, moved = v, cand, True

    return run


def _neighbours(space: dict[str, list[Any]], centre: Params) -> Iterator[Params]:
    numeric = [k for k, v in space.items() if all(isinstance(x, int | float) for x in v)]
    axes = []
    for k in numeric:
        i = space[k].index(centre[k])
        axes.append([space[k][j] for j in (i - 1, i, i + 1) if 0 <= j < len(space[k])])
    for combo in _product(axes):
        cand = {**centre, **dict(zip(numeric, combo, strict=True))}
        if cand != centre:
            yield cand


def _product(axes: list[list[Any]]) -> Iterator[tuple[Any, ...]]:
    if not axes:
        yield ()
        return
    for x in axes[0]:
        for rest in _product(axes[1:]):
            yield (x, *rest)


def replay(oracle: Oracle, strategy: Strategy, seed: int, screening: bool, prune: bool,
           profile: Profile) -> Bill:
    """One strategy run on one seed; without screening it stops at the first near-best full ladder."""
    bill = Bill(oracle, prune)
    if not screening:
        strategy(lambda p: bill.measure(p, "final"), lambda: bill.hit, seed)
        return bill
    screened: list[tuple[Params, float | None]] = []

    def screen(p: Params) -> float | None:
        v = bill.measure(p, "screen")
        screened.append((p, v))
        return v

    strategy(screen, lambda: False, seed)
    sc = profile.search.screening
    values = [(p, v) for p, v in screened if v is not None]
    for params in promoted(values, sc):  # best screened first, as Search._finals
        bill.measure(params, "final")
        if bill.hit:
            break
    return bill


def grid_cost(oracle: Oracle, prune: bool) -> float:
    return sum(ladder_run(e, prune, oracle.flatten)[1] for e in oracle.full.values())


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """25th, 50th, 75th percentile (lower-nearest rank, so a censored inf stays inf, never nan)."""
    s = sorted(xs)
    pick = lambda q: s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]  # noqa: E731
    return pick(0.25), pick(0.5), pick(0.75)


def gpu_h(seconds: float) -> str:
    return "miss" if math.isinf(seconds) else f"{seconds / 3600:.1f}"


def strategies(profile: Profile) -> dict[str, Strategy]:
    n = len(all_configs(profile))
    return {"grid (random order)": shuffled_grid_strategy(profile),
            "tiered (SGLang defaults)": tiered_strategy(profile, random_start=False),
            "tiered (random start)": tiered_strategy(profile, random_start=True),
            "tpe": optuna_strategy(profile, "tpe", n),
            **({"gp": optuna_strategy(profile, "gp", n)} if gp_available() is None else {})}


def gp_available() -> str | None:
    """None when Optuna's GPSampler can run here, else why not."""
    try:
        import scipy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return f"GPSampler needs torch and scipy ({exc.name} missing)"
    return None


def run_table(oracle: Oracle, profile: Profile, seeds: int) -> list[dict[str, Any]]:
    ref = grid_cost(oracle, prune=False)
    rows = []
    for name, strat in strategies(profile).items():
        for screening in (False, True):
            for prune in (False, True):
                if name in ("tpe", "gp") and screening:
                    strat = optuna_strategy(profile, name, TPE_SCREEN_TRIALS)
                elif name in ("tpe", "gp"):
                    strat = strategies(profile)[name]
                t0 = time.perf_counter()
                bills = [replay(oracle, strat, s, screening, prune, profile) for s in range(seeds)]
                cost = [b.hit_s if b.hit_s is not None else math.inf for b in bills]
                q1, med, q3 = quartiles(cost)
                rows.append({"strategy": name, "screening": screening, "pruning": prune,
                             "hits": sum(b.hit for b in bills), "seeds": seeds, "q1": q1, "median": med, "q3": q3,
                             "ladders": float(np.median([b.ladders for b in bills])),
                             "share": med / ref, "cpu_s": time.perf_counter() - t0})
    return rows


def format_table(rows: list[dict[str, Any]], ref_h: float) -> list[str]:
    out = ["| strategy | screening | pruning | hits | GPU-h to near-best: median [IQR] | ladders run (median) "
           "| share of grid's GPU-h |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        share = "—" if math.isinf(r["share"]) else f"{r['share']:.1%}"
        ok = "" if math.isinf(r["share"]) or r["share"] > 0.20 else " ✓"
        out.append(f"| {r['strategy']} | {'yes' if r['screening'] else 'no'} | {'yes' if r['pruning'] else 'no'} "
                   f"| {r['hits']}/{r['seeds']} | {gpu_h(r['median'])} [{gpu_h(r['q1'])}–{gpu_h(r['q3'])}] "
                   f"| {r['ladders']:.0f} | {share}{ok} |")
    out.append(f"\nGrid's GPU-hours (every configuration, full windows, full ladders): {ref_h:.1f} h; "
               f"✓ = within the issue's target of <= 20%.")
    return out


def main() -> int:
    t0 = time.perf_counter()
    warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")  # constraints_func, as sweep uses it
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    profile = bench_profile()
    configs = all_configs(profile)
    print(f"grid: {len(configs)} configurations; ladder {profile.ladder}; full window {FULL_S:g} s, "
          f"screen window {SCREEN_S:g} s (+30 s warm-up, drain <= 60 s, 60 s restart per ladder); "
          f"SLA TTFT P95 <= {profile.sla.ttft_ms:g} ms, TPOT P95 <= {profile.sla.tpot_ms:g} ms", flush=True)
    full = load_or_simulate(profile, configs, FULL_S)
    screen = load_or_simulate(profile, configs, SCREEN_S)
    flatten = profile.search.flatten_threshold
    oracle = Oracle(full, screen, truth(full, flatten), flatten)
    print(f"oracle ready in {time.perf_counter() - t0:.0f} s\n\nlandscape (full windows):")
    print("\n".join(landscape_summary(oracle.truth, configs, TOL)))
    screen_truth = truth(screen, flatten)
    agree = sum(1 for k in screen_truth if oracle.near(k) and within(screen_truth[k], max(screen_truth.values()),
                                                                       TOL))
    print(f"screen-window landscape: best {max(screen_truth.values()):.0f}; {agree} configurations near-best in both")
    if oracle.best <= 0:
        print("error: no configuration passes the SLA; the landscape is useless for comparing samplers")
        return 1
    t1 = time.perf_counter()
    rows = run_table(oracle, profile, SEEDS)
    print(f"\nstrategies replayed over {SEEDS} seeds in {time.perf_counter() - t1:.0f} s\n")
    print("\n".join(format_table(rows, grid_cost(oracle, prune=False) / 3600)))
    print(f"grid with pruning, every configuration: {grid_cost(oracle, prune=True) / 3600:.1f} h")
    why = gp_available()
    if why:
        print(f"gp: not run: {why}")
    print(f"\nbench search took {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
