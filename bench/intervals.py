"""Intervals that hold on a repeat (issue 28 §3): how often a refined study's 95% boundary interval covers the
crossing of a dense scan of the same configuration, on the simulator with window-to-window noise.
`make bench ARGS=intervals` (python -m bench intervals); writes reports/bench/bench-intervals.md, of which
docs/bench-intervals.md keeps a copy (SETUP says how the numbers are made).
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench import write_result
from sweep.analysis.boundary import (
    Boundary,
    WindowSample,
    crossing,
    estimate_boundary,
    sla_ratio,
    steps_windows,
)
from sweep.analysis.ladder_steps import LadderStep
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderRunner
from sweep.ladder.wiring import ROOT, make_driver, make_launcher, model_path
from sweep.profile import SLA, Profile, load_profile
from sweep.store import Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream

SEEDS = int(os.environ.get("BENCH_INTERVALS_SEEDS", "20"))
DENSE_SEEDS = int(os.environ.get("BENCH_INTERVALS_DENSE_SEEDS", "16"))
DRIFT = ["--sim-speed-drift", "0.1", "--sim-speed-drift-period-s", "5"]
TARGET = 0.9  # issue 28 §3: covered in at least 18 of 20
SETUP = """The noise: the simulator's speed drift (`--sim-speed-drift 0.1 --sim-speed-drift-period-s 5`, sglang_sim/drift.py):
every step time multiplied by a lognormal factor (median 1, CV 10%) redrawn every 5 simulated seconds, so that a
20 s window averages about five factors (a spread of about 4.5% between windows, under the H200's 5-9% run-to-run
CV of window goodput) and two windows share little. Three configurations of the smoke workload (virtual driver,
20 s windows, TTFT P95 <= 1 s and TPOT P95 <= 100 ms):

- smooth: a closed loop queueing past 8 running slots (TTFT P95 rises steadily), ladder 8/16/32/64 users;
- cliff: KV-bound long outputs (3,000-3,600 tokens; the cache holds about 9): TTFT P95 ~0.06 of its bound at
  9 users, past it at 10; 300 s windows, ladder 4/8/16/32;
- open: an open-loop Poisson request-rate ladder 5/10/20/40 req/s on the smooth configuration (refined by rate).

