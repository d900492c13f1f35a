"""A streamed window on the HTTP driver (issue 23 §2) against the simulated server process: the client workers send
their ended requests on in bounded batches while the window runs (in-process and from spawned client processes),
the Recorder stores them before the window ends, the statistics are those of the whole records, and a lapsed lease
stops the window. Sessions, on both drivers: a session's requests are handed over once the session ended."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from sweep.analysis.measure import compute_stats
from sweep.core.errors import Fenced
from sweep.core.types import RecordSink, RequestRecord, RequestSpec, ServerConfig, WindowResult
from sweep.drivers.coord import Coord
from sweep.drivers.http import HttpDriver
from sweep.drivers.virtual import VirtualDriver
from sweep.drivers.worker import Plan, run_worker
from sweep.ladder.recorder import Recorder
from sweep.launchers.base import ServerHandle
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, GammaArrival, Window
from sweep.profile.warmup import WarmupRule
from sweep.store import Store
from sweep.workload.sessions import SessionStream
from tests.ladder.test_streamed_window import open_run
from tests.simserver import sim_server
from tests.workload.test_sessions import _workload

SLA_ = SLA(ttft_ms=2000, tpot_ms=60)
WINDOW = Window(warmup_requests=8, warmup_seconds=0.0, measure_seconds=3.0, drain_seconds=20.0)


def specs(n: int = 40) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(48 + i)),
                        output_tokens=16 + i % 24) for i in range(n)]


@pytest.fixture(scope="module")
def server() -> object:
    with sim_server() as url:
        yield ServerHandle(config=ServerConfig(), url=url, simulated=True)


@pytest.mark.parametrize("procs,open_loop", [(1, False), (2, False), (2, True)])
def test_a_streamed_http_window_has_the_whole_records_statistics_and_rows(
        server: ServerHandle, tmp_path: Path, procs: int, open_loop: bool) -> None:
    store, _, run_id = open_run(f"sqlite:///{tmp_path / 'r.db'}")
    rec = Recorder(store, run_id, batch=40, every_s=3600)
    whole: dict[int, RequestRecord] = {}  # each record as it was handed over, before the Recorder folded it
    during: list[tuple[float, int]] = []  # (time, requests stored) at each hand-over

    def sink(r: RequestRecord, start: float, end: float) -> None:
        whole[id(r)] = copy.deepcopy(r)
        rec(r, start, end)
        during.append((time.perf_counter(), rec.batches))

    arrival = GammaArrival(rate=25.0, cv=1.0, max_in_flight=32) if open_loop else None
    try:
        result = HttpDriver(client_procs=procs, seed=3).run_window(server, specs(), 8, WINDOW, arrival=arrival,
                                                                   sink=sink)
        out, rest = rec.finish(result)
        assert len(whole) == len(out.records) > 60  # every request was handed over once
        assert all(len(r.chunk_times) <= 3 for r in out.records)  # folded: a few numbers per request
        # batches were stored while the window was measuring, not only at its end
        assert any(t < out.window_end and n >= 1 for t, n in during), during[:5]
        unfolded = replace(out, records=[whole[id(r)] for r in out.records], itl_ms=None)
        assert compute_stats(out, SLA_) == compute_stats(unfolded, SLA_)  # identical, ITL percentiles included
        store.finish_run(run_id, compute_stats(out, SLA_), rest, out.samples, out.window_start)
        stored = store.requests_for_run(run_id)
        assert sorted((s.idx, s.scheduled_at) for s in stored) == sorted(
            (r.index, r.scheduled_at - out.window_start) for r in out.records)
        rec.close_files()
    finally:
        store.close()


def test_a_worker_sends_its_ended_requests_in_bounded_batches_and_keeps_only_the_rest(server: ServerHandle) -> None:
    batches: list[list[RequestRecord]] = []
    plan = Plan(url=str(server.url), headers={}, api="generate", model_name="default", specs=specs(),
                window=WINDOW.model_copy(update={"measure_seconds": 2.0}), concurrency=6, users=6, batch=10, batch_s=3600)
    coord, t0 = Coord(WarmupRule.closed(plan.window, 6, 6)), time.perf_counter()
    coord.begin(t0)
    result = asyncio.run(run_worker(plan, coord, t0, emit=batches.append))
    assert len(batches) >= 3 and all(len(b) == 10 for b in batches)
    assert len(result.records) < 10 + plan.users  # at most a batch not yet due and the requests in flight
    sent = [id(r) for b in batches for r in b]
    assert len(set(sent) | {id(r) for r in result.records}) == len(sent) + len(result.records)  # each once


def test_a_lapsed_lease_stops_a_streamed_http_window(server: ServerHandle, tmp_path: Path) -> None:
    store: Store
    store, cid, run_id = open_run(f"sqlite:///{tmp_path / 'f.db'}")
    rec = Recorder(store, run_id, batch=10, every_s=3600)

    def sink(r: RequestRecord, start: float, end: float) -> None:
        rec(r, start, end)
        if rec.seen == 30:
            store.abort_config(cid, "its worker was lost")  # the recovery path took the attempt over

    window = WINDOW.model_copy(update={"measure_seconds": 60.0})
    began = time.monotonic()
    try:
        with pytest.raises(Fenced):
            HttpDriver(client_procs=2).run_window(server, specs(), 8, window, sink=sink)
        assert time.monotonic() - began < 30.0  # the window stopped dispatching, it did not run its 60 s
        assert 20 <= len(store.requests_for_run(run_id)) <= 30  # nothing stored after the lease lapsed
        assert [r.status for r in store.study_runs(1)] == ["aborted"]
    finally:
        rec.close_files()
        store.close()


def streamed_sessions(run: Callable[[RecordSink], WindowResult], tmp_path: Path) -> None:
    """A sessions window through the Recorder: each request handed over once, after its session ended (its
    session_turns final), stored while the window ran, the statistics those of the whole records."""
    store, _, run_id = open_run(f"sqlite:///{tmp_path / 's.db'}")
    rec = Recorder(store, run_id, batch=20, every_s=3600)
    whole: dict[int, RequestRecord] = {}

    def sink(r: RequestRecord, start: float, end: float) -> None:
        assert id(r) not in whole
        whole[id(r)] = copy.deepcopy(r)
        rec(r, start, end)

    try:
        out, rest = rec.finish(run(sink))
        assert rec.batches >= 2 and len(whole) == len(out.records) > 40
        assert [whole[id(r)].session_turns for r in out.records] == [r.session_turns for r in out.records]
        assert any(r.session_turns for r in out.records) and any((r.turn or 0) > 1 for r in out.records)
        unfolded = replace(out, records=[whole[id(r)] for r in out.records], itl_ms=None)
        assert compute_stats(out, SLA_) == compute_stats(unfolded, SLA_)
        store.finish_run(run_id, compute_stats(out, SLA_), rest, out.samples, out.window_start)
        stored = store.requests_for_run(run_id)
        assert sorted((s.idx, s.turn, s.branch, s.session_turns) for s in stored) == sorted(
            (r.index, r.turn, r.branch, r.session_turns) for r in out.records)
        rec.close_files()
    finally:
        store.close()


def test_a_streamed_sessions_window_on_the_virtual_driver(tmp_path: Path) -> None:
    launcher = VirtualLauncher("H200")
    h = launcher.start(ServerConfig(max_running_requests=64))
    window = Window(warmup_requests=8, measure_seconds=30.0, drain_seconds=30.0)
    streamed_sessions(lambda sink: VirtualDriver().run_window(h, SessionStream(_workload()), 8, window, sink=sink),
                      tmp_path)


def test_a_streamed_sessions_window_on_the_http_driver(server: ServerHandle, tmp_path: Path) -> None:
    window = Window(warmup_requests=4, measure_seconds=3.0, drain_seconds=20.0)
    streamed_sessions(lambda sink: HttpDriver(client_procs=2).run_window(server, SessionStream(_workload()), 6, window,
                                                                         sink=sink), tmp_path)
