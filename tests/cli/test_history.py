"""`sweep history` (issue 22 §5): two studies of one workload in one SQLite file (stored through Store's write API,
their winners in study_winners, their environments recorded), read back as a table, the versioned JSON document
and history.png; a drop after an SGLang upgrade is marked a regression; another workload of the profile is left
out and named."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.profile import load_profile
from sweep.store import Store, WinnerRecord

ROOT = Path(__file__).resolve().parents[2]


def _study(store: Store, name: str, version: str, host: str, goodput: float, ci: tuple[float, float],
           fingerprint: str | None = None) -> None:
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    sid = store.create_study(name, "smoke", prof.model_dump_json(), fingerprint or prof.fingerprint(), "grid", True,
                             "virtual", None)
    store.record_environment(sid, {"sglang_version": version, "gpu_name": "NVIDIA H200", "host": host,
                                   "model_path": "m", "simulated": True})
    store.finish_study(sid, "completed")
    store.write_winners(sid, [WinnerRecord("default", True, 1, "mrr=8", "{}", "final", 8, goodput, *ci)])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.db"
    store = Store(f"sqlite:///{path}")
    _study(store, "before", "0.5.17", "gpu-a", 5400.0, (5300.0, 5500.0))
    _study(store, "after", "0.5.23", "gpu-a", 4100.0, (4000.0, 4200.0))
    _study(store, "other-workload", "0.5.23", "gpu-b", 9000.0, (8900.0, 9100.0), fingerprint="feedbeef")
    store.close()
    return path


def test_history_json_lists_the_workloads_studies_and_marks_the_regression(db: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fp = load_profile(ROOT / "profiles" / "smoke.yaml").fingerprint()
    plot = tmp_path / "history.png"
    # the newest study of profile smoke is of another workload: --fingerprint picks the one to follow
    assert main(["history", "--db", str(db), "--fingerprint", fp, "--format", "json", "--plot", str(plot)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1 and doc["command"] == "history" and doc["fingerprint"] == fp
    studies = doc["studies"]
    assert [s["study"] for s in studies] == ["before", "after"]
    assert [s["sglang_version"] for s in studies] == ["0.5.17", "0.5.23"]
    assert studies[1]["goodput_tps"] == 4100.0 and studies[1]["regression"] is True
    assert studies[0]["regression"] is False and round(studies[1]["change_pct"], 1) == -24.1
    assert studies[1]["where"] == "SGLang 0.5.23, NVIDIA H200, gpu-a"
    assert plot.read_bytes().startswith(b"\x89PNG") and doc["plot"] == str(plot)
    datetime.fromisoformat(studies[0]["created_at"])
    from tests.cli.test_json_output import (  # the hand-written subset checker of docs/json-schema
        SCHEMAS,
        check,
    )

    check(doc, json.loads((SCHEMAS / "history.json").read_text()))


def test_history_by_profile_follows_the_newest_workload_and_names_the_other(db: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--db", str(db), "--profile", "smoke"]) == 0
    out = capsys.readouterr()
    assert "other-workload" in out.out and "before" not in out.out
    assert "1 other workload fingerprint(s) of this profile left out" in out.err


def test_history_table_shows_where_each_study_ran(db: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # at 80 where it ran is left out first (tests/cli/test_numbers_read.py)
    fp = load_profile(ROOT / "profiles" / "smoke.yaml").fingerprint()
    assert main(["history", "--db", str(db), "--fingerprint", fp]) == 0
    out = capsys.readouterr().out
    assert "0.5.17" in out and "0.5.23" in out and "gpu-a" in out and "REGRESSION" in out and "-24.1%" in out


def test_history_of_an_unknown_profile_is_one_line_and_exit_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--db", str(db), "--profile", "nope"]) == 2  # not found: bad input (docs/automation.md), not an OS failure
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no study of profile nope" in err[0]
