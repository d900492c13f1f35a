"""A simulated server started through the real-SGLang launcher is still labelled simulated everywhere."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_wrapped_simulator_is_labelled_simulated(tmp_path: Path) -> None:
    # A wrapper with start-server.sh's calling convention that runs the simulator instead of SGLang.
    wrapper = tmp_path / "fake-start.sh"
    # Like start-server.sh it starts the server through sweep's key shim when one is set (the key is in no argv).
    wrapper.write_text(f'#!/usr/bin/env bash\nshift; [ "${{1:-}}" = "--" ] && shift\n'
                       f'if [ -n "${{SWEEP_SERVER_SHIM:-}}" ]; then exec {sys.executable} -c "$SWEEP_SERVER_SHIM" '
                       f'sglang_sim "$@"; fi\nexec {sys.executable} -m sglang_sim "$@"\n')
    db = tmp_path / "r.db"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "ladder", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
         "--db", str(db), "--out", str(tmp_path / "rep"), "--launcher", "sglang",
         "--config", "max_running_requests=4", "--set", "ladder=[2]",
         "--set", "server.command=" + json.dumps(["bash", str(wrapper), "bundle", "--"])],
        capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SIMULATED" in proc.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT simulated FROM sweep_studies").fetchall() == [(1,)]
    assert {r[0] for r in con.execute("SELECT simulated FROM runs")} == {1}
    report = next((tmp_path / "rep").glob("*/report.md")).read_text()
    assert "SIMULATED" in report


@pytest.mark.slow
def test_a_server_that_ignores_sigterm_is_killed_and_the_stop_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "ladder", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
         "--db", str(db), "--out", str(tmp_path / "rep"), "--driver", "http", "--config", "max_running_requests=4",
         "--set", "ladder=[2]", "--set", "server.shutdown_grace_s=1",
         "--set", 'server.extra_args=["--load-format", "dummy", "--sim-ignore-sigterm"]'],
        capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    con = sqlite3.connect(db)
    (status, why), = con.execute("SELECT status, stop_reason FROM server_configs").fetchall()
    assert status == "completed"
    assert "ignored SIGTERM" in why
