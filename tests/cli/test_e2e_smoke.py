"""The whole loop on the smoke profile: real simulated-server processes, real sockets, a real SQLite file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


MARK = "SWEEP_TEST_E2E_MARK"  # set in the sweep process's environment: its servers inherit it


def _sim_processes(mark: str) -> list[psutil.Process]:
    """This test's simulated servers (other simulators on the host, another checkout's tests say, are not)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if "sglang_sim" not in " ".join(p.info["cmdline"] or []):
            continue
        try:
            if p.environ().get(MARK) == mark:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.mark.integration
@pytest.mark.slow
def test_smoke_knee_over_http_stores_runs_requests_and_a_knee(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    db = tmp_path / "results.db"
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
         "--db", str(db), "--out", str(out), "--driver", "http", "--study", "smoke-e2e"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, MARK: mark})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SIMULATED" in proc.stderr
    assert "knee" in proc.stderr
    con = sqlite3.connect(db)
    runs = con.execute("SELECT concurrency, status, simulated, n_completed, output_tps FROM runs").fetchall()
    assert len(runs) >= 3
    assert all(r[1] == "completed" and r[2] == 1 for r in runs), runs
    assert all(r[3] > 0 and r[4] > 0 for r in runs), runs
    n_req = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    n_measured = con.execute("SELECT sum(n_completed) FROM runs").fetchone()[0]
    assert n_req >= n_measured > 0
    assert con.execute("SELECT count(*) FROM samples WHERE name='num_running_reqs'").fetchone()[0] > 0
    study = con.execute("SELECT simulated, status, winner_config_id, report_path FROM sweep_studies").fetchone()
    assert study[0] == 1 and study[1] == "completed"
    assert study[2] is not None, "smoke profile should have a feasible knee"
    report = Path(study[3]).read_text()
    assert "SIMULATED" in report and "## Winner" in report and "python -m sglang.launch_server" in report
    statuses = {r[0] for r in con.execute("SELECT status FROM server_configs")}
    assert statuses <= {"completed", "infeasible"}
    deadline = time.time() + 10
    while _sim_processes(mark) and time.time() < deadline:
        time.sleep(0.1)
    assert not _sim_processes(mark), "a simulated server process was left running"
