"""The client's event-loop lag is stored per window (runs.loop_lag_p99_ms / loop_lag_max_ms) and judged.

Issue 10 §1: the client self-check recorded client_bound = False through 130–190 ms loop stalls, because the
lag it measured was neither stored nor used. Here the loop is stalled on purpose (a probe that blocks it) and
the window must come out client-bound, with the lag in the runs table.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, inspect

from sweep.analysis.measure import client_bound_reasons, compute_stats
from sweep.core.types import ServerConfig, WindowResult
from sweep.drivers.http import HttpDriver
from sweep.launchers.base import ServerHandle
from sweep.profile import SLA, Window
from sweep.store import Store, alembic_config
from tests.launchers.test_attach_timing import ITL_MS, TTFT_MS, _specs, timed_server

SLA_LOOSE = SLA(ttft_ms=2000, tpot_ms=200)


class LoopStaller:
    """A probe that blocks the event loop for `block_s` every `every_s` (a deliberately stalled client)."""

    def __init__(self, block_s: float, every_s: float) -> None:
        self.block_s, self.every_s = block_s, every_s
        self.samples: list[object] = []
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            time.sleep(self.block_s)  # noqa: ASYNC251 - the point: the loop stalls

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _window(staller: LoopStaller | None) -> WindowResult:
    with timed_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as url:
        handle = ServerHandle(config=ServerConfig(), url=url)
        probes = (lambda h, c: [staller]) if staller is not None else None
        w = Window(warmup_requests=8, measure_seconds=2.0, drain_seconds=5.0, request_timeout_s=10.0)
        return HttpDriver(probes=probes).run_window(handle, _specs(), 8, w)


def test_a_stalled_event_loop_makes_the_window_client_bound_and_is_stored(tmp_path: Path) -> None:
    stalled = compute_stats(_window(LoopStaller(block_s=0.08, every_s=0.05)), SLA_LOOSE, bootstrap=0)
    healthy = compute_stats(_window(None), SLA_LOOSE, bootstrap=0)
    # dispatch lag and CPU alone did not see it (the reason client_bound read False on the H200)
    assert stalled.client.loop_lag_p99_ms >= 60.0 and stalled.client.loop_lag_max_ms >= stalled.client.loop_lag_p99_ms
    assert stalled.client_bound is True
    # the same window without the staller: its lag is what this (shared, loaded) machine adds by itself
    assert healthy.client.loop_lag_p99_ms < stalled.client.loop_lag_p99_ms / 2
    assert healthy.client_bound is bool(client_bound_reasons(healthy.client, SLA_LOOSE))
    assert stalled.ttft_p50_ms > healthy.ttft_p50_ms  # and the stall did distort the latencies

    with Store(f"sqlite:///{tmp_path / 'lag.db'}") as store:
        sid = store.create_study(f"lag-{uuid.uuid4().hex[:8]}", "p", "{}", "fp", "tpe", False, "http", "o")
        cid = store.create_server_config(sid, ServerConfig(), "attach", [], trial_number=None)
        rid = store.create_run(sid, cid, 8, "fp", False, "http", phase="final")
        store.finish_run(rid, stalled, [], [], window_start=0.0)
        run = store.get_run(rid)
        [summary] = [r for r in store.list_runs() if r.run.id == rid]
    assert run is not None and run.get("client_bound") is True
    assert run.get("loop_lag_p99_ms") == stalled.client.loop_lag_p99_ms and run.get("loop_lag_max_ms") == stalled.client.loop_lag_max_ms
    assert summary.get("loop_lag_p99_ms") == stalled.client.loop_lag_p99_ms  # run_summary shows it too
    # and every other client figure is stored with the run
    assert run.get("client_procs") == summary.get("client_procs") == 1 and run.get("dispatch_lag_p99_ms") is not None
    assert run.get("client_cpu_frac") == stalled.client.client_cpu_frac and run.get("max_in_flight_seen") is not None


def test_a_0001_database_gains_the_loop_lag_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0001")  # a results.db written before this change
    engine = create_engine(url)
    assert "loop_lag_p99_ms" not in {c["name"] for c in inspect(engine).get_columns("runs")}
    engine.dispose()
    with Store(url):
        pass
    engine = create_engine(url)
    insp = inspect(engine)
    assert {"loop_lag_p99_ms", "loop_lag_max_ms"} <= {c["name"] for c in insp.get_columns("runs")}
    assert {"loop_lag_p99_ms", "loop_lag_max_ms"} <= {c["name"] for c in insp.get_columns("run_summary")}
    engine.dispose()
