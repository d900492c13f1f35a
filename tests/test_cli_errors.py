"""cli.main() is the one place an error becomes a line on stderr and an exit code: never a traceback."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.cli import main

ROOT = Path(__file__).resolve().parent.parent
SMOKE = str(ROOT / "profiles" / "smoke.yaml")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def error_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = main(argv)
    return rc, error_lines(capsys.readouterr().err)


def test_set_without_equals_exits_2_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", SMOKE, "--db", str(db), "--out",
                           str(tmp_path / "out"), "--set", "noequals"], capture_output=True, text=True,
                          timeout=120, env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc.stderr) == ["error: --set 'noequals': expected key.path=value"]
    assert not db.exists()


def test_set_into_a_non_mapping_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rc, lines = run_main(["knee", "-p", SMOKE, "--db", str(db), "--set", "ladder.first=3"], capsys)
    assert rc == 2
    assert lines == ["error: --set ladder.first=3: ladder is not a mapping"]
    assert not db.exists()


def test_a_usage_error_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = run_main(["knee", "-p", SMOKE, "--no-such-option"], capsys)
    assert rc == 2
    assert any("No such option" in ln for ln in lines), lines


def _study_started(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return bool(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return False  # not migrated yet


@pytest.mark.slow
def test_sigint_mid_study_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    err = tmp_path / "stderr.txt"
    # Long virtual windows: the first step takes many wall seconds, so the interrupt lands inside a trial.
    with err.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "sweep.cli", "knee", "-p", SMOKE, "--db", str(db),
                                 "--out", str(tmp_path / "out"), "--driver", "virtual", "--no-progress",
                                 "--set", "window.measure_seconds=20000", "--set", "workload.num_requests=5000"],
                                stdout=subprocess.DEVNULL, stderr=sink, env=ENV)
        try:
            deadline = time.monotonic() + 120
            while not _study_started(db):
                assert proc.poll() is None, err.read_text()
                assert time.monotonic() < deadline, "the first window never started"
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = err.read_text()
    assert rc != 0
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "failed with" not in text, text
    errors = [ln for ln in error_lines(text) if ln.startswith("error:")]
    assert len(errors) == 1, text
