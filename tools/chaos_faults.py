"""The faults of the chaos night (tools/chaos.py): each one injected into a running study of two `sweep worker`s.

A fault is a function of the harness's view (Target: the worker's process, its label, ports and the study's files)
that does its damage, waits out its hold where it has one, undoes what it held (SIGCONT, ROLLBACK, the filler file
removed, the socket closed) and returns what it did as one line. Processes are addressed through psutil, so a pid
reused by another process after an exit is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass(frozen=True)
class Timing:
    """The study's liveness settings the faults must outlast."""

    grace_s: float  # a worker silent this long is dead: a SIGSTOP holds longer
    stall_s: float  # no response bytes this long: a server hang holds longer
    db_lock_s: float = 30.0
    disk_full_s: float = 8.0
    port_hold_s: float = 30.0


@dataclass(frozen=True)
class Target:
    """One supervised worker as a fault sees it (pid None while it is down and waiting to be restarted)."""

    label: str
    pid: int | None
    ports: tuple[int, int]  # [low, high): the range given to `sweep worker --ports`
    db: Path
    fs: Path  # the folder the study writes to (a small tmpfs of its own when mounted)
    disk_full_possible: bool


@dataclass(frozen=True)
class Done:
    """What a fault did: one line, the attempt that was running when it struck, and when its hold ended."""

    detail: str
    attempt_id: int | None = None
    held_until_s: float | None = None  # monotonic


