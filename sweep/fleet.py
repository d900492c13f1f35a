"""One host, many GPUs: `sweep sweep --gpus 0,1,2,3` runs one `sweep worker` per GPU group on one study.

Each worker is its own process with its own CUDA_VISIBLE_DEVICES (the group), its own server port range,
log folder and progress line; they share the study through its database (Optuna hands out the trials).
The progress lines are read from the database, so they show what every worker has stored, as it lands.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.errors import UsageError
from sweep.store import Store

PORT_BASE = 30000
PORTS_PER_WORKER = 100


@dataclass(frozen=True)
class Seat:
    """One planned worker: its label, GPU group and server port range [low, high)."""

    label: str
    gpus: tuple[int, ...]
    ports: tuple[int, int]


def plan(gpus: tuple[int, ...], per_server: int, port_base: int = PORT_BASE) -> tuple[list[Seat], list[int]]:
    """GPU groups of `per_server` GPUs in the order given; (seats, GPUs left over that fill no group)."""
    if per_server < 1:
        raise UsageError(f"--gpus-per-server {per_server}: expected 1 or more")
    if len(gpus) < per_server:
        raise UsageError(f"--gpus names {len(gpus)} GPU(s) but one server needs {per_server} (--gpus-per-server)")
    seats = []
    for i in range(len(gpus) // per_server):
        group = gpus[i * per_server:(i + 1) * per_server]
        low = port_base + i * PORTS_PER_WORKER
        seats.append(Seat("gpu" + "-".join(str(g) for g in group), group, (low, low + PORTS_PER_WORKER)))
    return seats, list(gpus[len(seats) * per_server:])


def worker_command(seat: Seat, study: str, db: str, out: Path, driver: str | None, launcher: str | None,
                   client_procs: int) -> list[str]:
    """The `sweep worker` command line of one seat."""
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", study, "--db", db, "--out", str(out),
           "--gpus", ",".join(str(g) for g in seat.gpus), "--ports", f"{seat.ports[0]}-{seat.ports[1]}",
           "--label", seat.label, "--no-progress", "--client-procs", str(client_procs)]
    if driver:
        cmd += ["--driver", driver]
    if launcher:
        cmd += ["--launcher", launcher]
    return cmd


def progress_lines(store: Store, study_id: int, labels: list[str]) -> dict[str, str]:
    """One line per worker from the database: measured steps and configurations, what it measures now."""
    workers = {w["label"]: w for w in store.workers(study_id)}
    runs = store.study_runs(study_id)
    out = {}
    for label in labels:
        w = workers.get(label)
        if w is None:
            out[label] = "starting"
            continue
        mine = [r for r in runs if r.get("worker_id") == w["id"]]
        done = [r for r in mine if r["status"] == "completed"]
        now = [r for r in mine if r["status"] == "running"]
        configs = {r["server_config_id"] for r in done}
        state = w["status"] if w["status"] != "running" else (
            f"measuring c={now[-1]['concurrency']} ({now[-1]['phase']})" if now else "launching / waiting")
        out[label] = f"{len(done)} steps over {len(configs)} configurations; {state}"
    return out


def run_fleet(seats: list[Seat], study: str, db: str, out: Path, driver: str | None, launcher: str | None,
              client_procs: int, console: Any, study_id: int, poll_s: float = 2.0) -> int:
    """Start one worker per seat, show their progress from the database until all exit; the worst exit code."""
    log_root = out / study / "logs"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs = []
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)  # each worker's --gpus sets its servers' own
    for seat in seats:
        folder = log_root / seat.label
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder / "worker.log", "wb")  # noqa: SIM115 - closed after the worker exits
        logs.append(log)
        procs[seat.label] = subprocess.Popen(worker_command(seat, study, db, out, driver, launcher, client_procs),
                                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        console.print(f"worker {seat.label}: GPUs {','.join(map(str, seat.gpus))}, ports {seat.ports[0]}-"
                      f"{seat.ports[1] - 1}, log {folder / 'worker.log'}")
    labels = [s.label for s in seats]
    shown: dict[str, str] = {}
    try:
        with Store(db) as store:
            while (alive := [p for p in procs.values() if p.poll() is None]):
                for label, line in progress_lines(store, study_id, labels).items():
                    if shown.get(label) != line:
                        console.print(f"  [{label}] {line}", markup=False, highlight=False)
                        shown[label] = line
                with contextlib.suppress(subprocess.TimeoutExpired):
                    alive[0].wait(poll_s)  # the refresh interval, cut short when a worker exits
            for label, line in progress_lines(store, study_id, labels).items():
                console.print(f"  [{label}] {line}", markup=False, highlight=False)
    except KeyboardInterrupt:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.wait(60)
        raise
    finally:
        for log in logs:
            log.close()
    codes = {label: p.wait() for label, p in procs.items()}
    for label, rc in codes.items():
        if rc != 0:
            console.print(f"[red]worker {label} exited with code {rc}[/]; see {log_root / label / 'worker.log'}")
    return max(codes.values(), default=0)
