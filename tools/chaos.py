"""The chaos night (issue 23): a study on the simulated server, two `sweep worker`s, faults every 30-90 s.

    .venv/bin/python tools/chaos.py --seed 23 [--measure-s 10] [--dir /tmp/sweep-chaos-23]    (make chaos)

A study of 24 configurations (the smoke profile, short windows, a 3-step ladder) is created with `sweep study create`
on one SQLite file, and two `sweep worker` processes measure it over the real launcher path (the simulated SGLang
server as a process of its own, the HTTP driver). The harness supervises them as systemd's Restart=always would:
a worker that exits is started again with the same label after a short backoff. Every 30-90 s (seeded) it injects
one fault (each kind once per round, in a seeded order) (tools/chaos_faults.py): kill -9 of a worker or of its process group, SIGSTOP of a worker past the
heartbeat grace, kill -9 or SIGSTOP (a hang past the stall timeout) of a worker's server, an exclusive SQLite
transaction held 30 s, the study's filesystem full for a moment (a tmpfs of its own, mounted when run as root;
skipped otherwise), the port a worker's next server would take bound by another process.

It ends when the study is done and prints (and writes to DIR/chaos.md) the table of tools/chaos_tally.py: the
configurations measured exactly once, runs lost, duplicates, orphans, configurations with two verdicts, and every
fault with its time and outcome. Exit 0 when nothing was lost, duplicated or left behind, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from chaos_faults import FAULTS, Done, Target, Timing, launch_ports, q
from chaos_tally import Injected, attempt_fate, markdown, processes_in, tally

ROOT = Path(__file__).resolve().parents[1]
STUDY = "chaos"
SPACE: dict[str, list[Any]] = {"max_running_requests": [4, 8, 16, 32], "mem_fraction_static": [0.8, 0.85, 0.9],
         "schedule_policy": ["fcfs", "lpm"]}
LADDER = [2, 4, 8, 16]
HEARTBEAT_S, GRACE_S, STALL_S = 2, 10, 6
BACKOFF_S = 3.0  # systemd's RestartSec
PORT_BASE = 31400  # below Linux's ephemeral range: nothing else picks these by chance


@dataclass
class Supervised:
    """One worker label kept running as a supervisor would: started again after each exit until the study is done."""

    label: str
    ports: tuple[int, int]
    argv: list[str]
    cwd: Path
    logs: Path
    proc: subprocess.Popen[bytes] | None = None
    restart_at: float = 0.0
    starts: int = 0
    exits: list[tuple[float, int, int, str]] = field(default_factory=list)  # (monotonic, pid, rc, last line)

    def log_path(self, n: int) -> Path:
        return self.logs / f"{self.label}-{n}.log"

    def tick(self, now: float, done: bool) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            self.exits.append((now, self.proc.pid, self.proc.returncode, last_line(self.log_path(self.starts))))
            self.proc = None
            self.restart_at = now + BACKOFF_S
        if self.proc is None and not done and now >= self.restart_at:
            self.starts += 1
            with open(self.log_path(self.starts), "wb") as log:
                self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=_env(), start_new_session=True)

    def target(self, db: Path, fs: Path, disk: bool) -> Target:
        pid = self.proc.pid if self.proc is not None and self.proc.poll() is None else None
        return Target(self.label, pid, self.ports, db, fs, disk)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def last_line(path: Path) -> str:
    """The last line of a worker's log that says something (an error line if there is one)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines[-40:] if "rror" in ln or "fenced" in ln or "interrupted" in ln]
    return (errors or lines or [""])[-1][:160]


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def sweep(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweep.cli", *args]


def study_sets(measure_s: float) -> list[str]:
    sets = {"search.space": SPACE, "ladder": LADDER, "window.measure_seconds": measure_s,
            "window.warmup_requests": 2, "window.drain_seconds": 2, "window.min_requests": 2,
            "window.request_timeout_s": 30, "server.extra_args": ["--load-format", "dummy"],
            "server.shutdown_grace_s": 5, "server.startup_timeout_s": 60, "server.stall_timeout_s": STALL_S,
            "search.heartbeat_s": HEARTBEAT_S, "search.grace_s": GRACE_S}
    out: list[str] = []
    for key, value in sets.items():
        out += ["--set", f"{key}={json.dumps(value)}"]
    return out


def mount_tmpfs(fs: Path, size_mib: int) -> str | None:
    """A small tmpfs for the study's files (the disk-full fault fills it); None, or why it could not be mounted."""
    fs.mkdir(parents=True)
    if os.geteuid() != 0:
        return "not root: no filesystem of the study's own to fill (filling the host's disk is not an option)"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(fs)], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else f"mount tmpfs failed: {r.stderr.strip()[:120]}"


