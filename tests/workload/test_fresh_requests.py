"""A study sends fresh requests: no request repeats on one server, and no step inherits the previous step's cache."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator
from sweep.workload.stream import RequestStream, StreamExhausted

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _smoke(tmp_path: Path, **overrides: Any) -> Path:
    """One configuration of the smoke profile through its ladder on the virtual driver; returns the DB path."""
    base = {"search.space.max_running_requests": [8], "window.measure_seconds": 20.0, "ladder": [2, 4, 8, 16]}
    prof = load_profile(SMOKE, {**base, **overrides})
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("fresh")
    return db


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


MULTIMODAL_LIKE = {"workload.mix": {"text": 0.6, "image": 0.3, "video": 0.1},
                   "server.model_path": "models/qwen2.5-vl-7b-shape",
                   "workload.media": {"image_width": 56, "image_height": 56, "video_frames": 2, "video_width": 28,
                                      "video_height": 28}}


@pytest.mark.integration
@pytest.mark.parametrize("overrides", [{}, MULTIMODAL_LIKE], ids=["smoke", "multimodal-like"])
def test_no_request_is_sent_twice_to_one_server_across_its_ladder(tmp_path: Path, overrides: dict[str, Any]) -> None:
    db = _smoke(tmp_path, **overrides)
    per_config = _rows(db, "SELECT r.server_config_id, q.idx FROM requests q JOIN runs r ON r.id = q.run_id")
    steps = _rows(db, "SELECT count(*) FROM runs WHERE status = 'completed'")[0][0]
    assert steps == 4 and len(per_config) > 500  # the smoke pool holds 500: the old code had to cycle it
    ids: dict[int, list[int]] = {}
    for cid, idx in per_config:
        ids.setdefault(cid, []).append(idx)
    stream = RequestStream(load_profile(SMOKE, overrides).workload, base_dir=ROOT)
    for cid, sent in ids.items():
        assert len(sent) == len(set(sent)), f"configuration {cid}: request ids sent twice"
        prompts = [stream.at(i).input_ids for i in sent]
        assert len(prompts) == len(set(prompts)), f"configuration {cid}: a prompt sent twice"


@pytest.mark.integration
def test_cache_hit_rate_does_not_climb_the_ladder(tmp_path: Path) -> None:
    db = _smoke(tmp_path)
    hits = [h for (h,) in _rows(db, "SELECT cache_hit_rate FROM runs ORDER BY concurrency")]
    assert len(hits) == 4
    # smoke's shared prefixes predict ~11% (half the prompts start with one of two 64-token prefixes)
    assert max(hits) - min(hits) < 0.05, hits
    assert max(hits) < 0.2, hits


def test_a_dataset_smaller_than_any_ladder_is_refused_at_load(tmp_path: Path) -> None:
    """Closed loop: each step sends at least its warm-up and one request per user (4 x 4 + 2 + 4 + 8 + 16 = 46)."""
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(f'{{"prompt": "question number {i} about batching", "output_len": 8}}\n' for i in range(40)))
    with pytest.raises(StreamExhausted, match="holds 40 entries and one ladder sends at least .* 46; set "
                                              "workload.replay: true"):
        _smoke(tmp_path, **{"workload.dataset": {"path": str(data)}})
    assert not (tmp_path / "r.db").exists()


@pytest.mark.integration
def test_a_dataset_that_runs_out_mid_ladder_stops_that_configuration_not_the_study(tmp_path: Path) -> None:
    """380 entries: mrr=4's ladder (its c=8 step runs 4 at a time) fits, mrr=8's last step does not. The study
    measures both, names the one that ran out with its reason, and ends (exit 0), so there is nothing to resume."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"prompt": "{" ".join(["word"] * (20 + i % 30))}", "output_len": 16}}\n'
                            for i in range(380)))
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", str(SMOKE), "--db", str(db), "--out",
                           str(tmp_path / "rep"), "--driver", "virtual", "--study", "short", "--no-progress",
                           "--set", f"workload.dataset.path={data}"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    configs = dict(_rows(db, "SELECT max_running_requests, status FROM server_configs"))
    assert configs == {4: "completed", 8: "failed"}, configs
    reason = _rows(db, "SELECT failure_reason FROM server_configs WHERE max_running_requests = 8")[0][0]
    assert reason.startswith("dataset_exhausted: ") and "holds 380 entries" in reason
    measured = _rows(db, "SELECT c.max_running_requests, count(*) FROM runs r JOIN server_configs c "
                         "ON c.id = r.server_config_id WHERE r.status = 'completed' GROUP BY 1")
    assert dict(measured) == {4: 3, 8: 2}
    assert _rows(db, "SELECT status FROM sweep_studies") == [("completed",)]
    assert "dataset_exhausted" in proc.stdout + proc.stderr


