"""The HTTP driver's early stop counts the requests still running (issue 29): a request in flight with no first token
past the TTFT bound is already over it, as the virtual driver has always counted (VirtualRun.running). Both drivers
then stop a clearly failing window at the same point: before, the HTTP driver counted an over only once the request
ended, so a queued window stopped only after its first measured requests left the queue."""

from __future__ import annotations

import math
import multiprocessing as mp

import pytest

from sweep.analysis.early_stop import EarlyStop
from sweep.core.types import RequestRecord, RequestSpec, ServerConfig
from sweep.drivers.http import HttpDriver
from sweep.drivers.running import RunningBoard
from sweep.drivers.virtual import VirtualDriver
from sweep.launchers.base import ServerHandle
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, Window
from tests.simserver import sim_server

# 96 closed-loop users against 4 running requests, each ~1 s of decode: a measured request waits ~20 s in the
# queue for its first token, far past the 300 ms TTFT bound; no measured request ends for ~20 s.
USERS, RUNNING = 96, 4
WINDOW = Window(warmup_requests=4, warmup_seconds=0.0, measure_seconds=60.0, drain_seconds=5.0,
                request_timeout_s=120.0)
TOLERANCE_S = 3.0  # the HTTP driver checks every tick; the virtual one at least every simulated second


def specs(n: int = 600) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(64)), output_tokens=128)
            for i in range(n)]


def early_stop() -> EarlyStop:
    return EarlyStop([SLA(ttft_ms=300, tpot_ms=100)], alpha=0.01, min_requests=20, min_seconds=2.0,
                     measure_s=WINDOW.measure_seconds)


@pytest.mark.parametrize("procs", [1, 2])
def test_a_queued_http_window_stops_no_later_than_the_virtual_one(procs: int) -> None:
    """Fails on the old code: there the HTTP window could not stop before its first measured requests ended (~20 s
    in the queue, then 4 a second up to min_requests), while the virtual driver stopped at ~5 s."""
    config = ServerConfig(max_running_requests=RUNNING)
    virtual = VirtualLauncher("H200").start(config)
    sim = VirtualDriver().run_window(virtual, specs(), USERS, WINDOW, early_stop=early_stop())
    assert sim.stopped_early is not None and sim.stopped_early.startswith("TTFT P95 cannot pass"), sim.stopped_early
    with sim_server("--max-running-requests", str(RUNNING)) as url:
        handle = ServerHandle(config=config, url=url, simulated=True)
        res = HttpDriver(client_procs=procs).run_window(handle, specs(), USERS, WINDOW, early_stop=early_stop())
    assert res.stopped_early is not None and res.stopped_early.startswith("TTFT P95 cannot pass"), res.stopped_early
    ended = [r for r in res.records if not r.warmup and r.finished_at is not None and r.error is None]
    assert res.measured_seconds <= sim.measured_seconds + TOLERANCE_S, (res.measured_seconds, sim.measured_seconds,
                                                                        res.stopped_early, sim.stopped_early)
    assert len(ended) < 20, len(ended)  # decided by requests still running: too few had ended to decide alone


def test_the_board_shows_what_is_in_flight_and_forgets_what_ended() -> None:
    board = RunningBoard.local(1, 2)
    a = RequestRecord(index=0, concurrency=1, scheduled_at=1.0, sent_at=1.0, sent_output_tokens=50)
    b = RequestRecord(index=1, concurrency=1, scheduled_at=2.0, sent_at=2.0, sent_output_tokens=9, warmup=True)
    c = RequestRecord(index=2, concurrency=1, scheduled_at=3.0, sent_at=3.0)
    sa, sb = board.start(0, a), board.start(0, b)
    assert sa is not None and sb is not None and board.start(0, c) is None  # full: c is not tracked (left out)
    board.hold(0, sa)
    assert [r.scheduled_at for r in board.records()] == [2.0]  # a chunk of a is being read: a is left out
    board.release(0, sa, 1.4)
    seen = sorted(board.records(), key=lambda r: r.scheduled_at)
    assert [(r.scheduled_at, r.first_token_at, r.sent_output_tokens, r.warmup) for r in seen] == [
        (1.0, 1.4, 50, False), (2.0, None, 9, True)]
    board.end(0, sa)
    assert [r.scheduled_at for r in board.records()] == [2.0]
    assert board.start(0, c) == sa  # its slot is free again, with no first token from the request before
    assert sorted((r.scheduled_at, r.first_token_at) for r in board.records()) == [(2.0, None), (3.0, None)]


