"""A streamed window (issue 23 §2): the virtual driver hands every ended request to the Recorder, which stores them in
bounded batches while the window runs and keeps a few numbers per request; the window's statistics are those of the
whole records, the client's memory no longer grows with the tokens streamed, and a lapsed lease stops the batches."""

from __future__ import annotations

import copy
import gc
import os
import random
import tracemalloc
from pathlib import Path

import pytest

from sweep.analysis.measure import compute_stats
from sweep.core.errors import Fenced
from sweep.core.types import RequestRecord, RequestSpec, ServerConfig, WindowResult
from sweep.drivers.virtual import VirtualDriver
from sweep.ladder.recorder import Recorder
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, Window
from sweep.store import Store
from sweep.store import queries as q

SLA_ = SLA(ttft_ms=2000, tpot_ms=60)


def specs(n: int = 64, out: tuple[int, int] = (32, 200), seed: int = 0) -> list[RequestSpec]:
    rng = random.Random(seed)
    return [RequestSpec(index=i, input_ids=tuple(rng.randrange(3, 1000) for _ in range(rng.randint(100, 400))),
                        output_tokens=rng.randint(*out)) for i in range(n)]


def open_run(url: str) -> tuple[Store, int, int]:
    store = Store(url)
    sid = store.create_study(f"s{os.getpid()}-{random.random()}"[:40] if "postgresql" in url else "s", "p", "{}", "fp", "grid", True, "virtual", None)
    cid = store.create_server_config(sid, ServerConfig(32), "virtual", [], 0)
    store.update_attempt(cid, status="running")
    return store, cid, store.create_run(sid, cid, 16, "fp", True, "virtual")


def streamed(store: Store, run_id: int, window: Window, sp: list[RequestSpec], batch: int = 200,
             check: object = None) -> tuple[WindowResult, list[RequestRecord], Recorder]:
    rec = Recorder(store, run_id, batch=batch, every_s=3600)
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig(max_running_requests=32))
    sink = rec if check is None else check(rec)  # type: ignore[operator]
    result = VirtualDriver().run_window(handle, sp, 16, window, sink=sink)
    out, rest = rec.finish(result)
    return out, rest, rec


@pytest.fixture
def url(tmp_path: Path) -> str:
    return os.environ.get("SWEEP_TEST_PG_URL") or f"sqlite:///{tmp_path / 'r.db'}"


def test_a_streamed_window_has_the_whole_records_statistics_and_rows(url: str) -> None:
    window = Window(warmup_requests=10, warmup_seconds=0.0, measure_seconds=40.0, drain_seconds=5.0)
    sp = specs()
    whole = VirtualDriver().run_window(VirtualLauncher("H200", "llama3-8b").start(ServerConfig(max_running_requests=32)),
                                       sp, 16, window)
    expected_rows = q.request_rows(0, copy.deepcopy(whole.records), whole.window_start)
    store, _, run_id = open_run(url)
    try:
        out, rest, rec = streamed(store, run_id, window, sp)
        assert rec.batches >= 2 and len(rest) < 200  # stored while the window ran; the rest with the completion
        assert all(len(r.chunk_times) <= 3 for r in out.records)  # folded: a few numbers per request
        assert compute_stats(out, SLA_) == compute_stats(whole, SLA_)  # identical, ITL percentiles included
        store.finish_run(run_id, compute_stats(out, SLA_), rest, out.samples, out.window_start)
        stored = store.requests_for_run(run_id)
        assert len(stored) == len(whole.records)
        by_idx = sorted((r["idx"], r["scheduled_at"], r["ttft_ms"], r["tpot_ms"], r["e2e_ms"]) for r in expected_rows)
        assert sorted((s.idx, s.scheduled_at, s.ttft_ms, s.tpot_ms, s.e2e_ms) for s in stored) == by_idx
        rec.close_files()
    finally:
        store.close()


def test_requests_are_stored_while_the_window_runs_and_a_lapsed_lease_stops_them(url: str) -> None:
    window = Window(warmup_requests=0, warmup_seconds=0.0, measure_seconds=60.0, drain_seconds=5.0)
    store, cid, run_id = open_run(url)
    seen_in_db: list[int] = []

    def check(rec: Recorder) -> object:
        def sink(r: RequestRecord, start: float, end: float) -> None:
            rec(r, start, end)
            if rec.seen == 500:
                seen_in_db.append(len(store.requests_for_run(run_id)))
                store.abort_config(cid, "its worker was lost")  # the recovery path took the attempt over
        return sink

    try:
        with pytest.raises(Fenced):
            streamed(store, run_id, window, specs(), check=check)
        assert seen_in_db and seen_in_db[0] >= 400  # visible in the database before the window ended
        assert len(store.requests_for_run(run_id)) == seen_in_db[0]  # nothing written after the lease lapsed
        sid = store.get_study_by_name(store.get_run(run_id).study_name).id  # type: ignore[union-attr]
        assert store.completed_runs(sid) == []  # the rows belong to an aborted run, never a completed one's
        assert [r.status for r in store.study_runs(sid)] == ["aborted"]
    finally:
        store.close()


def peak_traced(fn: object) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_streamed_windows_memory_does_not_grow_with_its_tokens(tmp_path: Path) -> None:
    # 16 streams of 1,000-2,000 tokens for 240 simulated seconds: about 590k tokens. Holding every chunk (the
    # unstreamed window) traced an 11.6 MB peak here (about 20 B a token); streamed, 2.3 MB.
    window = Window(warmup_requests=0, warmup_seconds=0.0, measure_seconds=240.0, drain_seconds=5.0)
    sp = specs(32, (1000, 2000))
    store, _, run_id = open_run(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        tokens: list[int] = []

        def run() -> None:
            out, _, rec = streamed(store, run_id, window, sp, batch=500)
            tokens.append(sum(r.output_tokens for r in out.records))
            tokens.append(len(out.records))
            rec.close_files()

        peak = peak_traced(run)
        n_tokens, n_requests = tokens
        assert n_tokens > 500_000
        assert peak < 5_000_000 and peak < 8 * n_tokens, (peak, n_tokens, n_requests)
    finally:
        store.close()
