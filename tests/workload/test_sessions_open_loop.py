"""Sessions under an open-loop arrival (or the winner's Poisson soak) cannot run on the virtual driver, which
`--driver auto` picks on a machine without a GPU: refused at load, one line and exit 2, before the results
database or the report folder exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "profiles" / "smoke.yaml")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SESSIONS = json.dumps({"turns": {"kind": "fixed", "value": 2}})


@pytest.mark.parametrize(("extra", "why"), [
    (["--set", 'arrival={"kind": "poisson", "rate": 5}'], "arrival.kind poisson"),
    (["--set", "soak.enabled=true"], "soak.enabled (the winner's soak is an open-loop Poisson run)"),
])
def test_open_loop_sessions_on_the_virtual_driver_are_refused_at_load(extra: list[str], why: str,
                                                                      tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", SMOKE, "--db", str(tmp_path / "r.db"),
                           "--out", str(tmp_path / "rep"), "--no-progress", "--set", f"workload.sessions={SESSIONS}",
                           *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=ENV)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(errors) == 1 and f"run on the HTTP driver only ({why})" in errors[0] and "--driver http" in errors[0]
    assert list(tmp_path.iterdir()) == []  # neither the database nor the report folder
