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

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.integration
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


def test_study_name_with_a_path_is_refused_before_anything_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db, out = tmp_path / "r.db", tmp_path / "out"
    rc, lines = run_main(["knee", "-p", SMOKE, "--db", str(db), "--out", str(out), "--study", "../../x"], capsys)
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith("error: --study '../../x' must be"), lines
    assert not db.exists() and not out.exists()


def test_unwritable_out_is_one_line_and_no_study_is_left_running(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    db = tmp_path / "r.db"
    rc, lines = run_main(["knee", "-p", SMOKE, "--db", str(db), "--out", str(blocker / "reports"),
                          "--no-progress"], capsys)
    assert rc == 2
    assert lines == [f"error: --out {blocker / 'reports'}: cannot write there (Not a directory)"]
    assert not db.exists()  # checked before the study is opened: nothing stays `running`


def test_a_non_loopback_host_needs_the_opt_in_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["knee", "-p", SMOKE, "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"), "--driver",
            "virtual", "--no-progress", "--set", "server.host=0.0.0.0", "--set", "ladder=[2]",
            "--set", "search.space.max_running_requests=[4]"]
    rc, lines = run_main(base, capsys)
    assert rc == 2 and len(lines) == 1 and "server.host: '0.0.0.0' is not a loopback address" in lines[0]
    rc, lines = run_main([*base, "--set", "server.allow_non_loopback_host=true"], capsys)
    assert rc == 0, lines
    assert lines[0] == ("warning: the server listens on 0.0.0.0 (server.allow_non_loopback_host): "
                        "other hosts can reach it")


@pytest.mark.parametrize("argv", [["runs"], ["show", "1"], ["report", "some-study"], ["compare", "a", "b"]])
def test_read_only_commands_refuse_a_missing_database(argv: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "nosuch.db"
    rc, lines = run_main([*argv, "--db", str(db)], capsys)
    assert rc == 5
    assert lines == [f"error: no results database at {db} (run a study first, or pass --db)"]
    assert not db.exists() and list(tmp_path.iterdir()) == []


def _file_size_limit(limit: int) -> None:
    """In the child: files cannot grow past `limit` bytes, and writes past it fail (EFBIG) as on a full disk."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("limit", [300_000, 700_000])  # in Optuna's schema setup; in Optuna's trial writes
def test_a_full_disk_is_one_line_not_a_traceback(limit: int, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", SMOKE, "--db", str(db), "--out",
                           str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True, timeout=300,
                          env=ENV, preexec_fn=lambda: _file_size_limit(limit))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in error_lines(proc.stderr) if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    # (the study's status cannot be written on a full disk; the resume finds and redoes the attempt)


@pytest.mark.parametrize("label", ["../../x", "/tmp/abs-label"])
def test_a_worker_label_with_a_path_is_refused_before_anything_is_written(
        label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--label names the worker's log folder under --out: a path there would write logs outside --out."""
    db, out = tmp_path / "r.db", tmp_path / "out"
    rc, _ = run_main(["study", "create", "-p", SMOKE, "--db", str(db), "--study", "s", "--driver", "virtual",
                      "--set", "ladder=[2]", "--set", "search.space.max_running_requests=[4]"], capsys)
    assert rc == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, lines = run_main(["worker", "--study", "s", "--db", str(db), "--out", str(out), "--label", label,
                          "--no-progress", "--no-peers"], capsys)
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith(f"error: --label {label!r} must be"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not out.exists()


def test_serve_refuses_a_missing_or_foreign_database_without_writing(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "sub" / "nosuch.db"
    rc, lines = run_main(["serve", "--db", str(missing), "--port", "0"], capsys)
    assert (rc, lines) == (5, [f"error: no results database at {missing} (run a study first, or pass --db)"])
    assert list(tmp_path.iterdir()) == []
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    conn.close()
    before = foreign.read_bytes()
    rc, lines = run_main(["serve", "--db", str(foreign), "--port", "0"], capsys)
    assert (rc, lines) == (5, [f"error: {foreign}: not a sweep results database (no sweep tables)"])
    assert foreign.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
