"""Every malformed profile in tests/fixtures/bad_profiles/: exit 2, its one expected line, nothing written.

Each NAME.yaml (a directory, for one case) has a NAME.expected holding the one stderr line it must produce,
`{profile}` standing for the path given on the command line ({dir}: that folder, {root}: the repository). Most run in-process through cli.main(); a few
run as real subprocesses against an existing database that must stay byte-for-byte the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.cli import main

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "fixtures" / "bad_profiles"
CASES = sorted(p.name.removesuffix(".yaml") for p in BAD.glob("*.yaml"))
SUBPROCESS_CASES = ["ladder_bool", "name_traversal", "utf16", "a_directory", "extra_args_host", "dataset_bad_line"]


def expected_line(name: str) -> str:
    """The expected line; {profile} is the path given, {dir} this folder, {root} the repository (the cwd)."""
    text = (BAD / f"{name}.expected").read_text().strip()
    return text.replace("{profile}", str(BAD / f"{name}.yaml")).replace("{dir}", str(BAD)).replace("{root}", str(ROOT))


def test_there_are_at_least_60_and_each_has_its_line() -> None:
    assert len(CASES) >= 60
    assert sorted(p.stem for p in BAD.glob("*.expected")) == CASES


@pytest.mark.parametrize("name", CASES)
def test_bad_profile_is_one_line_exit_2_and_nothing_written(name: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # trace paths in the fixtures are relative to the working directory
    db, out = tmp_path / "results.db", tmp_path / "reports"
    rc = main(["knee", "--profile", str(BAD / f"{name}.yaml"), "--db", str(db), "--out", str(out),
               "--no-progress"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert (rc, lines) == (2, [expected_line(name)])
    assert not db.exists() and not out.exists()


def _digest(db: Path) -> str:
    """The database file's bytes and its logical content (a WAL may hold writes the file does not show yet)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        dump = "\n".join(conn.iterdump())
    return hashlib.sha256(db.read_bytes()).hexdigest() + hashlib.sha256(dump.encode()).hexdigest()


@pytest.fixture(scope="module")
def existing_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated results database holding no study yet."""
    from sweep.store import Store

    db = tmp_path_factory.mktemp("bad-profiles") / "results.db"
    Store(f"sqlite:///{db}").close()
    return db


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_profile_as_a_real_process_leaves_an_existing_database_untouched(name: str, existing_db: Path,
                                                                             tmp_path: Path) -> None:
    before = _digest(existing_db)
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(BAD / f"{name}.yaml"),
                           "--db", str(existing_db), "--out", str(tmp_path / "reports"), "--no-progress"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.strip()] == [expected_line(name)]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _digest(existing_db) == before
    with contextlib.closing(sqlite3.connect(existing_db)) as conn:
        assert conn.execute("SELECT count(*) FROM sweep_studies").fetchone()[0] == 0
    assert not (tmp_path / "reports").exists()
