"""Command lines are strict and honest: a wrong --format, port or --limit is refused (exit 2), "not found" is bad
input (2, never 1, the OS-failure code), a missing database is 5 from every verb, and an install hint names what
pip can really install. Over a real smoke study's SQLite file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.cli import main
from tests.smoke_study import ENV, smoke_knee, sweep_cli

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "profiles" / "smoke.yaml")


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_knee(sweep_cli, tmp_path_factory.mktemp("strict"), "strict-smoke")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, [ln for ln in cap.err.splitlines() if ln.strip()]


@pytest.mark.integration
@pytest.mark.parametrize("verb", [["explain", "strict-smoke"], ["compare", "strict-smoke", "1"]])
def test_a_wrong_format_is_refused(verb: list[str], smoke_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run([*verb, "--db", str(smoke_db), "--format", "jsn"], capsys)
    assert (rc, out) == (2, "") and err == ["error: --format 'jsn': expected table or json"]


@pytest.mark.integration
@pytest.mark.parametrize("argv", [["serve", "--port", "99999"], ["serve", "--port", "-1"],
                                  ["knee", "-p", SMOKE, "--live", "--live-port", "70000"],
                                  ["runs", "--limit", "-5"], ["runs", "--limit", "0"]])
def test_out_of_range_numbers_are_refused_before_anything_runs(argv: list[str], smoke_db: Path,
                                                               tmp_path: Path) -> None:
    db = smoke_db if argv[0] != "knee" else tmp_path / "new.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", *argv, "--db", str(db)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert "Invalid value" in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "new.db").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.integration
@pytest.mark.parametrize(("argv", "line"), [
    (["show", "999"], "no run 999 in {db}"),
    (["show", "nope"], "no run or study named nope in {db}"),
    (["explain", "nope"], "no study named nope in {db}"),
    (["report", "nope"], "no study named nope in {db}"),
    (["export", "nope"], "no study named nope in {db}"),
    (["compare", "nope", "1"], "no run or study named nope"),
    (["history", "--profile", "nope"], "no study of profile nope in sqlite:///{db}"),
])
def test_not_found_is_bad_input_not_an_os_failure(argv: list[str], line: str, smoke_db: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run([*argv, "--db", str(smoke_db)], capsys)
    assert rc == 2 and err == ["error: " + line.format(db=smoke_db)], err


@pytest.mark.parametrize("argv", [["runs"], ["show", "1"], ["explain", "s"], ["export", "s"], ["report", "s"],
                                  ["compare", "a", "b"], ["history", "--profile", "p"], ["serve", "--port", "0"],
                                  ["study", "workers", "--study", "s"], ["worker", "--study", "s", "--no-progress"]])
def test_a_missing_database_is_the_same_code_from_every_verb(argv: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "nosuch.db"
    rc, _, err = _run([*argv, "--db", str(db)], capsys)
    assert (rc, err) == (5, [f"error: no results database at {db} (run a study first, or pass --db)"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_the_parquet_hint_names_what_pip_can_install(smoke_db: Path, tmp_path: Path) -> None:
    """`sweep` on PyPI is an unrelated project: the hint names pyarrow itself and the checkout's own install."""
    code = ("import sys\nsys.modules['pyarrow'] = None\nfrom sweep.cli import main\n"
            f"sys.exit(main(['export', 'strict-smoke', '--db', {str(smoke_db)!r}, '--format', 'parquet', "
            f"'--out', {str(tmp_path / 'w.parquet')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "pip install pyarrow" in lines[0] and "make install" in lines[0] and "sweep[" not in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_make_install_installs_every_extra_an_export_names() -> None:
    """`make install` (the Makefile's install line) brings what `sweep export --format parquet|mlflow` needs."""
    line = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if "pip install -q -e" in ln)
    extras = set(re.search(r"\.\[([^\]]+)\]", line).group(1).split(","))  # type: ignore[union-attr]
    assert {"export", "mlflow"} <= extras
