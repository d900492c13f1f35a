"""The search bench's oracle: every configuration's full ladder, simulated ONCE per window length, cached on disk.

Each ladder is the real thing minus the store: VirtualLauncher (a fresh engine = a relaunch), VirtualDriver
windows climbing the whole ladder on that one instance, sweep.analysis.measure.compute_stats per step. No step is
skipped here (no saturation stop), so a strategy with or without pruning can be replayed from the same rows:
the steps before a stop are identical either way (same engine, same order). Each step keeps the virtual
seconds it took (warm-up + measured window + drain as the engine clock saw them) for the GPU-hour bill.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sweep.analysis.knee import find_knee
from sweep.analysis.ladder_steps import LadderStep, step_points
from sweep.analysis.run_stats import RunStats
from sweep.core.types import KNOB_NAMES, RequestSpec, ServerConfig
from sweep.ladder.step_verdicts import saturated
from sweep.profile import Profile
from sweep.profile.grid import grid

CACHE_VERSION = "v2"  # v2: goodput_rps_ci_low/high (migration 0022)
CACHE_DIR = Path(os.environ.get("BENCH_SEARCH_CACHE", "/tmp/sweep-bench-search"))
FULL_S = float(os.environ.get("BENCH_SEARCH_FULL_S", "150"))  # measured window of a final ladder step
SCREEN_S = float(os.environ.get("BENCH_SEARCH_SCREEN_S", "30"))  # measured window of a screening step
RESTART_S = 60.0  # server restart (launch + CUDA graphs + load) billed per ladder
KEEP = ("concurrency", "goodput_rps", "goodput_tps", "output_tps", "ttft_p95_ms", "ttft_p99_ms", "tpot_p95_ms",
        "retractions", "passes_sla", "sla_failures", "queue_len_mean", "kv_usage_max", "goodput_rps_ci_low",
        "goodput_rps_ci_high")


def bench_profile(seed: int = 2026) -> Profile:
    """Interactive-like chat traffic with shared system prompts, a tighter TPOT bound, a ladder up to 256."""
    return Profile.model_validate({
        "name": "bench-search",
        "sla": {"ttft_ms": 1000, "tpot_ms": 60, "ttft_percentile": 95, "tpot_percentile": 95,
                "max_error_rate": 0.01},
        "workload": {"seed": seed, "num_requests": 20000,
                     "prompt_len": {"kind": "lognormal", "mean": 900, "std": 700, "min": 32, "max": 8192},
                     "output_len": {"kind": "lognormal", "mean": 250, "std": 200, "min": 8, "max": 2048},
                     "shared_prefix": {"groups": 8, "length": 512, "share": 0.6}},
        "ladder": [16, 32, 64, 128, 256],
        "window": {"warmup_requests": 0, "warmup_seconds": 30, "measure_seconds": FULL_S, "drain_seconds": 60,
                   "request_timeout_s": 120},
        "server": {"launcher": "sim", "sim_gpu": "H200", "sim_model": "llama3-8b",
                   "model_path": "meta-llama/Meta-Llama-3-8B"},  # a hub name: no config.json, the preset's shape
        "search": {"sampler": "grid", "flatten_threshold": 0.10,
                   "space": {"max_running_requests": [8, 16, 32, 64, 128, 256],
                             "mem_fraction_static": [0.13, 0.16, 0.25, 0.85],
                             "chunked_prefill_size": [512, 2048, 8192, 16384],
                             "schedule_policy": ["lpm", "fcfs"]},
                   "screening": {"enabled": True, "fraction": SCREEN_S / FULL_S, "keep": 0.25, "min_keep": 2}},
    })


def all_configs(profile: Profile) -> list[ServerConfig]:
    space = grid(profile.search.space)
    return [ServerConfig.from_mapping(dict(zip(space, vals, strict=True))) for vals in itertools.product(*space.values())]


def params_of(config: ServerConfig) -> dict[str, Any]:
    return config.knobs()


def cache_key(config: ServerConfig, profile: Profile, measure_s: float, seed: int) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "cfg": config.knobs(), "measure_s": measure_s, "seed": seed,
                       "fp": profile.fingerprint(), "ladder": profile.ladder}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


_SPECS: list[RequestSpec] = []


def _init_worker(profile_json: str) -> None:
    from sweep.workload.requests import build_workload

    global _SPECS
    _SPECS = build_workload(Profile.model_validate_json(profile_json).workload)


def simulate_ladder(profile_json: str, knobs: dict[str, Any], measure_s: float, seed: int) -> dict[str, Any]:
    """One launch + the whole ladder in virtual time; {'oom': bool, 'steps': [row + 'virtual_s']}."""
    from sweep.analysis.measure import compute_stats
    from sweep.core.errors import LaunchError
    from sweep.drivers.virtual import VirtualDriver
    from sweep.launchers.virtual import VirtualLauncher

    profile = Profile.model_validate_json(profile_json)
    if not _SPECS:
        _init_worker(profile_json)
    window = profile.window.model_copy(update={"measure_seconds": measure_s})
    launcher = VirtualLauncher(profile.server.sim_gpu, profile.server.sim_model, profile.server.extra_args,
                               model_path=profile.server.model_path)
    try:
        handle = launcher.start(ServerConfig(**knobs))
    except LaunchError as exc:
        return {"oom": True, "failure": str(exc), "steps": []}
    driver = VirtualDriver(seed=seed)
    eng = handle.engine
    assert eng is not None  # a VirtualLauncher's handle carries its engine
    steps: list[dict[str, Any]] = []
    for c in profile.ladder:
        t0 = eng.now
        result = driver.run_window(handle, _SPECS, c, window, arrival=profile.arrival)
        stats = compute_stats(result, profile.sla, bootstrap=0).columns()
        row = {k: stats.get(k) for k in KEEP if k != "concurrency"}
        row.update(concurrency=c, virtual_s=float(eng.now - t0), aborted=result.aborted)
        steps.append(row)
        if result.aborted is not None:
            break
    launcher.stop(handle)
    return {"oom": False, "failure": None, "steps": steps}


Table = dict[str, dict[str, Any]]  # config key -> cached ladder


def load_or_simulate(profile: Profile, configs: Sequence[ServerConfig], measure_s: float, seed: int = 0,
                     workers: int | None = None, log: Any = print) -> Table:
    """Every configuration's ladder at this window length, from /tmp when cached, else simulated in parallel."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    out: Table = {}
    todo: list[tuple[ServerConfig, Path]] = []
    for cfg in configs:
        path = CACHE_DIR / f"{cache_key(cfg, profile, measure_s, seed)}.json"
        if path.exists():
            out[cfg.key()] = json.loads(path.read_text())
        else:
            todo.append((cfg, path))
    if todo:
        n = workers or max(1, os.cpu_count() or 1)
        log(f"  simulating {len(todo)} ladders at {measure_s:g} s windows on {n} processes (cached under {CACHE_DIR})")
        pj = profile.model_dump_json()
        with ProcessPoolExecutor(n, initializer=_init_worker, initargs=(pj,)) as pool:
            futs = [(cfg, path, pool.submit(simulate_ladder, pj, cfg.knobs(), measure_s, seed)) for cfg, path in todo]
            for i, (cfg, path, fut) in enumerate(futs, 1):
                res = fut.result()
                path.write_text(json.dumps(res))
                out[cfg.key()] = res
                if i % 24 == 0 or i == len(futs):
                    log(f"    {i}/{len(futs)}")
    return out


