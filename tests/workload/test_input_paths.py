"""Dataset and trace paths are found beside the profile first, then in the working directory; a missing one
is one line at load time that says where sweep looked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.cli.workers import stored_profile
from sweep.core.errors import ProfileError
from sweep.drivers.arrivals import schedule
from sweep.profile import load_profile
from sweep.workload.datasets import load_dataset

ROOT = Path(__file__).resolve().parents[2]
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


def _smoke_with_dataset(folder: Path) -> Path:
    """profiles/smoke.yaml in `folder`, its prompts from data/prompts.jsonl beside it (cycled: the file is short)."""
    data = yaml.safe_load((ROOT / "profiles" / "smoke.yaml").read_text())
    data["name"] = "mine"
    data["workload"].update(dataset={"path": "data/prompts.jsonl"}, replay=True)
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "prompts.jsonl").write_text(FIXTURE.read_text())
    (folder / "mine.yaml").write_text(yaml.safe_dump(data))
    return folder / "mine.yaml"


@pytest.mark.integration
def test_workers_of_a_study_find_the_dataset_beside_its_profile(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`sweep sweep --gpus` hands its workers the profile's folder; `sweep study create` says to."""
    path = _smoke_with_dataset(tmp_path / "mine")
    (tmp_path / "elsewhere").mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sweep = [sys.executable, "-m", "sweep.cli"]
    fleet = subprocess.run([*sweep, "sweep", "--profile", str(path), "--db", "f.db", "--driver", "virtual",
                            "--study", "f", "--gpus", "0", "--no-progress"], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path / "elsewhere", env=env)
    assert fleet.returncode == 0, fleet.stdout + fleet.stderr + (tmp_path / "elsewhere" / "reports" / "f" / "logs"
                                                                  / "gpu0" / "worker.log").read_text()
    made = subprocess.run([*sweep, "study", "create", "--profile", str(path), "--db", "w.db", "--study", "w"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path / "elsewhere", env=env)
    assert made.returncode == 0, made.stderr
    said = "".join((made.stdout + made.stderr).split())  # the console may wrap the line
    assert f"sweepworker--studyw--dbw.db--profile-dir{tmp_path / 'mine'}" in said, made.stderr
    monkeypatch.chdir(tmp_path / "elsewhere")
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'w.db'}"
    prof = stored_profile(url, "w", [], tmp_path / "mine")
    assert prof.workload.dataset is not None and prof.workload.dataset.file == tmp_path / "mine" / "data" / "prompts.jsonl"
    with pytest.raises(ProfileError) as err:
        stored_profile(url, "w", [])
    line = str(err.value)
    assert line.startswith("study w: workload.dataset.path: data/prompts.jsonl: no such file (looked for "
                           f"{tmp_path / 'elsewhere' / 'data' / 'prompts.jsonl'})") and "--profile-dir" in line
