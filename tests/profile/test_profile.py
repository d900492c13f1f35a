"""Profile validation: every shipped profile loads; bad ones give one line naming file, field and problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweep.core.errors import ProfileError
from sweep.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["interactive", "throughput", "multimodal", "smoke"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_load(name: str) -> None:
    p = load_profile(ROOT / "profiles" / f"{name}.yaml")
    assert p.name == name
    assert p.ladder == sorted(p.ladder)


def test_interactive_profile_has_the_articles_sla_and_15_minute_windows() -> None:
    p = load_profile(ROOT / "profiles" / "interactive.yaml")
    assert (p.sla.ttft_ms, p.sla.tpot_ms, p.sla.ttft_percentile) == (1000, 100, 95)
    assert p.window.measure_seconds == 900
    assert p.ladder == [16, 32, 64, 128]


def test_multimodal_profile_mixes_images_and_video() -> None:
    mix = load_profile(ROOT / "profiles" / "multimodal.yaml").workload.mix
    assert mix.image > 0 and mix.video > 0


BAD = [
    ("ladder: [32, 16]\n", "ladder", "ascending"),
    ("sla: {ttft_ms: -1}\n", "sla.ttft_ms", "greater than 0"),
    ("sla: {ttft_ms: 1000, colour: red}\n", "sla.colour", "Extra inputs"),
    ("workload: {mix: {text: 0.5, image: 0.2}}\n", "workload.mix", "sum to 1"),
    ("workload: {prompt_len: {kind: uniform, low: 10}}\n", "workload.prompt_len", "needs high"),
    ("search: {space: {mem_fraction_static: [0.8, 1.5]}}\n", "search.space.mem_fraction_static", "outside"),
    ("arrival: {kind: poisson}\n", "arrival.rate", "Field required"),
    ("server: {launcher: docker}\n", "server.launcher", "Input should be"),
    ("window: {measure_seconds: 0}\n", "window.measure_seconds", "greater than or equal to 1"),
    ("ladder: [16, 32\n", "not valid YAML", "line"),
    ("- just\n- a list\n", "<root>", "mapping"),
]


@pytest.mark.parametrize("text,field,problem", BAD)
def test_bad_profile_names_file_field_and_problem(tmp_path: Path, text: str, field: str, problem: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ProfileError) as err:
        load_profile(f)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(str(f))
    assert field in msg and problem in msg


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(tmp_path / "nope.yaml")


def test_fingerprint_changes_with_workload_not_with_search_space(tmp_path: Path) -> None:
    base = load_profile(ROOT / "profiles" / "smoke.yaml")
    other_space = load_profile(ROOT / "profiles" / "smoke.yaml", {"search.space.max_running_requests": [2]})
    other_seed = load_profile(ROOT / "profiles" / "smoke.yaml", {"workload.seed": 99})
    assert base.fingerprint() == other_space.fingerprint()
    assert base.fingerprint() != other_seed.fingerprint()


def test_cli_bad_profile_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("ladder: [64, 32]\n")
    db = tmp_path / "results.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(f), "--db", str(db),
                           "--out", str(tmp_path / "reports")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert str(f) in lines[0] and "ladder" in lines[0]
    assert not db.exists()
    assert not (tmp_path / "reports").exists()
