"""`sweep runs` and `sweep show` over a database filled by a real (virtual-time) smoke study."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    db = tmp / "results.db"
    proc = sweep("knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--db", str(db), "--out",
                 str(tmp / "reports"), "--driver", "virtual", "--study", "cli-smoke", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return db


def test_runs_json_lists_every_measured_step_newest_first(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), "--format", "json", cwd=smoke_db.parent)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["runs"]
    assert len(rows) == 6  # 2 configurations x 3 ladder steps in smoke.yaml
    assert [r["run_id"] for r in rows] == sorted((r["run_id"] for r in rows), reverse=True)
    assert {r["study_name"] for r in rows} == {"cli-smoke"}
    assert all(r["simulated"] for r in rows)
    assert {r["concurrency"] for r in rows} == {2, 4, 8}


def test_runs_csv_and_filters(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), "--format", "csv", "--profile", "smoke", cwd=smoke_db.parent)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 6 and "goodput_tps" in rows[0]
    none = sweep("runs", "--db", str(smoke_db), "--format", "json", "--study", "no-such-study", cwd=smoke_db.parent)
    assert json.loads(none.stdout)["runs"] == []
    failed = sweep("runs", "--db", str(smoke_db), "--format", "json", "--status", "failed", cwd=smoke_db.parent)
    assert json.loads(failed.stdout)["runs"] == []
    recent = sweep("runs", "--db", str(smoke_db), "--format", "json", "--since", "1d", cwd=smoke_db.parent)
    assert len(json.loads(recent.stdout)["runs"]) == 6


def test_runs_table_names_the_columns(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), cwd=smoke_db.parent)
    assert proc.returncode == 0
    assert "goodput tok/s" in proc.stdout and "cli-smoke" in proc.stdout


def test_show_one_run_and_a_missing_one(smoke_db: Path) -> None:
    rows = json.loads(sweep("runs", "--db", str(smoke_db), "--format", "json", cwd=smoke_db.parent).stdout)["runs"]
    run_id = rows[0]["run_id"]
    proc = sweep("show", str(run_id), "--db", str(smoke_db), "--format", "json", cwd=smoke_db.parent)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["run"]
    assert row["run_id"] == run_id and row["request_count"] >= row["n_started"] > 0
    missing = sweep("show", "99999", "--db", str(smoke_db), cwd=smoke_db.parent)
    assert missing.returncode != 0
    assert [ln for ln in missing.stderr.splitlines() if ln.strip()] == [f"error: no run 99999 in {smoke_db}"]


def test_bad_format_is_one_line_error(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), "--format", "xml", cwd=smoke_db.parent)
    assert proc.returncode != 0
    assert "expected table, json or csv" in proc.stderr
