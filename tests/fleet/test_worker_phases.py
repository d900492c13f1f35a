"""Screening, finals and the soak with two workers on one study: each phase's work measured once, the soak once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sweep.fleet.shared_study import create_study
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.mark.integration
def test_two_workers_share_screen_finals_and_run_the_soak_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8, 16]}, "ladder": [2, 4],
                                "search.screening": {"enabled": True, "fraction": 0.5, "keep": 0.5},
                                "soak.enabled": True, "soak.duration_s": 3, "search.heartbeat_s": 1})
    create_study(Orchestrator(prof, url, tmp_path / "reports", driver="virtual"), "phases")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "sweep.cli", "worker", "--study", "phases", "--db", url,
                               "--out", str(tmp_path / "reports"), "--label", f"w{i}", "--no-progress"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    con = sqlite3.connect(tmp_path / "r.db")
    rows = con.execute("SELECT c.config_key, r.phase, c.worker_id FROM server_configs c JOIN runs r "
                       "ON r.server_config_id = c.id WHERE c.status IN ('completed', 'infeasible') "
                       "GROUP BY c.id").fetchall()
    per_phase = Counter((k, ph) for k, ph, _ in rows)
    assert set(per_phase.values()) == {1}, per_phase  # no configuration measured twice in a phase
    assert Counter(ph for _, ph in per_phase) == {"screen": 4, "final": 2, "soak": 1}
    assert len(con.execute("SELECT id FROM runs WHERE phase = 'soak'").fetchall()) == 1
    assert con.execute("SELECT status FROM sweep_studies").fetchone()[0] == "completed"