def ladder_run(entry: dict[str, Any], prune: bool, flatten: float) -> tuple[float | None, float, int]:
    """Replay one ladder: (knee goodput or None, virtual seconds billed incl. restart, steps run).

    prune: stop after a step that fails the SLA while sweep.ladder.step_verdicts.saturated() says the server is saturated
    (exactly LadderRunner._climb's rule); without it every step of the ladder runs.
    """
    if entry["oom"]:
        return None, RESTART_S, 0
    ran: list[dict[str, Any]] = []
    steps: list[LadderStep] = []
    for row in entry["steps"]:
        ran.append(row)
        stats = RunStats.from_row(row)
        steps.append(LadderStep(0, int(row["concurrency"]), "final", stats))
        if row.get("aborted") is not None:
            break
        if prune and not stats.passes_sla and saturated(stats, steps[-2].stats if len(steps) > 1 else None):
            break
    knee = find_knee(step_points(steps), flatten)
    value = knee.point.goodput_tps if knee.point is not None else None
    return value, RESTART_S + sum(float(r["virtual_s"]) for r in ran), len(ran)


def truth(table: Table, flatten: float) -> dict[str, float]:
    """Each configuration's knee goodput from its full, unpruned ladder (0 when infeasible)."""
    return {k: (ladder_run(e, False, flatten)[0] or 0.0) for k, e in table.items()}


def landscape_summary(values: dict[str, float], configs: Sequence[ServerConfig], tol: float) -> list[str]:
    """Lines: best, spread, how many configurations are within tol of the best, per-knob best values."""
    by_key = {c.key(): c for c in configs}
    ranked = sorted(values.items(), key=lambda kv: -kv[1])
    best = ranked[0][1]
    vals = [v for _, v in ranked]
    near = [k for k, v in ranked if v >= (1 - tol) * best]
    feasible = [v for v in vals if v > 0]
    q = sorted(feasible)
    lines = [f"{len(vals)} configurations, {len(feasible)} feasible; knee goodput (output tok/s): best {best:.0f}, "
             f"median {q[len(q) // 2]:.0f}, min feasible {q[0]:.0f}",
             f"within {tol:.0%} of best: {len(near)} ({len(near) / len(vals):.1%} of the grid)"]
    lines += [f"  #{i + 1} {by_key[k].label()}: {v:.0f}" for i, (k, v) in enumerate(ranked[:5])]
    for knob in KNOB_NAMES:
        per: dict[Any, float] = {}
        for k, v in values.items():
            x = getattr(by_key[k], knob)
            per[x] = max(per.get(x, 0.0), v)
        lines.append(f"  best knee by {knob}: " + ", ".join(f"{x}={v:.0f}" for x, v in per.items()))
    return lines


def within(value: float, best: float, tol: float) -> bool:
    """The bench's success rule: a configuration is near-best when its knee is within tol of the grid's best."""
    return best > 0 and value >= (1.0 - tol) * best - 1e-9 and not math.isnan(value)
