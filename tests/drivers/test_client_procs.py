"""HttpDriver(client_procs=N): load sharded over spawned processes, records merged, one window for all."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.analysis.measure_client import client_stats
from sweep.core.types import RequestSpec, ServerConfig
from sweep.drivers.http import HttpDriver
from sweep.drivers.probes import Clock, MetricsProbe, Probe
from sweep.launchers.base import ServerHandle
from sweep.profile import GammaArrival, Window
from tests.simserver import sim_server


def _specs(n: int = 30) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(3 + (i * 5 + j) % 990 for j in range(64 + i)), output_tokens=12)
            for i in range(n)]


def _probes(handle: ServerHandle, clock: Clock) -> list[Probe]:
    return [MetricsProbe(handle.url or "", interval_s=0.5, clock=clock)]


def test_closed_and_open_loop_over_two_processes() -> None:
    with sim_server() as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=12, warmup_seconds=0.0, measure_seconds=1.5, drain_seconds=20.0)
        closed = HttpDriver(client_procs=2, probes=_probes).run_window(h, _specs(), 6, w)
        gamma = GammaArrival(rate=30.0, cv=2.0, max_in_flight=64)
        opened = HttpDriver(client_procs=2, seed=5).run_window(h, _specs(), 8, w, arrival=gamma)
    # closed loop: both shards' records merged; warm-up is global (12 completions), one window start for all
    assert len(closed.client) == 2  # one self-check record per client process
    assert sum(r.warmup for r in closed.records) >= 12
    assert all(r.warmup == (r.scheduled_at < closed.window_start) for r in closed.records)
    assert all(r.error is None for r in closed.records)
    measured = [r for r in closed.records if not r.warmup and r.scheduled_at < closed.window_end]
    assert len(measured) > 20
    assert closed.counters_end["num_requests_total"] > closed.counters_start["num_requests_total"]
    assert closed.ttft_histogram and closed.samples
    # at most 6 requests in flight at any moment across both processes (3 users each)
    events = sorted([(r.sent_at, 1) for r in closed.records] + [(r.finished_at, -1) for r in closed.records])
    assert max(np.cumsum([d for _, d in events])) <= 6
    # open loop: the merged schedule is exactly the single-process schedule (disjoint deterministic shards)
    offs = gamma.schedule(w, 5, 8).offsets
    sched = np.array([r.scheduled_at for r in opened.records])
    t0 = sched[0]
    assert sched - t0 == pytest.approx(offs[:len(sched)], abs=1e-6)  # every send up to the window's end
    assert t0 + offs[len(sched)] >= opened.window_end > sched[-1]
    assert all(r.warmup == (r.scheduled_at < opened.window_start) for r in opened.records)
    assert all(r.error is None and r.sent_at >= r.scheduled_at for r in opened.records)
    figures = client_stats(opened.client, opened.window_start, opened.window_end)
    assert figures.client_procs == 2 and (figures.client_cpu_total or 0.0) >= (figures.client_cpu_frac or 0.0) > 0.0


def test_invalid_client_procs() -> None:
    with pytest.raises(ValueError):
        HttpDriver(client_procs=0)