def study_done(db: Path, n_configs: int) -> bool:
    rows = q(db, "SELECT config_key, status FROM server_configs")
    if not rows or any(s in ("running", "pending") for _, s in rows):
        return False
    return len({k for k, s in rows if s in ("completed", "infeasible", "failed")}) >= n_configs


def outcome(kind: str, done: Done, at: float, wall: float, sups: list[Supervised], db: Path,
            next_at: float | None = None) -> str:
    """What the study did about one fault: the struck attempt's fate, the worker exits and restarts that followed
    it (up to 60 s after its hold, and before the next fault)."""
    parts = []
    if done.detail.startswith("skipped"):
        return "nothing to strike"
    if done.attempt_id is not None:
        parts.append(attempt_fate(db, done.attempt_id))
    end = min((done.held_until_s or at) + 60, next_at if next_at is not None else float("inf"))
    for s in sups:
        for t, pid, rc, line in s.exits:
            if at <= t <= end:
                parts.append(f"{s.label} pid {pid} exited {rc} after {t - at:.0f} s"
                             + (f" ({line})" if rc != 0 and line else "") + ", restarted")
    if kind == "port_stolen":
        label = next(s.label for s in sups if done.detail.find(f"{s.label}'s") >= 0)
        until = wall + ((done.held_until_s or at) - at)
        launches = launch_ports(db, label, wall, until)
        parts.append("launches while held: " + (", ".join(f"attempt {c} on port {p}: {st}" for c, p, st in launches)
                                                or "none"))
    return "; ".join(parts) or "no attempt or worker touched"


