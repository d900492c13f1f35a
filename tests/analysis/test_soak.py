"""Soak: the verdict from samples (storm, queue, memory) and the winner soaked under Poisson arrivals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.soak import judge, slope_per_min, soak_rate
from sweep.core.types import Sample
from sweep.profile import Soak, load_profile

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
SOAK = Soak(enabled=True, duration_s=600)


def _flat(minutes: int = 10) -> list[Sample]:
    out = []
    for s in range(0, minutes * 60, 10):
        out += [Sample(float(s), "metrics", "num_retracted_requests_total", 5.0 + s / 600.0),
                Sample(float(s), "metrics", "num_queue_reqs", 2.0 + (s // 10) % 3),
                Sample(float(s), "gpu", "gpu_mem_used_mib", 70000.0)]
    return out


def test_a_steady_server_passes() -> None:
    v = judge(_flat(), SOAK)
    assert v.passed, v.summary()
    assert v.minutes == pytest.approx(9.83, abs=0.01)


def test_rising_retraction_rate_is_a_storm() -> None:
    samples = [s for s in _flat() if s.name != "num_retracted_requests_total"]
    # cumulative retractions: ~0.1/min for five minutes, then accelerating (quadratic) to ~40/min
    samples += [Sample(float(s), "metrics", "num_retracted_requests_total",
                       s / 600 + max(0.0, (s - 300) / 60) ** 2 * 2) for s in range(0, 600, 10)]
    v = judge(samples, SOAK)
    assert not v.passed and any("preemption storm" in r for r in v.reasons), v.summary()


def test_a_growing_queue_and_leaking_memory_fail() -> None:
    samples = [Sample(float(s), "metrics", "num_queue_reqs", s / 30.0) for s in range(0, 600, 10)]
    samples += [Sample(float(s), "gpu", "gpu_mem_used_mib", 70000.0 + s) for s in range(0, 600, 10)]
    v = judge(samples, SOAK)
    assert not v.passed
    assert any("queue growing" in r for r in v.reasons) and any("GPU memory growing" in r for r in v.reasons)


def test_slope_needs_points_and_span() -> None:
    import numpy as np

    assert slope_per_min(np.array([0.0, 1.0]), np.array([0.0, 1.0])) is None
    assert slope_per_min(np.array([0.0, 60.0, 120.0]), np.array([0.0, 1.0, 2.0])) == pytest.approx(1.0)


def test_soak_rate_is_the_knees_request_rate_times_the_fraction() -> None:
    prof = load_profile(SMOKE, {"soak.rate_fraction": 0.5})
    assert soak_rate(prof, ConfigKnee(8, 600.0, 6.0, None, None, "final", "test", throughput_rps=8.0)) == 4.0
    assert soak_rate(prof, ConfigKnee(8, 600.0, 6.0, None, None, "final", "test")) == 3.0  # goodput when unknown
    with pytest.raises(ValueError):
        soak_rate(prof, ConfigKnee(8, 0.0, 0.0, None, None, "final", "test", throughput_rps=0.0))


@pytest.mark.integration
def test_soak_over_http_stores_a_soak_run_and_a_verdict(tmp_path: Path) -> None:
    from sweep.study.orchestrator import Orchestrator

    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [8]}, "ladder": [2, 4],
                                "soak": {"enabled": True, "duration_s": 4}})
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="http").knee("soak")
    con = sqlite3.connect(tmp_path / "r.db")
    rows = con.execute("SELECT status, reason, n_completed FROM runs WHERE phase = 'soak'").fetchall()
    assert len(rows) == 1 and rows[0][0] == "completed" and rows[0][1].startswith("soak ")
    assert rows[0][2] > 0
    assert con.execute("SELECT count(*) FROM samples s JOIN runs r ON r.id = s.run_id WHERE r.phase = 'soak' "
                       "AND s.name = 'num_queue_reqs'").fetchone()[0] > 0
    report = run.report.markdown.read_text()
    assert "## Soak" in report and "**verdict**: soak " in report
