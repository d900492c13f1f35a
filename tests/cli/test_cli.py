"""`sweep runs` and `sweep show` over a database filled by a real (virtual-time) smoke study."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.core.numbers import number
from tests.smoke_study import smoke_knee

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]


def sweep(*args: str, cwd: Path, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_knee(sweep, tmp_path_factory.mktemp("cli"), "cli-smoke")


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
    proc = sweep("runs", "--db", str(smoke_db), "--wide", cwd=smoke_db.parent)
    assert proc.returncode == 0
    assert "goodput" in proc.stdout and "cli-smoke" in proc.stdout and "worker id" in proc.stdout


def _table_rows(text: str) -> list[list[str]]:
    """The data rows of a printed table: the lines after the header rule that start with a run id."""
    body = text.split("─\n", 1)[1]
    return [ln.split() for ln in body.splitlines() if re.match(r"\s*\d+\s", ln)]


def test_runs_fits_80_columns_and_never_cuts_a_number(smoke_db: Path) -> None:
    rows = json.loads(sweep("runs", "--db", str(smoke_db), "--format", "json", cwd=smoke_db.parent).stdout)["runs"]
    proc = sweep("runs", "--db", str(smoke_db), cwd=smoke_db.parent, columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(len(ln) <= 80 for ln in lines), "\n".join(ln for ln in lines if len(ln) > 80)
    assert "…" not in proc.stdout and proc.stderr == ""  # every default column fits: none left out
    head = " ".join(lines[0].split())
    assert head == "run config phase c tok/s goodput TTFT p95 ms TPOT p95 ms SLA"  # smoke's SLA is at p95
    printed = _table_rows(proc.stdout)
    assert len(printed) == len(rows) == 6
    for cells, row in zip(printed, rows, strict=True):  # one line per row, each number whole
        assert cells[0] == str(row["run_id"]) and cells[3] == row["phase"] and cells[4] == str(row["concurrency"])
        assert cells[6] == number(row['goodput_tps']) and cells[7] == number(row['ttft_p95_ms'])
        assert cells[8] == number(row['tpot_p95_ms']) and cells[9] == "yes"


def test_runs_in_a_narrow_terminal_leaves_columns_out_and_says_which(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), cwd=smoke_db.parent, columns=40)
    assert proc.returncode == 0, proc.stderr
    assert all(len(ln) <= 40 for ln in proc.stdout.splitlines()) and "…" not in proc.stdout
    assert re.search(r"\d+ column\(s\) left out to fit 40 columns: .*passes_sla", proc.stderr), proc.stderr
    goodputs = {number(r['goodput_tps']) for r in json.loads(
        sweep("runs", "--db", str(smoke_db), "--format", "json", cwd=smoke_db.parent).stdout)["runs"]}
    assert goodputs <= set(proc.stdout.split())  # the label wraps between words; the numbers stay whole


def test_runs_columns_chooses_and_a_wrong_name_lists_them(smoke_db: Path) -> None:
    proc = sweep("runs", "--db", str(smoke_db), "--columns", "concurrency,ttft_p99_ms,config", cwd=smoke_db.parent,
                 columns=80)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].split() == ["c", "TTFT", "p99", "ms", "config"]
    csv_rows = list(csv.DictReader(io.StringIO(sweep("runs", "--db", str(smoke_db), "--format", "csv", "--columns",
                                                      "run_id,config", cwd=smoke_db.parent).stdout)))
    assert set(csv_rows[0]) == {"run_id", "config"} and csv_rows[0]["config"] == "mrr=8 mem=0.85"
    bad = sweep("runs", "--db", str(smoke_db), "--columns", "config,goodptu", cwd=smoke_db.parent)
    assert bad.returncode == 2 and bad.stdout == ""
    [line] = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: --columns: unknown column 'goodptu' (columns: run_id, ")
    assert "goodput_tps" in line and "ttft_sla_ms" in line


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
    assert proc.returncode == 2
    assert "'xml' is not one of 'table', 'json', 'csv'" in " ".join(proc.stderr.replace("│", " ").split())