def run(args: argparse.Namespace) -> int:
    base = Path(args.dir or f"/tmp/sweep-chaos-{args.seed}").resolve()
    if base.exists() and any(base.iterdir()):
        print(f"chaos: {base} exists and is not empty; give another --dir", file=sys.stderr)
        return 2
    fs, logs = base / "fs", base / "logs"
    no_disk = mount_tmpfs(fs, args.tmpfs_mib)
    logs.mkdir(parents=True)
    db = fs / "results.db"
    n_configs = len(SPACE["max_running_requests"]) * len(SPACE["mem_fraction_static"]) * len(SPACE["schedule_policy"])
    rng = random.Random(args.seed)
    kinds = [k for k in args.faults.split(",") if k]
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown:
        print(f"chaos: unknown fault {unknown[0]} (known: {', '.join(FAULTS)})", file=sys.stderr)
        return 2
    timing = Timing(grace_s=GRACE_S, stall_s=STALL_S, db_lock_s=args.db_lock_s, port_hold_s=args.port_hold_s)
    sups: list[Supervised] = []
    faults: list[tuple[int, str, str, float, float, Done]] = []
    try:
        subprocess.run(sweep("study", "create", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--study", STUDY,
                             "--db", f"sqlite:///{db}", "--driver", "http", "--launcher", "sim",
                             *study_sets(args.measure_s)), cwd=fs, env=_env(), check=True, stdout=subprocess.DEVNULL)
        for i, label in enumerate(("w1", "w2")):
            ports = (PORT_BASE + 10 * i, PORT_BASE + 10 * i + 3)
            argv = sweep("worker", "--study", STUDY, "--db", f"sqlite:///{db}", "--out", str(fs / "reports"),
                         "--label", label, "--no-progress", "--no-peers", "--driver", "http", "--launcher", "sim",
                         "--ports", f"{ports[0]}-{ports[1]}")
            sups.append(Supervised(label, ports, argv, fs, logs))
        start = time.monotonic()
        start_wall = time.time()
        next_fault = start + rng.uniform(args.min_gap, args.max_gap)
        deck: list[str] = []
        current: tuple[threading.Thread, list[Done], int, str, str, float, float] | None = None
        print(f"chaos: seed {args.seed}, {n_configs} configurations, faults {', '.join(kinds)}; "
              f"disk full {'skipped: ' + no_disk if no_disk else 'on a tmpfs of ' + str(args.tmpfs_mib) + ' MiB'}; "
              f"files in {base}", flush=True)
        while True:
            now = time.monotonic()
            done = study_done(db, n_configs)
            for s in sups:
                s.tick(now, done)
            if current is not None and not current[0].is_alive():
                _, held, n, kind, target, at, wall = current
                got = held[0] if held else Done("the fault raised; see the harness's stderr")
                faults.append((n, kind, target, at, wall, got))
                print(f"chaos: +{(at - start) / 60:5.1f} min #{n} {kind} {target}: {got.detail}", flush=True)
                current = None
            if done and current is None and all(s.proc is None for s in sups):
                break
            if now - start > args.max_minutes * 60:
                print(f"chaos: the study is not done after {args.max_minutes} min; stopping", flush=True)
                break
            if current is None and not done and now >= next_fault:
                if not deck:  # every kind once per round, in a seeded order: no kind left out by the draw
                    deck = rng.sample(kinds, len(kinds))
                kind = deck.pop()
                sup = rng.choice(sups)
                tgt = sup.target(db, fs, no_disk is None)
                box: list[Done] = []
                fn = FAULTS[kind]
                th = threading.Thread(target=lambda fn=fn, tgt=tgt, box=box: box.append(fn(tgt, timing)), daemon=True)
                th.start()
                who = "results.db" if kind in ("db_locked", "disk_full") else sup.label
                current = (th, box, len(faults) + 1, kind, who, now, time.time())
                next_fault = now + rng.uniform(args.min_gap, args.max_gap)
            time.sleep(0.5)
        elapsed = time.monotonic() - start
    finally:
        for s in sups:
            s.stop()
    # Every worker has exited: what still runs in the study's folder after 15 s is an orphan.
    orphans_deadline = time.monotonic() + 15
    while processes_in(base) and time.monotonic() < orphans_deadline:
        time.sleep(0.5)
    t = tally(db, STUDY, n_configs, len(LADDER), base)
    starts = [f[3] for f in faults] + [None]
    injected = [Injected(n, kind, who, at - start, time.strftime("%H:%M:%S", time.localtime(wall)), d.detail,
                         outcome(kind, d, at, wall, sups, db, starts[i + 1]))
                for i, (n, kind, who, at, wall, d) in enumerate(faults)]
    restarts = sum(max(0, s.starts - 1) for s in sups)
    header = [f"`{' '.join(sys.argv)}`: seed {args.seed}, {elapsed / 60:.1f} min "
              f"(started {time.strftime('%Y-%m-%d %H:%M', time.localtime(start_wall))}), "
              f"{n_configs} configurations x ladder {LADDER}, measure {args.measure_s:g} s, 2 workers, "
              f"{restarts} worker restarts, heartbeat {HEARTBEAT_S} s, grace {GRACE_S} s, stall timeout {STALL_S} s"
              + (f"; disk full skipped: {no_disk}" if no_disk else "")]
    text = markdown(t, injected, header)
    _cleanup(base, fs, db, no_disk is None)
    (base / "chaos.md").write_text(text)
    print(text)
    return 0 if t.clean and elapsed >= args.min_minutes * 60 else 1


def _cleanup(base: Path, fs: Path, db: Path, mounted: bool) -> None:
    """Kill what was left (after counting it), keep the database and server logs, unmount the study's tmpfs."""
    for line in processes_in(base):
        try:
            psutil.Process(int(line.split()[0])).kill()
        except psutil.Error:
            pass
    if db.exists():
        src = sqlite3.connect(db)
        dst = sqlite3.connect(base / "results.db")
        src.backup(dst)
        src.close()
        dst.close()
    if (fs / "reports").exists():
        shutil.copytree(fs / "reports", base / "reports", dirs_exist_ok=True)
    if mounted:
        subprocess.run(["umount", str(fs)], check=False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=23)
    p.add_argument("--dir", help="where the study, logs and chaos.md go (default /tmp/sweep-chaos-SEED)")
    p.add_argument("--measure-s", type=float, default=30.0, help="each window's measured seconds")
    p.add_argument("--min-gap", type=float, default=30.0)
    p.add_argument("--max-gap", type=float, default=90.0)
    p.add_argument("--min-minutes", type=float, default=20.0, help="a night shorter than this exits 1")
    p.add_argument("--max-minutes", type=float, default=90.0, help="give up after this long")
    p.add_argument("--db-lock-s", type=float, default=30.0)
    p.add_argument("--port-hold-s", type=float, default=90.0, help="how long a stolen port is held")
    p.add_argument("--tmpfs-mib", type=int, default=256)
    p.add_argument("--faults", default=",".join(FAULTS), help="comma-separated fault kinds")
    return run(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
