"""Fit the simulator's H200 Efficiency constants to real SGLang windows; prints real vs sim tables and held-out errors.

Usage: .venv/bin/python tools/calibrate.py [--holdout] [--fit SPLIT] [--export results.db --pool 0.14=52275,...]

The real windows live in the repo (docs/calibration-data/, see tools/calibration_data.py). Each is replayed in virtual
time with the study's stored profile (workload seed, window, warm-up), the model shape the real server ran (the
profile's model folder), the same knobs and the same ladder order on one engine per configuration (a real ladder
reuses its server, so the radix cache carries over). The fit is a coordinate-descent grid search minimising the
squared log error of output tok/s, TPOT P50/P99 and TTFT P50 over the windows of one split's training set; the
held-out windows are only ever compared. Session-1 windows (2026-11-29) enter with throughput and TPOT only: their
TTFT was measured by the first HTTP driver (before the protocol data path and the liveness fix of 2026-12-01), whose
own delay the server-side model must not absorb.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from calibration_data import DATA, RealWindow, export_db, load_all  # noqa: E402
from calibration_decode import DECODE_BANDWIDTH, decode_log_fit, decode_log_fit_kv  # noqa: E402
from calibration_holdout import HOLDOUT_SHAPES, holdout_report  # noqa: E402

from sglang_sim.engine import Engine  # noqa: E402
from sglang_sim.params import (  # noqa: E402
    Efficiency,
    ModelPreset,
    SimParams,
    gpu_preset,
    resolve,
)
from sglang_sim.shape import choose_model  # noqa: E402
from sweep.analysis.knee import StepPoint, find_knee  # noqa: E402
from sweep.analysis.measure import compute_stats  # noqa: E402
from sweep.core.types import ServerConfig  # noqa: E402
from sweep.drivers.virtual import VirtualDriver  # noqa: E402
from sweep.ladder.step_inputs import StepInputs  # noqa: E402
from sweep.launchers.base import ServerHandle  # noqa: E402
from sweep.profile import Profile  # noqa: E402
from sweep.workload.stream import RequestStream  # noqa: E402

DEFAULT_LOGS = "decode-lines-mfs*.txt"  # under --data: the kv-calib logs (the matrix's: decode-lines-matrix-x0-*.txt)
METRICS = ("output_tps", "tpot_p50_ms", "tpot_p99_ms", "ttft_p50_ms")
SIM_KEYS = (*METRICS, "ttft_p99_ms", "goodput_tps", "goodput_rps", "passes_sla", "queue_len_mean", "kv_usage_max",
            "retractions", "cache_hit_rate")
ALL_KEYS = ("bandwidth", "step_overhead_s", "per_req_overhead_s", "flops", "prefill_overhead_s", "host_latency_s")
FINE = (0.85, 0.93, 1.07, 1.15)


@dataclass(frozen=True)
class Split:
    """Which windows a fit may see (`train`) and which it is judged on (`held`); a window may be neither."""

    name: str
    describe: str
    train: Callable[[RealWindow], bool]
    held: Callable[[RealWindow], bool]


def _mfs(w: RealWindow) -> float | None:
    return w.knobs.mem_fraction_static


def _kv(w: RealWindow, mfs: float) -> bool:
    return w.study == "kv-calib" and _mfs(w) == mfs


SPLITS = {
    "A": Split("A", "fit on kv-calib mem 0.17 + session 1; hold out kv-calib mem 0.14 (the KV-bound pool)",
               lambda w: w.shape is None and not _kv(w, 0.14), lambda w: _kv(w, 0.14)),
    "B": Split("B", "fit on kv-calib mem 0.14 + session 1; hold out kv-calib mem 0.17",
               lambda w: w.shape is None and not _kv(w, 0.17), lambda w: _kv(w, 0.17)),
    # The preset (issue 21 §2): whole workload shapes of the matrix unseen by the fit (chosen before the data came).
    "S": Split("S", f"fit on kv-calib, session 1 and the matrix's other shapes; hold out the shapes "
                    f"{', '.join(HOLDOUT_SHAPES)}",
               lambda w: w.shape not in HOLDOUT_SHAPES, lambda w: w.shape in HOLDOUT_SHAPES),
}


def metrics_of(w: RealWindow) -> tuple[str, ...]:
    """Metrics a window is fitted and scored on: session-1 TTFT came from a client since replaced."""
    return METRICS if w.per_request else METRICS[:3]


def replay_model(prof: Profile) -> ModelPreset:
    """The shape the real server ran (shape.choose_model): the profile's model folder when the repo has it, else
    the sim preset. The stored profiles predate the one-model rule (kv-calib names sim_model llama3-8b beside
    the 8B-shape folder it ran), so a folder in the repo is taken without the conflict check."""
    folder = prof.server.model_path
    local = ROOT / folder if folder and not Path(folder).is_absolute() else None
    if local is not None and (local / "config.json").is_file():
        return choose_model(local)
    return choose_model(folder, prof.server.sim_model)


_WORKLOADS: dict[str, Any] = {}


def simulate(windows: list[RealWindow], eff: Efficiency, bootstrap: int = 0) -> dict[str, dict[str, float]]:
    """Replay every window in virtual time; returns sim metrics per run id."""
    out: dict[str, dict[str, float]] = {}
    configs: dict[str, list[RealWindow]] = {}
    for w in windows:
        configs.setdefault(w.config_id, []).append(w)
    for ladder in configs.values():
        prof = ladder[0].profile
        key = prof.workload.model_dump_json()
        if key not in _WORKLOADS:
            _WORKLOADS[key] = RequestStream(prof.workload, base_dir=ROOT)
        params = SimParams(gpu=gpu_preset(prof.server.sim_gpu), model=replay_model(prof), eff=eff)
        eng = Engine(params, ladder[0].knobs)
        handle = ServerHandle(config=ServerConfig(), url=None, simulated=True, engine=eng)
        driver = VirtualDriver()
        # The requests the study sent: its stream continued step to step, the cache flushed as the study did.
        inputs = StepInputs(prof, _WORKLOADS[key], driver)
        for w in ladder:
            view, _ = inputs.before_step(handle, w.concurrency, prof.window, prof.arrival)
            res = driver.run_window(handle, view, w.concurrency, prof.window)
            stats = inputs.after_step(res, compute_stats(res, prof.sla, bootstrap=bootstrap)).columns()
            out[w.run_id] = {m: float(stats[m] or 0.0) for m in SIM_KEYS}  # type: ignore[arg-type]
            out[w.run_id]["pool_tokens"] = float(eng.total)
    return out


def loss(windows: list[RealWindow], sim: dict[str, dict[str, float]]) -> float:
    """Mean squared log ratio sim/real over every scored metric of every window."""
    # a log ratio is capped at 10x either way: a simulated window with too few requests has no TTFT (0), and one
    # such window must not outweigh every other
    cap = math.log(10)
    errs = [min(abs(math.log(max(sim[w.run_id][m], 1e-9) / w.real[m])), cap) ** 2
            for w in windows for m in metrics_of(w)]
    return sum(errs) / len(errs)


def fit(windows: list[RealWindow], start: Efficiency, keys: tuple[str, ...], factors: tuple[float, ...],
        rounds: int) -> tuple[Efficiency, float]:
    """Coordinate descent: per constant, try each grid factor with the others fixed; keep the best; repeat."""
    best, best_loss = start, loss(windows, simulate(windows, start))
    for rnd in range(rounds):
        for key in keys:
            base = getattr(best, key)
            for f in factors:
                val = base * f
                if key in ("bandwidth", "flops") and val > 0.98:
                    continue  # a share of peak above ~1 is not physical
                cand = replace(best, **{key: val})
                cand_loss = loss(windows, simulate(windows, cand))
                if cand_loss < best_loss:
                    best, best_loss = cand, cand_loss
            print(f"  round {rnd + 1} {key:<20} -> {getattr(best, key):.6g}  loss {best_loss:.5f}", flush=True)
    return best, best_loss


def grid_fit(windows: list[RealWindow], start: Efficiency, grids: tuple[tuple[str, tuple[float, ...]], ...]
             ) -> tuple[Efficiency, float]:
    """Coordinate descent over absolute value grids, one constant at a time in the given order."""
    best, best_loss = start, loss(windows, simulate(windows, start))
    for key, values in grids:
        for val in values:
            cand = replace(best, **{key: val})
            if cand == best:
                continue
            cand_loss = loss(windows, simulate(windows, cand))
            if cand_loss < best_loss:
                best, best_loss = cand, cand_loss
        print(f"  {key:<20} -> {getattr(best, key):.6g}  loss {best_loss:.5f}", flush=True)
    return best, best_loss


HOST_GRID = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016)
FLOPS_GRID = (0.47, 0.53, 0.59, 0.66, 0.74)


def full_fit(train: list[RealWindow], eff: Efficiency, logs: list[Path], rounds: int) -> Efficiency:
    """Stage 1 decode steps from the logs; stage 2 host stage and prefill GEMM share on the windows (value grids);
    with rounds > 1, stage 3 refines every constant (multiplicative fine grid)."""
    eff, n_lines, rms = decode_log_fit(logs, eff, replay_model(train[0].profile))
    print(f"stage 1: decode steps from {n_lines} drain-phase log lines (bandwidth fixed at {DECODE_BANDWIDTH}):"
          f" step_overhead_s={eff.step_overhead_s:.6g} per_req_overhead_s={eff.per_req_overhead_s:.6g}"
          f" rms {rms:.2f} ms")
    print("stage 2: host stage and prefill GEMM share on the training windows")
    best, best_loss = grid_fit(train, eff, (("host_latency_s", HOST_GRID), ("flops", FLOPS_GRID),
                                            ("host_latency_s", HOST_GRID)))
    if rounds > 1:
        print("stage 3: every constant on the training windows (fine grid)")
        best, best_loss = fit(train, best, ALL_KEYS, FINE, rounds - 1)
    print(f"training loss {best_loss:.5f}")
    return best


# Split S's stage 2 (the preset): the host stage, per-request extend work and the prefill shares, two rounds.
SHAPE_GRIDS = (("prefill_per_req_s", (1.5e-5, 5e-5, 1e-4, 2e-4, 4e-4, 8e-4)),
               ("host_s_per_inflight", (0.0, 0.0001, 0.0002, 0.0003, 0.0005)),
               ("host_latency_s", (0.002, 0.004, 0.006, 0.008, 0.012)),
               ("flops", (0.45, 0.53, 0.59, 0.66, 0.74)),
               ("attention_flops", (0.08, 0.12, 0.18, 0.25, 0.35)),
               ("prefill_overhead_s", (0.002, 0.004, 0.0058, 0.008)))


def shape_fit(train: list[RealWindow], data: Path) -> Efficiency:
    """Split S: stage 1 the decode step (fixed cost, per request, the KV cache's HBM share) from the `Decode batch`
    lines of the matrix's training shapes without shared prefixes; stage 2 SHAPE_GRIDS on the training windows."""
    logs = sorted(data.glob("decode-lines-matrix-x0-*.txt"))
    eff, n_lines, rms = decode_log_fit_kv(logs, Efficiency(), replay_model(train[0].profile))
    print(f"stage 1: {n_lines} drain-phase lines of the training shapes without sharing: step_overhead_s="
          f"{eff.step_overhead_s:.6g} per_req_overhead_s={eff.per_req_overhead_s:.3g} kv_bandwidth="
          f"{eff.kv_bandwidth:.3f}, rms {rms:.2f} ms")
    print("stage 2: value grids on the training windows, two rounds")
    for _ in range(2):
        eff, best_loss = grid_fit(train, eff, SHAPE_GRIDS)
    print(f"training loss {best_loss:.5f}")
    return eff


def table(windows: list[RealWindow], sim: dict[str, dict[str, float]]) -> str:
    """Markdown table: real / sim / error per metric per window, then mean |error| per scored metric."""
    head = ("| run | knobs (mrr, mfs, chunk) | c | out tok/s real / sim | TPOT P50 ms | TPOT P99 ms | TTFT P50 ms |"
            " TTFT P99 ms |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    abs_err: dict[str, list[float]] = {m: [] for m in (*METRICS, "ttft_p99_ms")}
    for w in windows:
        s = sim[w.run_id]
        cells = []
        for m in abs_err:
            err = s[m] / w.real[m] - 1
            scored = m in metrics_of(w) or (m == "ttft_p99_ms" and w.per_request)
            if scored:
                abs_err[m].append(abs(err))
            fmt = "{:.0f} / {:.0f}" if m == "output_tps" else "{:.1f} / {:.1f}"
            cell = fmt.format(w.real[m], s[m]) + f" ({err:+.0%})"
            cells.append(cell if scored else f"*{cell}*")
        k = w.knobs
        lines.append(f"| {w.run_id} | {k.max_running_requests}, {k.mem_fraction_static}, {k.chunked_prefill_size} | "
                     f"{w.concurrency} | " + " | ".join(cells) + " |")
    lines.append("| **mean abs error** | | | " + " | ".join(f"{sum(v) / len(v):.0%}" if v else "-"
                                                           for v in abs_err.values()) + " |")
    return "\n".join(lines)


def knee_of(points: list[tuple[int, dict[str, float]]], threshold: float) -> int | None:
    """Knee concurrency of one ladder (sweep.analysis.knee's rule) from (concurrency, stats) pairs."""
    steps = [StepPoint(c, s.get("goodput_rps", 0.0), s["goodput_tps"], s["output_tps"], s.get("ttft_p99_ms"),
                       int(s.get("retractions", 0)), bool(s["passes_sla"])) for c, s in points]
    res = find_knee(steps, threshold)
    return None if res.point is None else res.point.concurrency


def knee_table(windows: list[RealWindow], sim: dict[str, dict[str, float]]) -> str:
    """Per configuration: the real and the simulated knee, KV pool sizes and the SLA verdict per step."""
    lines = ["| configuration | KV pool real / sim (tokens) | ladder | SLA pass real / sim | knee real / sim |",
             "|---|---|---|---|---|"]
    configs: dict[str, list[RealWindow]] = {}
    for w in windows:
        configs.setdefault(w.config_id, []).append(w)
    for cid, ladder in configs.items():
        if "passes_sla" not in ladder[0].real:
            continue
        thr = ladder[0].profile.search.flatten_threshold
        real = knee_of([(w.concurrency, w.real) for w in ladder], thr)
        simk = knee_of([(w.concurrency, sim[w.run_id]) for w in ladder], thr)
        verdict = " ".join(f"{'P' if w.real['passes_sla'] else 'F'}/{'P' if sim[w.run_id]['passes_sla'] else 'F'}"
                           for w in ladder)
        k = ladder[0].knobs
        pool = f"{ladder[0].pool_tokens or '?'} / {int(sim[ladder[0].run_id]['pool_tokens'])}"
        lines.append(f"| {cid} (mrr {k.max_running_requests}, mfs {k.mem_fraction_static}) | {pool} | "
                     f"{', '.join(str(w.concurrency) for w in ladder)} | {verdict} | {real} / {simk}"
                     f"{'' if real == simk else ' **differs**'} |")
    return "\n".join(lines)


def regime_table(windows: list[RealWindow], sim: dict[str, dict[str, float]]) -> str:
    """The server-side signals of the KV-bound regime, real vs sim, where the real window recorded them."""
    lines = ["| run | c | KV usage max real / sim | queue mean real / sim | retractions real / sim |"
             " prefix cache hit real / sim |", "|---|---|---|---|---|---|"]
    for w in windows:
        if "kv_usage_max" not in w.real:
            continue
        s, r = sim[w.run_id], w.real
        lines.append(f"| {w.run_id} | {w.concurrency} | {r['kv_usage_max']:.2f} / {s['kv_usage_max']:.2f} | "
                     f"{r['queue_len_mean']:.1f} / {s['queue_len_mean']:.1f} | {r['retractions']:.0f} / "
                     f"{s['retractions']:.0f} | {r.get('cache_hit_rate', 0):.0%} / {s['cache_hit_rate']:.0%} |")
    return "\n".join(lines)


def report(title: str, windows: list[RealWindow], sim: dict[str, dict[str, float]]) -> None:
    print(f"### {title}\n\n{table(windows, sim)}\n\n{knee_table(windows, sim)}\n\n{regime_table(windows, sim)}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="folder of the stored real windows")
    ap.add_argument("--fit", choices=sorted(SPLITS), help="fit on the split's training windows, report held-out ones")
    ap.add_argument("--holdout", action="store_true",
                    help="compare the preset per split (training vs held-out errors), no fitting")
    ap.add_argument("--holdout-shapes", action="store_true",
                    help="the preset on the matrix's held-out workload shapes against issue 21's bounds (exit 1 "
                         "when a figure leaves its bound); CI runs this")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--from-defaults", action="store_true", help="start from the pre-calibration constants")
    ap.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples for CIs (0: skip, faster)")
    ap.add_argument("--export", metavar="RESULTS_DB", help="write DATA/kv-calib.json from a real results.db")
    ap.add_argument("--pool", default="", help="with --export: real KV pool per mem fraction, e.g. 0.14=52275")
    args = ap.parse_args(argv)
    if args.export:
        pools = dict(kv.split("=") for kv in args.pool.split(",") if kv)
        n = export_db(args.export, args.data / "kv-calib.json", {k: int(v) for k, v in pools.items()})
        print(f"wrote {n} windows to {args.data / 'kv-calib.json'}")
        return 0
    windows = load_all(args.data)
    eff = PRE_CALIBRATION if args.from_defaults else Efficiency()
    if args.holdout_shapes:
        held = [w for w in windows if SPLITS["S"].held(w)]
        result = holdout_report(held, simulate(held, eff), knee_of)
        print(result.text)
        return 1 if result.problems else 0
    print(f"{len(windows)} real windows\n\nconstants: {json.dumps(asdict(eff))}\n")
    if args.fit:
        split = SPLITS[args.fit]
        train = [w for w in windows if split.train(w)]
        held = [w for w in windows if split.held(w)]
        print(f"## split {split.name}: {split.describe}\n")
        # only the logs of training configurations (decode-lines-mfs<fraction>.txt)
        fracs = {w.knobs.mem_fraction_static for w in train if w.study == "kv-calib"}  # the matrix: no drain log
        logs = [p for p in sorted(args.data.glob(DEFAULT_LOGS)) if float(p.stem.split("mfs")[-1]) in fracs]
        eff = shape_fit(train, args.data) if split.name == "S" else full_fit(train, eff, logs, args.rounds)
        print("\nfitted constants:")
        for f_ in fields(Efficiency):
            print(f"  {f_.name} = {getattr(eff, f_.name):.6g}")
        sim = simulate(windows, eff, args.bootstrap)
        report(f"split {split.name}, training windows", train, sim)
        report(f"split {split.name}, held-out windows", held, sim)
        return 0
    sim = simulate(windows, eff, args.bootstrap)
    print(f"loss (mean squared log error, scored metrics) {loss(windows, sim):.5f}\n")
    report("all windows", windows, sim)
    if args.holdout:
        for split in SPLITS.values():
            report(f"split {split.name} held-out ({split.describe})", [w for w in windows if split.held(w)], sim)
    return 0


def pool_check(data: Path = DATA) -> list[tuple[float, int, int]]:
    """(mem fraction, real pool, sim pool) for every stored configuration whose real pool is known."""
    out = {}
    for w in load_all(data):
        if w.pool_tokens and w.knobs.mem_fraction_static is not None:
            p = SimParams(gpu=gpu_preset(w.profile.server.sim_gpu), model=replay_model(w.profile))
            out[w.knobs.mem_fraction_static] = (w.pool_tokens, resolve(p, w.knobs).max_total_num_tokens)
    return [(f, r, s) for f, (r, s) in sorted(out.items())]


# The constants before any calibration (kept so the before column of docs/calibration.md is reproducible).
PRE_CALIBRATION = Efficiency(bandwidth=0.70, kv_bandwidth=0.70, flops=0.55, attention_flops=0.35, encoder_flops=0.30,
                             step_overhead_s=0.0035, per_req_overhead_s=12e-6, prefill_overhead_s=0.004,
                             allreduce_latency_s=8e-6, host_latency_s=0.0, host_s_per_inflight=0.0,
                             media_host_s_per_token=0.0)

if __name__ == "__main__":
    sys.exit(main())
