"""How often the early stop (sweep.analysis.early_stop) stops a window that should pass, and what it saves on one that
fails: `make bench ARGS=early-stop` (docs/early-stop.md holds the reading).

Windows: the interactive profile's workload on the simulator (H200 preset, llama3-8b shape), closed loop at
`BENCH_ES_CONCURRENCY` (40 and 64) users against max_running_requests 32, so requests queue and their latencies are
correlated the way a loaded server correlates them (a burst of long prompts delays every neighbour). Each of
`BENCH_ES_SEEDS` (40) windows runs `BENCH_ES_WINDOW_S` (900 s, the profile's) in virtual time with its own workload
seed, full length, and keeps every request. The "true" TTFT P95 of the load is the pooled P95 of every window's
measured requests.

The rule is then replayed on each window's requests, second by second, exactly as a driver asks it (the requests
that ended by then, and the ones still running with what was known of them then: a first token that came later is
not known yet): for a TTFT bound at m x the true P95 (TPOT and errors left loose, so the TTFT test alone decides).
m >= 1: the load's true share over the bound is at most 5%; a stop is false when the window's own full-length P95
passes (a window is a sample: near the bound some windows fail on their own). m < 1: the load fails the bound;
the bench reports how many windows stop and the median seconds measured until they do. First, the same rule
on independent requests exactly at the bound (Bernoulli draws), the case its guarantee is stated for. Defaults of
window.early_stop (alpha 0.01, min_requests 50, min_seconds 60); `BENCH_ES_MIN_S` changes min_seconds.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
from pathlib import Path

import numpy as np

from bench import write_result
from sweep.analysis.early_stop import EarlyStop, e_value
from sweep.analysis.measure import in_window, succeeded, ttft_ms
from sweep.core.types import CUT, RequestRecord, ServerConfig
from sweep.drivers.virtual import VirtualDriver
from sweep.ladder.wiring import ROOT, model_path
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, Window, load_profile
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream

SEEDS = int(os.environ.get("BENCH_ES_SEEDS", "40"))
WINDOW_S = float(os.environ.get("BENCH_ES_WINDOW_S", "900"))
CONCURRENCIES = tuple(int(c) for c in os.environ.get("BENCH_ES_CONCURRENCY", "40,64").split(","))
MIN_S = float(os.environ.get("BENCH_ES_MIN_S", "60"))
ALPHA, MIN_REQUESTS = 0.01, 50
CACHE = Path(os.environ.get("BENCH_ES_CACHE", "/tmp/sweep-bench-early-stop"))
IID_RUNS = int(os.environ.get("BENCH_ES_IID_RUNS", "2000"))
MULTIPLIERS = (1.10, 1.05, 1.0, 0.9, 0.8, 0.5)  # the TTFT bound as a multiple of the load's true P95


@dataclasses.dataclass(frozen=True)
class Window_:
    start: float
    records: list[RequestRecord]


def one_window(seed: int, concurrency: int) -> Window_:
    """One full-length window of the load on a fresh simulated server, workload seed `seed` (cached under /tmp)."""
    path = CACHE / f"{concurrency}-{seed}-{WINDOW_S:g}.pkl"
    if path.exists():
        cached: Window_ = pickle.loads(path.read_bytes())
        return cached
    w = _simulate(seed, concurrency)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(w))
    return w


def _simulate(seed: int, concurrency: int) -> Window_:
    prof = load_profile(ROOT / "profiles" / "interactive.yaml", {"workload.seed": seed})
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig(max_running_requests=32,
                                                                     mem_fraction_static=0.85))
    window = Window(warmup_requests=100, measure_seconds=WINDOW_S, drain_seconds=60.0)
    res = VirtualDriver(seed=seed).run_window(handle, specs, concurrency, window)
    return Window_(res.window_start, [r for r in res.records if not r.warmup])


def as_known_at(rec: RequestRecord, t: float) -> RequestRecord:
    """What a driver knew of a request still running at t: no first token yet if it came later."""
    if rec.first_token_at is not None and rec.first_token_at > t:
        return dataclasses.replace(rec, first_token_at=None)
    return rec


def first_stop(w: Window_, bound_ms: float, min_s: float = MIN_S, count: bool = True) -> float | None:
    """Seconds into the window at which the rule stops it for a TTFT P95 bound of bound_ms (None: it never does);
    count False: the e-process alone (without the count of sweep.analysis.early_stop's condition 1)."""
    test = EarlyStop([SLA(ttft_ms=bound_ms, tpot_ms=1e6, max_error_rate=0.5)], ALPHA, MIN_REQUESTS, min_s,
                     WINDOW_S if count else 0.0)
    ends = sorted((r for r in w.records if r.error_kind != CUT and (r.finished_at is not None or r.error)),
                  key=lambda r: r.finished_at if r.finished_at is not None else r.sent_at)
    sends = sorted(w.records, key=lambda r: r.sent_at)
    running: dict[int, RequestRecord] = {}
    k = j = 0
    for s in range(int(WINDOW_S)):
        t = w.start + s
        while j < len(sends) and sends[j].sent_at <= t:
            running[id(sends[j])] = sends[j]
            j += 1
        while k < len(ends) and (ends[k].finished_at or ends[k].sent_at) <= t:
            test.ended(ends[k])
            running.pop(id(ends[k]), None)
            k += 1
        if s >= min_s and test.check(t, w.start, [as_known_at(r, t) for r in running.values()
                                                  if r.finished_at is None or r.finished_at > t]) is not None:
            return float(s)
    return None


def load_table(concurrency: int) -> list[str]:
    """The table of one load (module docstring)."""
    t0 = time.time()
    windows = [one_window(seed, concurrency) for seed in range(1, SEEDS + 1)]
    sim_s = time.time() - t0
    pooled = [v for w in windows for r in w.records
              if in_window(r, w.start, w.start + WINDOW_S) and succeeded(r) and (v := ttft_ms(r)) is not None]
    true_p95 = float(np.percentile(pooled, 95))
    own = [float(np.percentile([v for r in w.records if succeeded(r) and (v := ttft_ms(r)) is not None], 95))
           for w in windows]
    lines = [f"## c={concurrency} on max_running_requests 32", "",
             f"true TTFT P95 of the load (pooled, {len(pooled)} requests): {true_p95:.0f} ms; the windows' own P95: "
             f"{min(own):.0f}-{max(own):.0f} ms (median {np.median(own):.0f})", "",
             "| TTFT bound | the load | windows whose own P95 fails | the rule: windows stopped | of them, false "
             "stops (own P95 passes) | median seconds measured of a stopped window | the e-process alone: stopped | "
             "false stops | its median seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for m in MULTIPLIERS:
        bound = true_p95 * m
        fails = sum(1 for p in own if p > bound)
        cells = []
        for count in (True, False):
            stops = [(first_stop(w, bound, count=count), p <= bound) for w, p in zip(windows, own, strict=True)]
            hit = [s for s, _ in stops if s is not None]
            false = sum(1 for s, passes in stops if s is not None and passes)
            cells += [f"{len(hit)} of {SEEDS}", f"{false}"]
            cells += [f"{np.median(hit):.0f} of {WINDOW_S:.0f}" if hit else "-"] if count else []
        cells.append(f"{np.median(hit):.0f} of {WINDOW_S:.0f}" if hit else "-")
        lines.append(f"| {m:.2f} x P95 ({bound:.0f} ms) | {'passes' if m >= 1 else 'fails'} | {fails} of {SEEDS} | "
                     + " | ".join(cells) + " |")
    return [*lines, "", f"({time.time() - t0:.0f} s, simulating the windows {sim_s:.0f} s)", ""]


def independent(runs: int = IID_RUNS, n: int = 3000, q: float = 0.05) -> str:
    """The rule on independent requests exactly at the bound (each over it with probability q), looked at every 10
    requests from min_requests to n: the share of runs it stops (Ville's bound: alpha). One bound, alpha 0.01."""
    rng = np.random.default_rng(0)
    stops = 0
    for _ in range(runs):
        over = np.cumsum(rng.random(n) < q)
        stops += any(e_value(int(over[k - 1]), k, q) >= 1 / ALPHA for k in range(MIN_REQUESTS, n + 1, 10))
    return (f"independent requests at the bound (share over exactly {q:.0%}, {n} requests, looked at every 10): "
            f"{stops} of {runs} runs stopped ({stops / runs:.2%}; alpha {ALPHA:.0%})")


def main() -> int:
    t0 = time.time()
    lines = [f"# bench early-stop: {SEEDS} windows of {WINDOW_S:.0f} s per load (interactive workload, H200 "
             f"simulator), alpha {ALPHA}, min_requests {MIN_REQUESTS}, min_seconds {MIN_S:g}", "", independent(), ""]
    for c in CONCURRENCIES:
        lines += load_table(c)
    lines.append(f"wall {time.time() - t0:.0f} s")
    text = "\n".join(lines)
    print(text)
    write_result("early-stop", text + "\n", "docs/early-stop.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
