"""A smoke study measured once per test module through the real CLI (the virtual driver), for read-side tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
Cli = Callable[..., "subprocess.CompletedProcess[str]"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout's sweep, whatever the working directory


def sweep_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m sweep.cli ARGS` in cwd, this checkout's sweep on the path; its output captured."""
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=ENV)


def smoke_knee(sweep: Cli, tmp: Path, study: str) -> Path:
    """`sweep knee --profile smoke --driver virtual --study STUDY` in tmp through `sweep` (the module's own CLI
    runner); the results.db it wrote."""
    db = tmp / "results.db"
    proc = sweep("knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--db", str(db), "--out",
                 str(tmp / "reports"), "--driver", "virtual", "--study", study, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return db
