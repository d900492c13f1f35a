"""Reference-client rows live beside sweep's own in `runs` but never count as ladder steps; histograms round-trip."""

from __future__ import annotations

import math
from pathlib import Path

from sweep.analysis.server_metrics import buckets_as_samples
from sweep.core.types import ServerConfig
from sweep.store import Store

STATS = {"n_completed": 10, "output_tps": 100.0, "ttft_p50_ms": 50.0, "passes_sla": True}


def test_reference_rows_are_linked_and_left_out_of_the_ladder(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("cc-store", "p", "{}", "fp", "grid", True, "http", None)
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=8), "sim", [], None)
    ours = store.create_run(sid, cid, 4, "fp", True, "http")
    ttft = [(0.1, 3.0), (0.2, 9.0), (math.inf, 10.0)]
    store.finish_run(ours, STATS, [], buckets_as_samples("time_to_first_token_seconds", ttft, 5.0), 0.0)
    ref = store.create_run(sid, cid, 4, "fp", True, "reference-h11", reference_for=ours)
    store.finish_run(ref, dict(STATS, ttft_p50_ms=55.0), [], [], 0.0)
    assert [r.get("id") for r in store.completed_runs(sid)] == [ours]  # a resumed study reuses sweep's steps only
    assert [r.get("id") for r in store.completed_runs(sid, cid)] == [ours]
    assert [r.get("id") for r in store.study_runs(sid)] == [ours]
    refs = store.reference_runs(sid)
    assert [(r.get("id"), r.get("reference_for_run_id"), r.get("driver"), r.get("ttft_p50_ms")) for r in refs] == [
        (ref, ours, "reference-h11", 55.0)]
    assert store.window_histograms(sid) == {ours: {"time_to_first_token_seconds": ttft}}
    assert {r.get("run_id") for r in store.list_runs(study="cc-store")} == {ours, ref}  # `sweep runs` shows both
