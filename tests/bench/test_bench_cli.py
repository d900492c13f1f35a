"""`make bench` lists its benchmarks and never rewrites a tracked file: results go to reports/bench/ (git-ignored)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import bench
from bench.__main__ import BENCHES

ROOT = Path(__file__).resolve().parents[2]


def test_bench_help_lists_every_benchmark_and_runs_none() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench", "--help"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stderr == ""
    listed = re.findall(r"^  ([\w-]+)  ", proc.stdout, re.M)
    assert listed == list(BENCHES) == ["client", "virtual", "search", "search-prior", "workers",
                                                 "intervals", "read-paths", "early-stop", "night"]
    assert "== bench" not in proc.stdout  # nothing ran
    wrong = subprocess.run([sys.executable, "-m", "bench", "vritual"], capture_output=True, text=True, timeout=60,
                           cwd=ROOT)
    assert wrong.returncode == 2 and "choose from client, virtual, search, search-prior, workers, intervals, read-paths" in \
        wrong.stderr


def test_results_go_to_a_git_ignored_folder_never_to_docs() -> None:
    assert bench.OUT == ROOT / "reports" / "bench"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(bench.OUT / "bench-virtual.md")], cwd=ROOT)
    assert ignored.returncode == 0, "reports/bench/ must be git-ignored"
    for path in (ROOT / "bench").glob("*.py"):  # no benchmark writes a file under docs/ any more
        text = path.read_text()
        assert not re.search(r"""["']docs["']\s*\)?\s*/|ROOT\s*/\s*["']docs""", text), path
        assert "write_text" not in text or path.name in ("__init__.py", "search_oracle.py"), path
