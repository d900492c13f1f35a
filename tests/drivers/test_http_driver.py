"""HTTP driver: SSE robustness (chunk boundaries, errors, disconnects), failure classes, open loop over sockets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from sweep.analysis.measure import e2e_ms, ttft_ms
from sweep.analysis.measure_client import client_stats
from sweep.core.types import RequestRecord, RequestSpec, ServerConfig, WindowResult
from sweep.drivers.http import HttpDriver
from sweep.drivers.sse import SseSink, StreamError
from sweep.launchers.base import ServerHandle
from sweep.profile import RateArrival, Window
from tests.simserver import sim_server


def _gen(n: int) -> bytes:
    return f"data: {json.dumps({'text': 'x' * n, 'meta_info': {'completion_tokens': n, 'prompt_tokens': 5}})}\n\n".encode()


def _run(chunks: list[bytes], chat: bool = False) -> RequestRecord:
    ticks = iter(range(1000))
    rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
    sink = SseSink(rec, chat, lambda: float(next(ticks)))
    for c in chunks:
        sink.feed(c, float(next(ticks)))
    sink.end()
    return rec


def test_events_split_across_chunks_at_every_byte() -> None:
    body = _gen(1) + _gen(2) + _gen(3) + b"data: [DONE]\n\n"
    for cut in range(1, len(body)):
        rec = _run([body[:cut], body[cut:]])
        assert rec.output_tokens == 3 and sum(rec.chunk_tokens) == 3 and rec.finished_at is not None
        assert rec.prompt_tokens == 5


def test_several_events_per_chunk_share_the_chunk_time_and_crlf_works() -> None:
    rec = _run([_gen(1), (_gen(3) + _gen(5)).replace(b"\n", b"\r\n"), b": keep-alive\n\ndata: [DONE]\n\n"])
    assert rec.chunk_tokens == [1, 2, 2] and rec.chunk_times == [0.0, 1.0, 1.0]
    assert rec.first_token_at == 0.0 and rec.output_tokens == 5
    chat = [f"data: {json.dumps({'choices': [{'delta': {'content': w}}]})}\n\n".encode() for w in ("a", "b")]
    usage = f"data: {json.dumps({'choices': [], 'usage': {'prompt_tokens': 9, 'completion_tokens': 2}})}\n\n"
    rec = _run([chat[0] + chat[1], usage.encode(), b"data: [DONE]"], chat=True)
    assert rec.output_tokens == 2 and rec.prompt_tokens == 9 and rec.finished_at is not None


@pytest.mark.parametrize(("chunks", "kind"), [
    ([_gen(1), b'data: {"error": {"message": "boom"}}\n\n'], "server_error"),
    ([_gen(1), b'data: {"text": "trunc\n\n'], "malformed"),
    ([b"data: [1, 2]\n\n"], "malformed"),
    ([_gen(1), _gen(2)], "disconnect"),
    ([_gen(1), b'data: {"meta_info": {"finish_reason": {"type": "abort", "message": "oom"}}}\n\n'], "server_error"),
])
def test_stream_failures_are_classified(chunks: list[bytes], kind: str) -> None:
    with pytest.raises(StreamError) as exc:
        _run(chunks)
    assert exc.value.kind == kind


def _specs(n: int = 40, prompt: int = 64, out: int = 16) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(prompt + i % 8)),
                        output_tokens=out + i % 8) for i in range(n)]


@pytest.fixture(scope="module")
def faulty() -> Iterator[ServerHandle]:
    with sim_server("--sim-http500-rate", "0.2", "--sim-malformed-sse-rate", "0.02") as url:
        yield ServerHandle(config=ServerConfig(), url=url, simulated=True)


def test_faulty_server_failures_recorded_and_classified(faulty: ServerHandle) -> None:
    w = Window(warmup_requests=0, measure_seconds=2.0, drain_seconds=10.0, request_timeout_s=30.0)
    res = HttpDriver().run_window(faulty, _specs(), 8, w)
    kinds = {r.error_kind for r in res.records}
    assert {"status", "malformed", None} <= kinds
    for r in res.records:
        assert (r.error is None) == (r.error_kind is None)
        if r.error_kind == "status":
            assert r.error is not None and r.error.startswith("HTTP 500") and r.first_token_at is None
        if r.error is None:
            assert r.finished_at is not None and sum(r.chunk_tokens) == r.output_tokens > 0


def test_crashing_server_disconnects_and_aborts_the_window() -> None:
    with sim_server("--sim-crash-after-s", "1.5", "--sim-speed", "20") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=0, measure_seconds=30.0, drain_seconds=2.0, request_timeout_s=10.0)
        drv = HttpDriver(alive=lambda _: url.proc.poll() is None)
        res = drv.run_window(h, _specs(out=400), 8, w)
    assert res.aborted == "server died during the window"
    kinds = {r.error_kind for r in res.records}
    assert "disconnect" in kinds, kinds
    assert all(r.finished_at is None for r in res.records if r.error_kind == "disconnect")


def test_a_server_that_dies_after_the_last_periodic_check_still_aborts_the_window() -> None:
    """Chaos night finding 5: a server killed in a window's last seconds, its requests failing at once, the workers
    done before the liveness watch looked again: the window was stored as failed requests against the SLA. The
    driver asks once more when the window ends (the periodic watch here looks only once, at the start)."""
    with sim_server("--sim-crash-after-s", "1.0", "--sim-speed", "20") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=0, measure_seconds=2.0, drain_seconds=2.0, request_timeout_s=10.0)
        drv = HttpDriver(alive=lambda _: url.proc.poll() is None, alive_interval_s=600.0)
        res = drv.run_window(h, _specs(out=400), 4, w)
    assert res.aborted == "server died during the window", res.aborted


def _ms(value: float | None) -> float:
    """A figure of a finished request, which has every one."""
    assert value is not None
    return value


def test_open_loop_counts_latency_from_schedule_and_holds_the_cap() -> None:
    with sim_server("--sim-speed", "5") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=0, measure_seconds=2.0, drain_seconds=60.0, request_timeout_s=60.0)
        res = HttpDriver().run_window(h, _specs(out=8), 99, w, arrival=RateArrival(kind="constant", rate=40.0,
                                                                                   max_in_flight=4))
    figures = client_stats(res.client, res.window_start, res.window_end)
    assert res.concurrency == 99 and figures.max_in_flight_seen is not None and figures.max_in_flight_seen <= 4
    assert figures.cap_waited
    events = sorted([(r.sent_at, 1) for r in res.records if r.finished_at] +
                    [(r.finished_at, -1) for r in res.records if r.finished_at], key=lambda e: (e[0], e[1]))
    depth, peak = 0, 0
    for _, d in events:
        depth += d
        peak = max(peak, depth)
    assert peak <= 4
    sched = [r.scheduled_at for r in res.records]
    assert all(b - a == pytest.approx(0.025, abs=1e-9) for a, b in zip(sched, sched[1:], strict=False))
    done = [r for r in res.records if r.finished_at is not None]
    q = len(done) // 4
    early, late = done[:q], done[-q:]
    # the late requests waited for a slot: counted from their schedule, not from when they went out
    assert min(_ms(ttft_ms(r)) for r in late) > max(_ms(ttft_ms(r)) for r in early)
    assert all(r.sent_at - r.scheduled_at > 0.5 for r in late)
    assert all(_ms(e2e_ms(r)) > (_ms(r.finished_at) - r.sent_at) * 1000 for r in late)


def test_requests_stalled_mid_stream_by_a_hung_server_time_out() -> None:
    # the scheduler stops after 1 s: streams stall mid-response, so the per-request timeout must end them
    with sim_server("--sim-hang-after-s", "1.0") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=0, measure_seconds=1.5, drain_seconds=5.0, request_timeout_s=2.0)
        res = HttpDriver().run_window(h, _specs(out=2000), 4, w)
        assert url.proc.poll() is None  # the server is alive, just stuck
    stuck = [r for r in res.records if r.error_kind == "timeout"]
    assert len(stuck) >= 4 and all(r.finished_at is None and r.error == "request timed out" for r in stuck)
    assert all(r.error_kind in ("timeout", None) for r in res.records)
    assert any(r.chunk_times for r in stuck)  # they had started streaming before the hang


class _Suspendable:
    """perf_counter, which jumps `by` seconds once `suspend()` is called: what the driver's clock reads across a
    SIGSTOP (CLOCK_MONOTONIC runs on while the process does not)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset

    def suspend(self, by: float) -> None:
        self.offset += by


