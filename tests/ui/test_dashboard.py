"""`make dashboard`: optuna-dashboard (the `dashboard` extra) opens sweep's database and lists the study's
trials, over real HTTP from the installed command."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
# The `dashboard` extra is part of what `make` installs, so the test never skips: no command is a failure.
DASHBOARD = Path(sys.executable).parent / "optuna-dashboard"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.integration
def test_make_dashboard_opens_the_study_and_sees_its_trials(tmp_path: Path) -> None:
    assert DASHBOARD.exists() or shutil.which("optuna-dashboard"), \
        "optuna-dashboard is not installed: `make install` (or pip install -e '.[dashboard]')"
    db = tmp_path / "results.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
                           "--db", str(db), "--driver", "virtual", "--study", "dash", "--out", str(tmp_path / "rep")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    port = _free_port()
    # what `make dashboard DB=results.db PORT=...` runs (a path becomes sqlite:///path)
    make = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "dashboard", f"DB={db}",
                           f"PORT={port}"], capture_output=True, text=True, timeout=60)
    cmd = next(ln for ln in make.stdout.splitlines() if "optuna-dashboard" in ln).split()
    assert cmd[-1] == f"sqlite:///{db}" and cmd[0].endswith("optuna-dashboard"), make.stdout
    server = subprocess.Popen([str(DASHBOARD) if DASHBOARD.exists() else "optuna-dashboard", *cmd[1:]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def studies() -> object:
            if server.poll() is not None:
                raise AssertionError(f"optuna-dashboard exited: {server.communicate()[1]}")
            try:
                return _get(f"http://127.0.0.1:{port}/api/studies")
            except (urllib.error.URLError, ConnectionError):
                return None

        listed = wait_for(studies, 60, "optuna-dashboard to answer on 127.0.0.1")
        assert isinstance(listed, dict), listed
        by_name = {s["study_name"]: s for s in listed["study_summaries"]}
        assert "dash" in by_name, by_name
        detail = _get(f"http://127.0.0.1:{port}/api/studies/{by_name['dash']['study_id']}?after=0")
        trials = detail["trials"]  # type: ignore[index]
        assert len(trials) == 2  # smoke.yaml's grid: two configurations
        assert {t["state"] for t in trials} == {"Complete"}
        assert all(t["values"] and t["values"][0] > 0 for t in trials)
    finally:
        server.terminate()
        server.wait(timeout=20)
