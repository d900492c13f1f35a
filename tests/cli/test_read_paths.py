"""Fast where people wait (issue 33): `sweep compare` refuses two workloads before it reads a window, `sweep explain`
reads no request row (the answer needs none unless a tier with other bounds is judged), `sweep export --format
parquet` writes in batches. The database is bench/read_paths_db.py's, written straight through the store; its
requests table is then dropped, so a command that still reads requests fails."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.read_paths_db import build
from sweep.cli import main


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("read-paths") / "r.db"
    build(db, 2400)
    return db


@pytest.fixture
def no_requests(big: Path, tmp_path: Path) -> Path:
    """A copy of the database without its requests table: reading any request row fails."""
    db = tmp_path / "no-requests.db"
    db.write_bytes(big.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE requests")
    return db


def test_compare_refuses_two_workloads_before_reading_a_window(no_requests: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "big", "other", "--db", str(no_requests)]) == 2
    err = capsys.readouterr().err
    assert "ran different workloads (fingerprint ffffffffffffffff vs eeeeeeeeeeeeeeee)" in err
    assert "pass --force" in err


def test_explain_reads_no_request(no_requests: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "big", "--db", str(no_requests)]) == 0
    out = capsys.readouterr().out
    assert "knee c=32" in out  # the stored windows alone give every configuration's knee


def test_compare_of_one_workload_reads_no_request_either(big: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "big", "big", "--db", str(big)]) == 0
    assert "| configurations | 4 | 4 |" in capsys.readouterr().out


def test_parquet_export_is_written_in_batches_with_one_schema(big: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from sweep.cli import export

    monkeypatch.setattr(export, "PARQUET_BATCH", 500)
    out = tmp_path / "r.parquet"
    assert main(["export", "big", "--db", str(big), "--what", "requests", "--format", "parquet",
                 "--out", str(out)]) == 0
    f = pq.ParquetFile(out)
    assert f.metadata.num_rows == 2400 and f.metadata.num_row_groups == 5  # one per batch of 500
    schema = f.schema_arrow
    assert str(schema.field("error").type) == "string" and str(schema.field("ttft_ms").type) == "double"
    assert str(schema.field("turn").type) == "int64"  # null in every row: typed from the requests table
