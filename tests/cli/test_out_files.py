"""A file the user names for output (`export --out`, `dataset convert -o`, `compare --out`, `history --plot`)
never lands on the results database nor on an existing file unless --force, and is never half-written: over a
real smoke study's SQLite file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from sweep.cli import main
from tests.smoke_study import smoke_knee, sweep_cli

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "datasets"


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_knee(sweep_cli, tmp_path_factory.mktemp("out"), "out-smoke")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runs(db: Path) -> int:
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as con:
        n = int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
    con.close()
    return n


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.mark.parametrize("spelling", ["same", "relative", "url", "wal"])
def test_export_never_writes_onto_the_study_database(smoke_db: Path, spelling: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    before, rows = _digest(smoke_db), _runs(smoke_db)
    monkeypatch.chdir(smoke_db.parent)
    db_arg = {"url": f"sqlite:///{smoke_db}"}.get(spelling, str(smoke_db))
    out = {"relative": "results.db", "wal": f"{smoke_db}-wal"}.get(spelling, str(smoke_db))
    for force in ([], ["--force"]):
        rc = main(["export", "out-smoke", "--db", db_arg, "--out", out, *force])
        err = _lines(capsys.readouterr().err)
        assert rc == 2 and len(err) == 1 and "is the results database" in err[0], err
    assert _digest(smoke_db) == before and _runs(smoke_db) == rows
    assert sorted(p.name for p in smoke_db.parent.iterdir() if p.name.startswith(".")) == []


def test_compare_out_refuses_the_database_and_an_existing_file(smoke_db: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    before = _digest(smoke_db)
    rc = main(["compare", "1", "2", "--db", str(smoke_db), "--out", str(smoke_db)])
    err = _lines(capsys.readouterr().err)
    assert rc == 2 and len(err) == 1 and "is the results database" in err[0], err
    assert _digest(smoke_db) == before
    kept = tmp_path / "notes.md"
    kept.write_text("mine\n")
    rc = main(["compare", "1", "2", "--db", str(smoke_db), "--out", str(kept)])
    err = _lines(capsys.readouterr().err)
    assert rc == 2 and err == [f"error: --out {kept} exists: not overwritten (pass --overwrite to replace it)"]
    assert kept.read_text() == "mine\n"
    rc = main(["compare", "1", "2", "--db", str(smoke_db), "--out", str(kept), "--overwrite"])
    assert rc == 0, capsys.readouterr().err
    assert "run 1" in kept.read_text() and [p.name for p in tmp_path.iterdir()] == ["notes.md"]


def test_export_replaces_an_existing_file_only_with_force(smoke_db: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.csv"
    out.write_text("keep me\n")
    rc = main(["export", "out-smoke", "--db", str(smoke_db), "--out", str(out)])
    err = _lines(capsys.readouterr().err)
    assert rc == 2 and err == [f"error: --out {out} exists: not overwritten (pass --force to replace it)"]
    assert out.read_text() == "keep me\n"
    rc = main(["export", "out-smoke", "--db", str(smoke_db), "--out", str(out), "--force"])
    assert rc == 0, capsys.readouterr().err
    assert out.read_text().startswith("run_id,") and len(out.read_text().splitlines()) == 1 + _runs(smoke_db)
    assert [p.name for p in tmp_path.iterdir()] == ["w.csv"]  # no temporary file left beside it


def test_a_failed_export_leaves_the_old_file_whole(smoke_db: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The rows go to a temporary file renamed over --out when whole: a study missing half-way (here: none at
    all, after the check) leaves the existing file as it was."""
    out = tmp_path / "w.jsonl"
    out.write_text("old\n")
    rc = main(["export", "no-such-study", "--db", str(smoke_db), "--out", str(out), "--force"])
    assert rc == 2, capsys.readouterr().err
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["w.jsonl"]


def test_dataset_convert_never_overwrites_without_force(smoke_db: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "results.db"
    db.write_bytes(smoke_db.read_bytes())
    before = _digest(db)
    rc = main(["dataset", "convert", str(DATA / "sharegpt_good.json"), "-o", str(db)])
    err = _lines(capsys.readouterr().err)
    assert rc == 2 and err == [f"error: --out {db} exists: not overwritten (pass --force to replace it)"]
    assert _digest(db) == before
    src = tmp_path / "prompts.jsonl"
    src.write_text((DATA / "jsonl_good.jsonl").read_text())
    rc = main(["dataset", "convert", str(src), "-o", str(src), "--force"])
    err = _lines(capsys.readouterr().err)
    assert rc == 2 and err == [f"error: --out {src} is the file being read: name another file"]
    out = tmp_path / "new.jsonl"
    rc = main(["dataset", "convert", str(DATA / "sharegpt_good.json"), "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert all(json.loads(ln) for ln in out.read_text().splitlines())
