"""Host faults of the chaos night (tools/chaos.py, docs/chaos.md) as deterministic tests: a worker's port range
taken, a port held by TIME_WAIT sockets of a crashed server, the disk full while a server starts.

Found by the chaos night: a launch that failed for the host's sake was stored as the configuration's verdict
(`failed: port_in_use`, `failed: crash`), and the worker went on to the next configuration, which failed the same
way: an 8-second disk-full burned ten configurations in 8 s. Such a launch now aborts the attempt (re-queued, the
worker exits for its supervisor to restart it) and the configuration is measured once the host is sound again.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from faultkit import SMOKE, assert_measured_once, env, q

from sweep.fleet.shared_study import create_study
from sweep.launchers.procs import free_port
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator
from tests.waiting import wait_for

SETS = {"search.space": {"max_running_requests": [4, 8]}, "ladder": [2], "window.measure_seconds": 1.5,
        "window.drain_seconds": 2, "window.min_requests": 2, "window.warmup_requests": 2,
        "server.extra_args": ["--load-format", "dummy"], "server.shutdown_grace_s": 5}


def _study(tmp: Path, out: Path) -> Path:
    db = tmp / "results.db"
    prof = load_profile(SMOKE, SETS)
    create_study(Orchestrator(prof, f"sqlite:///{db}", out, driver="http", launcher_kind="sim"), "host")
    return db


def _worker(tmp: Path, db: Path, out: Path, port: int, n: int) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", "host", "--db", str(db), "--out", str(out),
           "--label", "w", "--no-progress", "--driver", "http", "--launcher", "sim", "--ports", f"{port}-{port + 1}"]
    r = subprocess.run(cmd, cwd=tmp, env=env(), capture_output=True, text=True, timeout=240)
    (tmp / f"w{n}.log").write_text(r.stdout + r.stderr)
    return r.returncode, r.stdout + r.stderr


def test_a_port_held_only_by_time_wait_sockets_is_free(tmp_path: Path) -> None:
    """A crashed server's port keeps TIME_WAIT connections for 60 s; the server binds it (SO_REUSEADDR) and so may
    the probe: a narrow --ports range was used up by them and every launch refused."""
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # the server side closes first: its end of the connection goes to TIME_WAIT
    client.close()
    listener.close()

    def plain_bind_refused() -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return True
            return False

    wait_for(plain_bind_refused, 5, "the server's port in TIME_WAIT")
    assert free_port("127.0.0.1", (port, port + 1)) == port


def test_a_taken_port_range_aborts_the_attempt_and_it_is_measured_later(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    db = _study(tmp_path, out)
    port = free_port()
    thief = socket.create_server(("127.0.0.1", port))  # another process listens on the worker's only port
    try:
        rc, text = _worker(tmp_path, db, out, port, 1)
    finally:
        thief.close()
    assert rc != 0 and "Traceback" not in text, text
    assert "port" in text.splitlines()[-1], text
    rows = q(db, "SELECT status, failure_reason FROM server_configs")
    assert rows and all(s == "aborted" for s, _ in rows), rows  # no verdict: the configuration was never tried
    rc, text = _worker(tmp_path, db, out, port, 2)
    assert rc == 0, text
    assert_measured_once(db, n_configs=2, ladder_len=1)
    assert {s for (s,) in q(db, "SELECT status FROM server_configs WHERE status != 'aborted'")} == {"completed"}


@pytest.mark.skipif(os.geteuid() != 0, reason="a small filesystem to fill needs root (mount -t tmpfs)")
def test_a_disk_full_while_the_server_starts_aborts_the_attempt(tmp_path: Path) -> None:
    out = tmp_path / "small"
    out.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(out)]).returncode != 0:
        pytest.skip("mount -t tmpfs refused here")
    try:
        db = _study(tmp_path, out / "reports")
        (out / "reports").mkdir(exist_ok=True)
        filler = out / "filler"
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 4096)
        rc, text = _worker(tmp_path, db, out / "reports", free_port(), 1)
        assert rc != 0 and "Traceback" not in text, text
        rows = q(db, "SELECT status, failure_reason FROM server_configs")
        assert rows and all(s == "aborted" for s, _ in rows), rows
        assert any("disk_full" in (r or "") for _, r in rows), rows
        filler.unlink()
        rc, text = _worker(tmp_path, db, out / "reports", free_port(), 2)
        assert rc == 0, text
        assert_measured_once(db, n_configs=2, ladder_len=1)
    finally:
        subprocess.run(["umount", "-l", str(out)])
