"""Resume after kill -9: completed work kept, the interrupted launch aborted and redone, nothing duplicated."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator
from tests.waiting import wait_for

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"



def _q(db: Path, sql: str) -> list[tuple[Any, ...]]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        return con.execute(sql).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


def _check_resumed(db: Path, expect_configs: int) -> None:
    """Every grid point completed exactly once; aborted attempts kept; no duplicate completed final steps."""
    rows = _q(db, "SELECT id, config_key, status FROM server_configs")
    done = Counter(k for _, k, s in rows if s in ("completed", "infeasible"))
    assert len(done) == expect_configs and set(done.values()) == {1}, rows
    assert {s for *_, s in rows} <= {"completed", "infeasible", "aborted"}, rows
    runs = _q(db, "SELECT c.config_key, r.concurrency FROM runs r JOIN server_configs c ON c.id = r.server_config_id "
                  "WHERE r.status = 'completed' AND c.status != 'aborted'")
    assert max(Counter(runs).values()) == 1, runs
    assert not _q(db, "SELECT id FROM runs WHERE status = 'running'")


@pytest.mark.slow
def test_kill_9_mid_ladder_then_resume_over_http(tmp_path: Path) -> None:
    db, out = tmp_path / "results.db", tmp_path / "reports"
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out", str(out),
           "--driver", "http", "--study", "night", "--resume", "--no-progress"]
    first = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _q(db, "SELECT id FROM runs WHERE status = 'completed'"), 120, "a completed run")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    launches = [json.loads(i or "{}").get("sweep_launch") for (i,) in
                _q(db, "SELECT server_info_json FROM server_configs WHERE status = 'running'")]
    leftovers = [psutil.Process(x["pid"]) for x in launches if x and psutil.pid_exists(x["pid"])]
    assert leftovers, "the killed orchestrator should have left its running server behind"
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resume:" in done.stderr and "killed leftover server" in done.stderr
    for p in leftovers:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, f"leftover server {p.pid} still runs"
    _check_resumed(db, expect_configs=2)
    assert _q(db, "SELECT id FROM server_configs WHERE status = 'aborted'")
    study = _q(db, "SELECT status, winner_config_id FROM sweep_studies WHERE name = 'night'")
    assert study and study[0][0] == "completed" and study[0][1] is not None
    assert "knee [SIMULATED]" in done.stderr
    states = _q(db, "SELECT state FROM trials")
    assert Counter(s for (s,) in states)["COMPLETE"] == 2, states


class _Killed(BaseException):
    """Stands in for SIGKILL inside one process: nothing below the raise gets to clean up."""


def test_interrupted_grid_trial_is_requeued_on_its_grid_point(tmp_path: Path, monkeypatch: Any, sqlite_url: str) -> None:
    """A 3-point grid killed in the second ladder: the resume redoes that point, runs the third, skips the first."""
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8]}, "ladder": [2, 4]})
    url = sqlite_url
    orch = Orchestrator(prof, url, tmp_path / "out", driver="virtual")
    steps: list[int] = []

    def die_on_third_step(config: Any, concurrency: int, step: object) -> None:
        steps.append(concurrency)
        if len(steps) == 3:
            raise _Killed()

    with pytest.raises(_Killed):
        orch.knee("grid3", on_step=die_on_third_step)
    db = tmp_path / "r.db"
    # What SIGKILL leaves behind: a running config, its run, a RUNNING Optuna trial.
    con = sqlite3.connect(db)
    con.execute("UPDATE server_configs SET status = 'running' WHERE id = (SELECT max(id) FROM server_configs)")
    con.commit()
    con.close()
    assert _q(db, "SELECT state FROM trials WHERE state = 'RUNNING'")
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("grid3", resume=True)
    _check_resumed(db, expect_configs=3)
    assert run.winner is not None
    first_attempt = _q(db, "SELECT id FROM server_configs ORDER BY id LIMIT 1")[0][0]
    assert _q(db, f"SELECT status FROM server_configs WHERE id = {first_attempt}")[0][0] == "completed"
    report = (tmp_path / "out" / "grid3" / "report.md").read_text()
    assert "aborted attempt" in report


def test_resume_refuses_another_workload(tmp_path: Path, sqlite_url: str) -> None:
    url = sqlite_url
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4]}, "ladder": [2]})
    Orchestrator(prof, url, tmp_path, driver="virtual").knee("s")
    other = load_profile(SMOKE, {"search.space": {"max_running_requests": [4]}, "ladder": [2], "workload.seed": 9})
    from sweep.core.errors import SweepError

    with pytest.raises(SweepError, match="fingerprint"):
        Orchestrator(other, url, tmp_path, driver="virtual").knee("s", resume=True)
    assert os.path.exists(tmp_path / "r.db")