def q(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of a read-only query, [] while the database cannot be read (locked, missing, disk full)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return []
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


def running_attempt(db: Path, pid: int | None) -> tuple[int, str] | None:
    """(server_configs id, what it is) of the attempt the worker process pid runs now, if any."""
    if pid is None:
        return None
    rows = q(db, "SELECT c.id, c.config_key, c.status FROM server_configs c JOIN sweep_workers w ON w.id = c.worker_id "
                 "WHERE w.pid = ? AND c.status = 'running' ORDER BY c.id DESC LIMIT 1", (pid,))
    if not rows:
        return None
    cid, key, _ = rows[0]
    step = q(db, "SELECT concurrency FROM runs WHERE server_config_id = ? AND status = 'running'", (cid,))
    return cid, f"attempt {cid} ({key})" + (f" at concurrency {step[0][0]}" if step else " launching or between steps")


def _proc(pid: int | None) -> psutil.Process | None:
    if pid is None:
        return None
    try:
        p = psutil.Process(pid)
        return p if p.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


def server_of(pid: int | None) -> psutil.Process | None:
    """The simulated server process the worker pid launched (its child in a session of its own), if one runs."""
    p = _proc(pid)
    if p is None:
        return None
    with contextlib.suppress(psutil.Error):
        for kid in p.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "sglang_sim" in " ".join(kid.cmdline()) and kid.status() != psutil.STATUS_ZOMBIE:
                    return kid
    return None


def _signal_group(p: psutil.Process, sig: int) -> bool:
    """Signal p's process group (p is checked to be the same process first); False when it is gone."""
    try:
        if not p.is_running():
            return False
        os.killpg(os.getpgid(p.pid), sig)
        return True
    except (psutil.Error, ProcessLookupError, PermissionError):
        return False


def _wait_for(cond: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every_s)
    return None


# ------------------------------------------------------------------------------------------------ the faults


def kill9_worker(t: Target, timing: Timing) -> Done:
    """kill -9 of the worker process alone: its server (a session of its own) and client processes are left."""
    p = _proc(t.pid)
    if p is None:
        return Done(f"skipped: {t.label} is not running")
    att = running_attempt(t.db, t.pid)
    p.send_signal(signal.SIGKILL)
    return Done(f"kill -9 {t.label} pid {t.pid} during {att[1] if att else 'no attempt'}", att[0] if att else None)


def kill9_group(t: Target, timing: Timing) -> Done:
    """kill -9 of sweep's whole process group (the worker and its client processes, not its server)."""
    p = _proc(t.pid)
    if p is None:
        return Done(f"skipped: {t.label} is not running")
    att = running_attempt(t.db, t.pid)
    _signal_group(p, signal.SIGKILL)
    return Done(f"kill -9 of process group {t.pid} ({t.label}) during {att[1] if att else 'no attempt'}",
                att[0] if att else None)


def sigstop_worker(t: Target, timing: Timing) -> Done:
    """SIGSTOP of the worker's process group for the heartbeat grace + 10 s, then SIGCONT."""
    p = _proc(t.pid)
    if p is None:
        return Done(f"skipped: {t.label} is not running")
    att = running_attempt(t.db, t.pid)
    hold = timing.grace_s + 10
    if not _signal_group(p, signal.SIGSTOP):
        return Done(f"skipped: {t.label} exited")
    try:
        time.sleep(hold)
    finally:
        _signal_group(p, signal.SIGCONT)
    return Done(f"SIGSTOP {t.label} (group {t.pid}) {hold:g} s during {att[1] if att else 'no attempt'}, then SIGCONT",
                att[0] if att else None, time.monotonic())


def server_crash(t: Target, timing: Timing) -> Done:
    """kill -9 of the worker's simulated server process group (waits up to 60 s for one to be running)."""
    server = _wait_for(lambda: server_of(t.pid), 60)
    if server is None:
        return Done(f"skipped: {t.label} ran no server for 60 s")
    att = running_attempt(t.db, t.pid)
    _signal_group(server, signal.SIGKILL)
    return Done(f"kill -9 of {t.label}'s server pid {server.pid} during {att[1] if att else 'its start'}",
                att[0] if att else None)


def server_hang(t: Target, timing: Timing) -> Done:
    """SIGSTOP of the worker's server for the stall timeout + 10 s (a hang), then SIGCONT if it still exists."""
    server = _wait_for(lambda: server_of(t.pid), 60)
    if server is None:
        return Done(f"skipped: {t.label} ran no server for 60 s")
    att = running_attempt(t.db, t.pid)
    hold = timing.stall_s + 10
    _signal_group(server, signal.SIGSTOP)
    try:
        time.sleep(hold)
    finally:
        alive = _signal_group(server, signal.SIGCONT)
    return Done(f"SIGSTOP of {t.label}'s server pid {server.pid} {hold:g} s during "
                f"{att[1] if att else 'its start'}; {'SIGCONT' if alive else 'it was gone (stopped by sweep)'}",
                att[0] if att else None, time.monotonic())


def db_locked(t: Target, timing: Timing) -> Done:
    """Another process holds an exclusive SQLite transaction on the study's database for db_lock_s."""
    con = sqlite3.connect(t.db, timeout=30, isolation_level=None)
    try:
        t0 = time.monotonic()
        con.execute("BEGIN EXCLUSIVE")
        waited = time.monotonic() - t0
        time.sleep(timing.db_lock_s)
        con.execute("ROLLBACK")
    finally:
        con.close()
    return Done(f"BEGIN EXCLUSIVE on results.db held {timing.db_lock_s:g} s (got it after {waited:.1f} s)",
                None, time.monotonic())


def disk_full(t: Target, timing: Timing) -> Done:
    """Fill the study's own small filesystem to the last byte for disk_full_s, then free it."""
    if not t.disk_full_possible:
        return Done("skipped: the study is not on a filesystem of its own (needs root to mount a tmpfs)")
    filler = t.fs / ".chaos-filler"
    written = 0
    chunk = b"\0" * (1 << 20)
    try:
        with open(filler, "wb", buffering=0) as f:
            with contextlib.suppress(OSError):
                while True:
                    written += f.write(chunk)
            with contextlib.suppress(OSError):  # the last partial MiB: up to the last byte
                while f.write(b"\0" * 4096):
                    written += 4096
            time.sleep(timing.disk_full_s)
    finally:
        filler.unlink(missing_ok=True)
    free = psutil.disk_usage(str(t.fs)).free
    return Done(f"filesystem of the study filled ({written / 2**20:.0f} MiB written) for {timing.disk_full_s:g} s, "
                f"then freed ({free / 2**20:.0f} MiB free)", None, time.monotonic())


def port_stolen(t: Target, timing: Timing) -> Done:
    """Listen on the port the worker's next server would take (the first free one of its --ports range)."""
    for port in range(*t.ports):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.listen(8)
        try:
            time.sleep(timing.port_hold_s)
        finally:
            s.close()
        return Done(f"port {port} (the first free one of {t.label}'s {t.ports[0]}-{t.ports[1] - 1}) bound and "
                    f"listened on for {timing.port_hold_s:g} s", None, time.monotonic())
    return Done(f"skipped: every port of {t.label}'s range is in use")


FAULTS: dict[str, Callable[[Target, Timing], Done]] = {
    "kill9_worker": kill9_worker, "kill9_group": kill9_group, "sigstop_worker": sigstop_worker,
    "server_crash": server_crash, "server_hang": server_hang, "db_locked": db_locked, "disk_full": disk_full,
    "port_stolen": port_stolen,
}


def launch_ports(db: Path, label: str, since_wall: float, until_wall: float) -> list[tuple[int, int | None, str]]:
    """(attempt id, port, status) of the launches of the worker label created in [since, until] (unix time)."""
    rows = q(db, "SELECT c.id, c.server_info_json, c.status, c.failure_reason, "
                 "CAST(strftime('%s', c.created_at) AS INTEGER) FROM server_configs c "
                 "JOIN sweep_workers w ON w.id = c.worker_id WHERE w.label = ?", (label,))
    out = []
    for cid, info, status, reason, created in rows:
        if created is None or not since_wall - 1 <= created <= until_wall + 1:
            continue
        port = None
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            port = json.loads(info or "{}").get("sweep_launch", {}).get("port")
        out.append((cid, port, f"{status}{': ' + reason[:80] if reason else ''}"))
    return out
