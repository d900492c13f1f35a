"""Wall time of one study with 1, 2 and 4 `sweep worker` processes on the simulator (HTTP driver, short windows).

Each worker is a separate process with its own simulated servers and port range; they share the study through
one SQLite file (one host) or, with BENCH_PG_URL set, a PostgreSQL database. The study is the same each time
(an 8-configuration grid, two ladder steps, 2-second windows): what changes is how many workers take its trials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import write_result
from sweep.fleet.shared_study import create_study
from sweep.ladder.wiring import ROOT
from sweep.profile import load_profile
from sweep.store import Store
from sweep.study.orchestrator import Orchestrator

WORKERS = (1, 2, 4)
GRID: dict[str, list[float]] = {"max_running_requests": [2, 4, 8, 16], "mem_fraction_static": [0.8, 0.85]}
OVERRIDES = {"search.space": GRID, "ladder": [2, 4], "window.warmup_requests": 2, "window.warmup_seconds": 0,
             "window.measure_seconds": 2, "window.drain_seconds": 2, "search.heartbeat_s": 2,
             "server.launcher": "sim"}


def one_study(n: int, db: str, out: Path) -> dict[str, float]:
    """Create the study, run n workers on it to the end; wall seconds and configurations per worker."""
    name = f"bench-workers-{n}-{os.getpid()}-{time.monotonic_ns()}"
    profile = load_profile(ROOT / "profiles" / "smoke.yaml", OVERRIDES)
    sid = create_study(Orchestrator(profile, db, out, driver="http"), name)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "sweep.cli", "worker", "--study", name, "--db", db,
                               "--out", str(out), "--driver", "http", "--launcher", "sim", "--no-progress",
                               "--label", f"w{i}", "--ports", f"{31000 + 100 * i}-{31100 + 100 * i}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) for i in range(n)]
    errors = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - t0
    for p, err in zip(procs, errors, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"a worker failed (exit {p.returncode}): {err.decode()[-2000:]}")
    with Store(db) as store:
        done = [c for c in store.server_configs(sid) if c.get("status") in ("completed", "infeasible")]
    keys = Counter(c.get("config_key") for c in done)
    if len(keys) != len(GRID["max_running_requests"]) * len(GRID["mem_fraction_static"]) or set(keys.values()) != {1}:
        raise RuntimeError(f"{n} workers: configurations not measured exactly once: {dict(keys)}")
    per_worker = Counter(c.get("worker_id") for c in done)
    return {"wall_s": wall, "configs": float(len(done)), "busiest": float(max(per_worker.values()))}


def main() -> int:
    """Run the study with 1, 2 and 4 workers, print the table and write reports/bench/bench-workers.md."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in WORKERS:
            db = os.environ.get("BENCH_PG_URL") or f"sqlite:///{tmp}/workers-{n}.db"
            rows.append((n, one_study(n, db, Path(tmp) / "reports")))
    base = rows[0][1]["wall_s"]
    table = ["| workers | wall s | speed-up | ideal | configurations (busiest worker) |", "|---|---|---|---|---|"]
    table += [f"| {n} | {r['wall_s']:.1f} | {base / r['wall_s']:.2f}x | {n}x | {r['configs']:.0f} "
              f"({r['busiest']:.0f}) |" for n, r in rows]
    print("\n".join(table))
    storage = "PostgreSQL (BENCH_PG_URL)" if os.environ.get("BENCH_PG_URL") else "one SQLite file (one host)"
    write_result("workers",
        "# Benchmark: one study, several workers\n\n"
        "Command: `make bench ARGS=workers` (runs `python -m bench workers`; writes reports/bench/bench-workers.md).\n\n"
        f"The same study ({json.dumps(GRID)}, ladder [2, 4], 2 s measured windows, simulated servers over HTTP)\n"
        f"run by 1, 2 and 4 `sweep worker` processes sharing it through {storage}. Wall time is from the first\n"
        "worker's start to the last one's exit; every configuration was measured exactly once in each run.\n\n"
        + "\n".join(table) + "\n\n"
        f"Machine: {os.cpu_count()} CPU cores. Each worker runs its own simulated server and load generator, so\n"
        "the speed-up flattens once the cores are busy (server start-up is CPU-bound); on GPU hosts the servers'\n"
        "work runs on the GPUs and the workers mostly wait on their windows.\n", "docs/bench-workers.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
