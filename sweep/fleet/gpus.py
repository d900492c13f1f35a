"""One host, many GPUs: `sweep sweep --gpus 0,1,2,3` runs one `sweep worker` per GPU group on one study.

Each worker is its own process with its own CUDA_VISIBLE_DEVICES (the group), its own server port range,
log folder and progress line; they share the study through its database (Optuna hands out the trials).
The progress is read from the database, so it shows every worker's work as it lands, those of other hosts on
a shared (PostgreSQL) study too: each finished window as one result line naming its worker, and a line per
worker (sweep/views/workers.py) whenever what it does changes.

Workers die with their fleet: on Linux each is started with PR_SET_PDEATHSIG = SIGTERM, so a kill -9 of
`sweep sweep --gpus` stops every worker as Ctrl-C would (its server stopped, its attempt marked aborted). A fleet
that starts on a study whose workers still run on this host (a fleet killed where no parent-death signal exists,
or workers started by hand) refuses in one line, naming them, instead of starting twins on their labels and ports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweep.core.errors import UsageError
from sweep.store import Store, WorkerRecord
from sweep.study.liveness import process_is_gone
from sweep.ui.progress import WIDE, clock, result_lines
from sweep.views.live import read_state
from sweep.views.workers import activity, worker_labels

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
                   client_procs: int, profile_dir: Path | None = None) -> list[str]:
    """The `sweep worker` command line of one seat (profile_dir: where the profile's relative inputs are)."""
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", study, "--db", db, "--out", str(out),
           "--gpus", ",".join(str(g) for g in seat.gpus), "--ports", f"{seat.ports[0]}-{seat.ports[1]}",
           "--label", seat.label, "--no-progress", "--no-peers", "--client-procs", str(client_procs)]
    if driver:
        cmd += ["--driver", driver]
    if launcher:
        cmd += ["--launcher", launcher]
    if profile_dir is not None:
        cmd += ["--profile-dir", str(profile_dir)]
    return cmd


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with(parent_pid: int) -> Callable[[], None] | None:
    """A Popen preexec_fn that has the child SIGTERMed when `parent_pid` (the fleet) dies; None off Linux.

    The signal follows the thread that started the child: the fleet starts its workers from its main thread,
    which lives as long as the fleet. A fleet that died before prctl took effect is caught by the ppid check."""
    if not sys.platform.startswith("linux"):
        return None

    def preexec() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def live_workers(store: Store, study_id: int, host: str | None = None) -> list[WorkerRecord]:
    """The study's workers recorded as running on this host whose process still runs (same pid, same start)."""
    here = host or socket.gethostname()
    return [w for w in store.workers(study_id)
            if w.status == "running" and w.host == here and w.pid is not None and w.process_started is not None
            and not process_is_gone(w.pid, w.process_started)]


def refuse_twins(store: Store, study: str | None) -> None:
    """UsageError (one line) when workers of the named study still run on this host: a fleet would start twins.
    Called before the study is opened (a resume cleans up after dead workers: these are alive)."""
    row = store.get_study_by_name(study) if study else None
    live = live_workers(store, row.id) if row is not None else []
    if live:
        who = ", ".join(f"{w.label} (pid {w.pid})" for w in live)
        raise UsageError(f"study {study} already has {len(live)} live worker(s) on this host: {who}; not starting "
                         "more on their labels and ports (stop them, or let them finish)")


class FleetProgress:
    """What the fleet prints from the study's database: every worker's landed windows and what each does."""

    def __init__(self, store: Store, study_id: int, labels: list[str], console: Console,
                 percentiles: tuple[int, int] = (99, 99), exclude: tuple[str, int] | None = None,
                 on_window: Callable[[str], None] | None = None):
        self.store, self.study_id, self.labels, self.console = store, study_id, labels, console
        self.percentiles = percentiles
        self.exclude = exclude  # (host, pid) of a worker whose windows are not news here: it prints its own
        self.on_window = on_window  # called with the phase of each window that lands (a lone worker's count)
        self.seen: set[int] = set()
        self.shown: dict[str, str] = {}
        self.counted: tuple[str, int, int, int] | None = None

    def lines(self) -> tuple[list[str], dict[str, str]]:
        """(result lines of windows landed since the last call, worker label -> its activity line)."""
        workers = self.store.workers(self.study_id)
        configs = {c.id: c for c in self.store.server_configs(self.study_id)}
        runs = [r for r in self.store.study_runs(self.study_id) if r.status != "aborted"]
        names = worker_labels(workers)
        mine = {w.id for w in workers if self.exclude == (w.host, w.pid)}
        landed = []
        for r in runs:
            if r.status != "completed" or r.id in self.seen or r.reference_for_run_id is not None \
                    or r.placement.worker_id in mine or r.stats is None:
                continue
            self.seen.add(r.id)
            if self.on_window is not None:
                self.on_window(r.phase)
            who = names.get(r.placement.worker_id or -1)
            label = configs[r.server_config_id].label()
            width = self.console.width - 2 if self.console.is_terminal else WIDE  # a pipe: one line per window
            landed += result_lines(r.phase, label, r.concurrency, r.stats, width, escape(f"[{who}]") if who else None,
                                   self.percentiles)
        seated = {a.worker: a.line() for a in activity(workers, list(configs.values()), runs)}
        waiting = {label: "starting" for label in self.labels if label not in seated}
        return landed, {**waiting, **seated}

    def show(self) -> None:
        """Print what landed, then the line of each worker whose line changed."""
        landed, status = self.lines()
        for line in landed:
            self.console.print("  " + line, highlight=False)
        for label, line in status.items():
            if self.shown.get(label) != line:
                self.console.print(f"  [{label}] {line}", markup=False, highlight=False)
                self.shown[label] = line
        if self.exclude is None:  # the fleet's own view (a lone worker's bars count the study for it)
            self.count()

    def count(self) -> None:
        """The study's count, as the live page counts it, whenever a configuration starts or ends: this phase's
        configurations done of those planned, running and failed, and the study's ETA."""
        s = read_state(self.store, self.study_id)
        key = (s.phase, s.done, s.running, s.failed)
        if key != self.counted:
            self.counted = key
            self.console.print(f"  study ({s.phase}): {s.done}/{s.planned} configurations done, {s.running} running, "
                               f"{s.failed} failed, ETA {clock(s.eta_s)}", markup=False, highlight=False)


def run_fleet(seats: list[Seat], study: str, db: str, out: Path, driver: str | None, launcher: str | None,
              client_procs: int, console: Console, study_id: int, poll_s: float = 2.0,
              percentiles: tuple[int, int] = (99, 99), profile_dir: Path | None = None) -> int:
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
        procs[seat.label] = subprocess.Popen(worker_command(seat, study, db, out, driver, launcher, client_procs,
                                                            profile_dir),
                                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                             preexec_fn=die_with(os.getpid()))  # noqa: PLW1509 - no threads yet
        console.print(f"worker {seat.label}: GPUs {','.join(map(str, seat.gpus))}, ports {seat.ports[0]}-"
                      f"{seat.ports[1] - 1}, log {folder / 'worker.log'}")
    try:
        with Store(db) as store:
            progress = FleetProgress(store, study_id, [s.label for s in seats], console, percentiles)
            while (alive := [p for p in procs.values() if p.poll() is None]):
                progress.show()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    alive[0].wait(poll_s)  # the refresh interval, cut short when a worker exits
            progress.show()  # the last windows and every worker's closing line
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
