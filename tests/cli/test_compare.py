"""`sweep compare`: side by side for the same workload; exit 2 across workloads unless --force."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cmp")
    url = f"sqlite:///{tmp / 'r.db'}"
    base = {"ladder": [2, 4]}
    for name, extra in (("a", {"search.space": {"max_running_requests": [2]}}),
                        ("b", {"search.space": {"max_running_requests": [4]}}),
                        ("c", {"search.space": {"max_running_requests": [4]}, "workload.seed": 5})):
        Orchestrator(load_profile(SMOKE, {**base, **extra}), url, tmp, driver="virtual").knee(name)
    return tmp / "r.db"


def _compare(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep.cli", "compare", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=120)


def test_compare_two_studies_side_by_side(db: Path) -> None:
    out = _compare(db, "a", "b")
    assert out.returncode == 0, out.stderr
    assert "# Compare: a vs b" in out.stdout and "Same workload fingerprint" in out.stdout
    assert "| max_running_requests | 2 | 4 |" in out.stdout
    assert "| knee goodput (tok/s) |" in out.stdout and "| 4 | goodput (tok/s) |" in out.stdout


def test_compare_two_runs(db: Path) -> None:
    out = _compare(db, "1", "3")
    assert out.returncode == 0, out.stderr
    assert "run 1 vs run 3" in out.stdout


def test_compare_refuses_different_workloads_with_one_line(db: Path) -> None:
    out = _compare(db, "a", "c")
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "fingerprint" in lines[0]


def test_compare_force_warns_loudly(db: Path) -> None:
    out = _compare(db, "a", "c", "--force")
    assert out.returncode == 0
    assert "WARNING" in out.stderr and "WARNING: different workloads" in out.stdout


def test_compare_unknown_name_is_one_line(db: Path) -> None:
    out = _compare(db, "a", "nope")
    assert out.returncode != 0 and out.stderr.strip().startswith("error: no run or study named nope")
