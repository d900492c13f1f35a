"""Dataset and trace paths are found beside the profile first, then in the working directory; a missing one
is one line at load time that says where sweep looked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.datasets import load_dataset
from sweep.drivers.arrivals import schedule
from sweep.errors import ProfileError
from sweep.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "workload_prompts.jsonl"


def _profile(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p.yaml").write_text("name: p\n" + body)
    return folder / "p.yaml"


def test_a_dataset_beside_the_profile_is_found_from_another_working_directory(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine"
    path = _profile(mine, "workload: {dataset: {path: data/prompts.jsonl}}\n")
    (mine / "data").mkdir()
    (mine / "data" / "prompts.jsonl").write_text(FIXTURE.read_text())
    monkeypatch.chdir(tmp_path)  # not the profile's folder, not the repository
    prof = load_profile(path)
    assert prof.workload.dataset is not None and prof.workload.dataset.file == mine / "data" / "prompts.jsonl"
    items, _ = load_dataset(prof.workload.dataset, ROOT)
    assert items
    assert prof.workload.dataset.path == "data/prompts.jsonl"  # the fingerprint keeps what the profile says


def test_then_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _profile(tmp_path / "profiles", "arrival: {kind: trace, path: t.txt}\n")
    (tmp_path / "t.txt").write_text("0\n0.5\n1.5\n")
    monkeypatch.chdir(tmp_path)
    prof = load_profile(path)
    assert list(schedule(prof.arrival, 10.0)) == [0.0, 0.5, 1.5]  # type: ignore[arg-type]


def test_a_missing_file_is_one_line_naming_where_sweep_looked(tmp_path: Path) -> None:
    path = _profile(tmp_path / "mine", "workload: {dataset: {path: nowhere.jsonl}}\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(path), "--db",
                           str(tmp_path / "r.db"), "--driver", "virtual"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "workload.dataset.path: nowhere.jsonl: no such file" in lines[0]
    assert str(tmp_path / "mine" / "nowhere.jsonl") in lines[0] and str(tmp_path / "nowhere.jsonl") in lines[0]
    assert not (tmp_path / "r.db").exists()  # nothing half-written
    with pytest.raises(ProfileError, match="arrival.path: t.txt: no such file"):
        load_profile(_profile(tmp_path / "other", "arrival: {kind: trace, path: t.txt}\n"))