@pytest.mark.integration
def test_replay_is_the_old_pool_and_its_cache_hits_come_back(tmp_path: Path) -> None:
    db = _smoke(tmp_path, **{"workload.replay": True, "window.flush_cache": False})
    hits = [h for (h,) in _rows(db, "SELECT cache_hit_rate FROM runs ORDER BY concurrency")]
    predicted = [p for (p,) in _rows(db, "SELECT cache_hit_rate_predicted FROM runs ORDER BY concurrency")]
    # the repeats hit, and the prediction from what was sent sees them too (the old shared-prefix formula could not)
    assert hits[-1] > 0.5 and predicted[-1] > 0.5 and hits[-1] <= predicted[-1] + 0.02, (hits, predicted)


def _first_touch_cached(db: Path, overrides: dict[str, Any]) -> dict[int, list[int]]:
    """Per step (concurrency): cached tokens of the first-sent request of each shared-prefix group."""
    stream = RequestStream(load_profile(SMOKE, overrides).workload, base_dir=ROOT)
    out: dict[int, list[int]] = {}
    for c, run_id in _rows(db, "SELECT concurrency, id FROM runs WHERE status = 'completed' ORDER BY concurrency"):
        seen: set[int] = set()
        for idx, cached in _rows(db, f"SELECT idx, cached_tokens FROM requests WHERE run_id = {run_id} "
                                     "AND error IS NULL ORDER BY sent_at, id"):
            group = stream.at(idx).prefix_group
            if group is not None and group not in seen:
                seen.add(group)
                out.setdefault(c, []).append(cached)
    return out


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("flush", [True, False])
def test_http_ladder_flushes_the_simulated_servers_cache_between_steps(tmp_path: Path, flush: bool) -> None:
    overrides = {"search.space.max_running_requests": [8], "ladder": [2, 4], "window.measure_seconds": 2.0,
                 "window.flush_cache": flush}
    prof = load_profile(SMOKE, overrides)
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, launcher_kind="sim", driver="http").knee("flush-http")
    first = _first_touch_cached(db, overrides)
    assert sorted(first) == [2, 4] and all(len(v) == 2 for v in first.values()), first
    prefix = prof.workload.shared_prefix.length
    assert all(cached < prefix for cached in first[2])  # a fresh server: the first touch of each prefix misses
    if flush:
        assert all(cached < prefix for cached in first[4]), first  # emptied before the step: misses again
    else:
        assert all(cached >= prefix for cached in first[4]), first  # the previous step's prefixes still cached


@pytest.mark.integration
def test_an_open_loop_ladder_too_long_for_the_dataset_is_refused_before_anything_runs(tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(f'{{"prompt": "question {i}", "output_len": 8}}\n' for i in range(40)))
    prof = load_profile(SMOKE, {"workload.dataset": {"path": str(data)}, "ladder": [2, 4],
                                "arrival": {"kind": "constant", "rate": 50.0}})
    db = tmp_path / "r.db"
    with pytest.raises(StreamExhausted, match="holds 40 entries and one ladder's schedules send"):
        Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("short")
    assert not db.exists() or _rows(db, "SELECT count(*) FROM sweep_studies") == [(0,)]  # nothing written
    replay = load_profile(SMOKE, {"workload.dataset": {"path": str(data)}, "ladder": [2],
                                  "arrival": {"kind": "constant", "rate": 50.0}, "workload.replay": True,
                                  "search.space.max_running_requests": [8]})
    run = Orchestrator(replay, f"sqlite:///{tmp_path / 'replay.db'}", tmp_path, driver="virtual").knee("replayed")
    assert run.result is not None and _rows(tmp_path / "replay.db", "SELECT count(*) FROM runs WHERE status = 'completed'") == [(1,)]


@pytest.mark.integration
def test_cli_says_the_dataset_ran_out_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(f'{{"prompt": "question {i}", "output_len": 8}}\n' for i in range(30)))
    proc = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "knee", "--profile", str(SMOKE), "--db", str(tmp_path / "r.db"),
         "--out", str(tmp_path / "out"), "--driver", "virtual", "--study", "short",
         "--set", f"workload.dataset.path={data}", "--set", "search.space.max_running_requests=[8]"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if "workload.replay" in ln]
    assert len(errors) == 1 and "holds 30 entries" in errors[0] and "Traceback" not in proc.stderr