The dense-scan crossing (the truth): a ladder every 1 user or 1 req/s across the crossing, noise on, on
BENCH_INTERVALS_DENSE_SEEDS seeds (workload and drift), the ladder's saturation stop off so that every load runs on
every seed; per load the median log SLA ratio over the seeds, made non-decreasing (pool-adjacent-violators), and
its crossing of 1 (sweep.analysis.boundary.crossing); its own 95% interval is a bootstrap over the seeds. Each study
is a refined final ladder (refine on: up to 3 bisection windows) on its own seed (workload and drift); its boundary
interval is sweep.analysis.boundary's. Beside it, the rule of d5034b3 (every window's requests resampled singly, no
window-to-window term) on the same windows.
"""
BASE = {"server.launcher": "sim", "window.measure_seconds": 20.0, "window.drain_seconds": 5.0,
        "search.flatten_threshold": 0.0}
LONG = {"workload.output_len": {"kind": "uniform", "low": 3000, "high": 3600}, "workload.num_requests": 2000,
        "window.measure_seconds": 300.0, "window.drain_seconds": 120.0, "window.request_timeout_s": 300}


@dataclass(frozen=True)
class Case:
    """One configuration: its ladder's profile overrides, the dense scan's loads, and whether loads are rates."""

    name: str
    config: ServerConfig
    overrides: dict[str, Any]
    dense: tuple[float, ...]
    rate: bool = False

    def profile(self, loads: Sequence[float] | None, seed: int, refine: bool) -> dict[str, Any]:
        """Profile overrides for a ladder of `loads` (the case's own when None) on `seed`."""
        out = {**BASE, **self.overrides, "refine.enabled": refine, "workload.seed": seed,
               "server.extra_args": ["--load-format", "dummy", "--random-seed", str(seed), *DRIFT]}
        if loads is not None and self.rate:
            out["ladder"] = list(range(1, len(loads) + 1))
            out["arrival"] = {**self.overrides["arrival"], "rates": list(loads)}
        elif loads is not None:
            out["ladder"] = [int(c) for c in loads]
        return out


def _rates(rates: list[float]) -> dict[str, Any]:
    return {"ladder": list(range(1, len(rates) + 1)), "workload.num_requests": 5000,
            "arrival": {"kind": "poisson", "rate": 1.0, "rates": rates, "max_in_flight": 1024}}


SMOOTH = ServerConfig(max_running_requests=8, mem_fraction_static=0.85)
CASES = (
    Case("smooth", SMOOTH, {"ladder": [8, 16, 32, 64]}, tuple(float(c) for c in range(30, 44))),
    Case("cliff", ServerConfig(max_running_requests=256, mem_fraction_static=0.12), {**LONG, "ladder": [4, 8, 16, 32]},
         tuple(float(c) for c in range(8, 13))),
    Case("open", SMOOTH, _rates([5.0, 10.0, 20.0, 40.0]), tuple(float(r) for r in range(25, 37)), rate=True),
)


@contextmanager
def _no_saturation_stop() -> Iterator[None]:
    """A dense scan runs every load: the ladder's stop after a saturated failing step is off meanwhile."""
    with mock.patch("sweep.ladder.runner.saturated", return_value=None):
        yield


def _ladder(store: Store, tmp: Path, case: Case, overrides: dict[str, Any]) -> tuple[Profile, list[LadderStep]]:
    """One final ladder of the case on the in-process simulator: (profile, its steps)."""
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", overrides)
    sid = store.create_study(f"iv-{uuid.uuid4().hex[:8]}", prof.name, prof.model_dump_json(), prof.fingerprint(),
                             "grid", True, "virtual", None)
    launcher = make_launcher(prof, "sim", "virtual", tmp / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    runner = LadderRunner(prof, launcher, make_driver(prof, "virtual", launcher), store, sid, specs, "virtual")
    return prof, runner.run(case.config).steps


def _windows(store: Store, steps: Sequence[LadderStep]) -> list[WindowSample]:
    return steps_windows(steps, lambda run_id: [r.judged() for r in store.requests_for_run(run_id)])


def pava(y: Sequence[float]) -> list[float]:
    """The non-decreasing sequence nearest to y in least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in y:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, n2), (m1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return [m for m, n in blocks for _ in range(int(n))]


def truth(scans: Sequence[dict[float, float]]) -> float | None:
    """The crossing of the per-load median log ratio over `scans` (load -> ratio), made non-decreasing."""
    loads = sorted(set().union(*scans))
    med = pava([float(np.median([math.log(s[c]) for s in scans if c in s])) for c in loads])
    return crossing([(c, math.exp(m)) for c, m in zip(loads, med, strict=True)])


def dense(store: Store, tmp: Path, case: Case) -> tuple[float, float, float, list[float]]:
    """(truth, its 95% bootstrap over seeds low and high, each seed's own scan crossing)."""
    scans: list[dict[float, float]] = []
    with _no_saturation_stop():
        for seed in range(DENSE_SEEDS):
            prof, steps = _ladder(store, tmp, case, case.profile(case.dense, 500 + seed, refine=False))
            scans.append({w.concurrency: sla_ratio(w, prof.sla) for w in _windows(store, steps)})
    point = truth(scans)
    if point is None:
        raise RuntimeError(f"{case.name}: the dense scan does not bracket the crossing")
    rng = np.random.default_rng(0)
    boot = [t for _ in range(200) if (t := truth([scans[i] for i in rng.integers(0, len(scans), len(scans))]))]
    own = [c for s in scans if (c := crossing(sorted(s.items()))) is not None]
    return point, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), own


def requests_only(windows: Sequence[WindowSample], sla: SLA, n: int = 400, seed: int = 0) -> tuple[float, float]:
    """d5034b3's interval: every window's requests resampled singly (no time blocks, no window-to-window term)."""
    ws = sorted(windows, key=lambda w: w.concurrency)
    cols = [(np.asarray(w.ttft_ms), np.asarray(w.tpot_ms), np.asarray(w.e2e_ms), np.asarray(w.error)) for w in ws]
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(n):
        pts = []
        for w, (ttft, tpot, e2e, err) in zip(ws, cols, strict=True):
            idx = rng.integers(0, err.size, err.size)
            again = WindowSample(w.concurrency, tuple(ttft[idx].tolist()), tuple(tpot[idx].tolist()),
                                 tuple(e2e[idx].tolist()), tuple(err[idx].tolist()))
            pts.append((w.concurrency, sla_ratio(again, sla)))
        c = crossing(pts)
        found.append(c if c is not None else (pts[0][0] if all(r > 1 for _, r in pts) else pts[-1][0]))
    point = crossing([(w.concurrency, sla_ratio(w, sla)) for w in ws])
    lo, hi = (float(x) for x in np.percentile(found, [2.5, 97.5]))
    return (lo, hi) if point is None else (min(lo, point), max(hi, point))


@dataclass(frozen=True)
class Study:
    boundary: Boundary
    old: tuple[float, float]
    cpu_s: float


def study(store: Store, tmp: Path, case: Case, seed: int) -> Study | None:
    """One refined ladder of the case on `seed`: its boundary (None when not bracketed) and d5034b3's interval."""
    t0 = time.process_time()
    prof, steps = _ladder(store, tmp, case, case.profile(None, 1000 + seed, refine=True))
    windows = _windows(store, steps)
    b = estimate_boundary(windows, prof.sla)
    if b is None:
        return None
    return Study(b, requests_only(windows, prof.sla), time.process_time() - t0)


def _row(case: Case, t: tuple[float, float, float, list[float]], runs: list[Study | None]) -> str:
    point, t_lo, t_hi, own = t
    done = [r for r in runs if r is not None]
    cov = sum(r.boundary.ci_low <= point <= r.boundary.ci_high for r in done)
    old = sum(r.old[0] <= point <= r.old[1] for r in done)
    width = statistics.median((r.boundary.ci_high - r.boundary.ci_low) / r.boundary.concurrency for r in done)
    old_w = statistics.median((r.old[1] - r.old[0]) / r.boundary.concurrency for r in done)
    shapes = ", ".join(f"{s} {sum(r.boundary.shape == s for r in done)}" for s in ("smooth", "cliff"))
    unit = "req/s" if case.rate else "users"
    spread = statistics.median(abs(r.boundary.concurrency - point) / point for r in done)
    return (f"| {case.name} | {point:.2f} {unit} ({t_lo:.2f}-{t_hi:.2f}; one scan {min(own):.1f}-{max(own):.1f}) "
            f"| {len(done)}/{len(runs)} | **{cov}/{len(done)}** | {width:.1%} | {old}/{len(done)} | {old_w:.1%} "
            f"| {spread:.1%} | {shapes} |")


def main() -> int:
    """Run every case, print the table, write reports/bench/bench-intervals.md; nonzero when a case covers < 90%."""
    rows, ok, cpu0 = [], True, time.process_time()
    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/bench.db") as store:
        for case in CASES:
            t = dense(store, Path(tmp), case)
            runs = [study(store, Path(tmp), case, seed) for seed in range(SEEDS)]
            rows.append(_row(case, t, runs))
            done = [r for r in runs if r is not None]
            ok &= sum(r.boundary.ci_low <= t[0] <= r.boundary.ci_high for r in done) >= TARGET * len(runs)
            print(rows[-1], flush=True)
    cpu = time.process_time() - cpu0
    head = ["| configuration | dense-scan crossing (95% over seeds; one scan's own) | studies bracketed "
            "| interval covers it | median width | d5034b3's rule covers | its width | median miss of the point "
            "| shape |", "|---|---|---|---|---|---|---|---|---|"]
    table = "\n".join(head + rows)
    print(table)
    write_result("intervals", _doc(table, cpu, ok), "docs/bench-intervals.md")
    print(f"{cpu:.0f} s CPU")
    return 0 if ok else 1


def _doc(table: str, cpu: float, ok: bool) -> str:
    return f"""# Bench: boundary intervals that hold on a repeat

```sh
make bench ARGS=intervals     # = .venv/bin/python -m bench intervals
```

The command writes reports/bench/bench-intervals.md (git-ignored); this page is a copy of it.

Issue 28 §3: on the simulator with window noise, {SEEDS} repeated studies of each of three configurations; the
95% interval of each study's SLA boundary should cover the crossing of a dense scan of the same configuration in
at least 18 of 20. **{'Met' if ok else 'NOT met'}.** {cpu:.0f} s CPU on this machine (`BENCH_INTERVALS_SEEDS`,
`BENCH_INTERVALS_DENSE_SEEDS` = {DENSE_SEEDS} change the counts).

{table}

*Dense-scan crossing*: every load from {CASES[0].dense[0]:g} to {CASES[0].dense[-1]:g} users (smooth),
{CASES[1].dense[0]:g} to {CASES[1].dense[-1]:g} (cliff), {CASES[2].dense[0]:g} to {CASES[2].dense[-1]:g} req/s (open)
on {DENSE_SEEDS} seeds, noise on: the crossing of the per-load median ratio; in brackets its 95% bootstrap over the
seeds, and the range of single scans' own crossings (one dense scan is itself a noisy measurement). *Interval
covers it*: studies whose 95% interval holds the dense-scan crossing. *Width*: (high - low) / the boundary.
*d5034b3's rule*: the same windows, each window's requests resampled singly, no window-to-window term. *Median
miss of the point*: |boundary - dense crossing| / dense crossing.

{SETUP}
What the interval is (sweep/analysis/boundary.py, sweep/analysis/window_noise.py): a block bootstrap over 10 time
segments of each window (an open loop's load moving with the resample's request count), every window's load moved
by a window-to-window term eta measured from the bracket's windows (their residuals against the line through their
neighbours, over the curve's slope, less their own bootstrap spread; floored at 3%, Student-t tails for few
residuals), the crossing re-found 2,000 times; a cliff's interval holds its bracket, a smooth one both the linear
and the log-linear crossing. Not modelled here: a shift common to every window of one study (a slow drift, another
day) is invisible to residuals between its windows; only the 3% floor stands for it.
"""


if __name__ == "__main__":
    raise SystemExit(main())