def _frozen_for_40_s(at_s: float, window: Window, stall_timeout_s: float, out: int,
                     server: tuple[str, ...] = ()) -> tuple[_Suspendable, WindowResult]:
    """One 4-user window on the simulated server (started with `server`) whose driver's clock jumps 40 s at `at_s`,
    as a process frozen by SIGSTOP sees it."""
    clock = _Suspendable()
    with sim_server(*server) as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        timer = threading.Timer(at_s, clock.suspend, args=(40.0,))
        timer.start()
        try:
            res = HttpDriver(clock=clock, stall_timeout_s=stall_timeout_s).run_window(h, _specs(out=out), 4, window)
        finally:
            timer.cancel()
    return clock, res


def test_the_drivers_own_suspension_is_not_taken_for_a_hung_server() -> None:
    """The process is frozen 40 s mid-window (longer than the stall deadline) while the server streams on: the
    loop's own tick gap explains the silence, so the window is not stored 'hung' (issue 23 item 1)."""
    w = Window(warmup_requests=0, measure_seconds=2.0, drain_seconds=120.0, request_timeout_s=300.0)
    clock, res = _frozen_for_40_s(at_s=0.5, window=w, stall_timeout_s=5.0, out=200)
    assert clock.offset == 40.0
    assert res.aborted is None
    assert all(r.error is None for r in res.records) and res.records
    # the pause fell inside the 2 s window: the window says how much of it the client itself was not running, so
    # the ladder measures the step again instead of judging the server by it (tests/faults/test_chaos_suspend.py)
    assert 1.0 < res.suspended_s <= 2.0, res.suspended_s


def test_a_server_hang_is_timed_from_when_the_driver_woke_not_across_its_own_suspension() -> None:
    """The server hangs at 1 s; the process is frozen for 40 s at 1.5 s. The silence it did not see is not counted:
    the hang is called once the server stayed silent for the stall deadline after the process woke, and the window
    says so (not 'no response bytes for 41 s', which was the frozen process's own pause)."""
    # the window runs past the hang's call (41.5 + 2 s on the driver's clock), then its stuck requests are cut
    w = Window(warmup_requests=0, measure_seconds=46.0, drain_seconds=0.5, request_timeout_s=60.0)
    clock, res = _frozen_for_40_s(at_s=1.5, window=w, stall_timeout_s=2.0, out=2000, server=("--sim-hang-after-s", "1.0"))
    assert clock.offset == 40.0
    assert res.aborted is not None and res.aborted.startswith("hung: no response bytes for 2 s"), res.aborted