def test_a_slot_being_written_is_left_out() -> None:
    """The seqlock: a slot whose sequence is odd (its writer is changing it) is not read, which only lowers E."""
    board = RunningBoard.local(1, 1)
    slot = board.start(0, RequestRecord(index=0, concurrency=1, scheduled_at=1.0, sent_at=1.0))
    assert slot is not None and len(board.records()) == 1
    board.hold(0, slot)  # its worker is reading a chunk that may carry the first token
    assert board.records() == []
    board.release(0, slot, None)  # it did not
    (rec,) = board.records()
    assert rec.first_token_at is None


def test_a_shared_board_is_read_across_processes() -> None:
    board = RunningBoard.shared(mp.get_context("spawn"), 2, 4)
    proc = mp.get_context("spawn").Process(target=_write_one, args=(board,))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 0
    (rec,) = board.records()
    assert rec.scheduled_at == 7.0 and rec.first_token_at is None and not math.isnan(rec.scheduled_at)


def _write_one(board: RunningBoard) -> None:
    board.start(1, RequestRecord(index=0, concurrency=1, scheduled_at=7.0, sent_at=7.0))


def test_the_test_counts_no_request_twice_when_one_ends_while_it_reads() -> None:
    """EarlyStop.check reads its ended counts before it iterates the running requests: a request that ends while the
    check runs (it leaves the board, then is counted as ended) is in neither view, never in both."""
    test = EarlyStop([SLA(ttft_ms=100, max_error_rate=0.0)], alpha=0.01, min_requests=1, min_seconds=0.0,
                     measure_s=0.0)  # one failed request decides
    late = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0, error="boom", error_kind="status")

    def running() -> object:
        test.ended(late)  # it ended (and was counted) after the counts were read: not running any more
        yield from ()

    verdict = test.check(10.0, 0.0, running())  # type: ignore[arg-type]
    assert verdict is None  # 0 determined in this check's view, not 1 (nor 2)
    verdict = test.check(10.0, 0.0)
    assert verdict is not None and verdict.label == "error rate" and verdict.n == 1, verdict


def test_a_request_decoding_past_the_ttft_bound_is_not_over_it_on_the_http_driver() -> None:
    """Its first token's time reaches the board as the token comes: 16 users decoding ~350 tokens each (seconds,
    far past a 500 ms TTFT bound the step meets) run their whole window. Were the board to miss the first token,
    every request decoding longer than 500 ms would count over the bound and the window would stop at min_seconds."""
    long = [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(64)), output_tokens=350)
            for i in range(400)]
    window = Window(warmup_requests=4, warmup_seconds=0.0, measure_seconds=8.0, drain_seconds=30.0,
                    request_timeout_s=60.0)
    test = EarlyStop([SLA(ttft_ms=500, tpot_ms=100)], alpha=0.01, min_requests=10, min_seconds=2.0,
                     measure_s=window.measure_seconds)
    with sim_server() as url:
        handle = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        res = HttpDriver().run_window(handle, long, 16, window, early_stop=test)
    assert res.stopped_early is None, res.stopped_early
    assert res.measured_seconds == pytest.approx(8.0, abs=0.5)
    ttfts = [r.first_token_at - r.scheduled_at for r in res.records if not r.warmup and r.first_token_at is not None]
    assert ttfts and sorted(ttfts)[int(0.95 * len(ttfts))] < 0.5  # the step meets its TTFT bound (~70 ms)
    measured = [r for r in res.records if not r.warmup]
    assert max((r.finished_at or 0) - r.scheduled_at for r in measured if r.finished_at) > 1.0  # decodes for seconds
