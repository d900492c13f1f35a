"""Attach mode measures what the server does: a slow /health must not stall the client's event loop.

Issue 10 §1: on real SGLang, `--launcher attach` read every TTFT about one second high. The driver's
supervision loop called the launcher's alive() on the event loop every <= 50 ms, and attach's alive() made a
blocking GET /health on a new client each time (SGLang's /health runs a generation), so the loop that reads
the streams stalled. The fake server here has exact timings (TTFT 50 ms, ITL 10 ms) and a /health that takes
80 ms, as the outside check saw; 16 streams through AttachLauncher + HttpDriver must read the truth.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from sweep.analysis.measure import in_window, itl_gaps_ms, succeeded, ttft_ms
from sweep.analysis.measure_client import client_stats
from sweep.core.types import RequestSpec, ServerConfig, WindowResult
from sweep.drivers.http import HttpDriver
from sweep.drivers.probes import Clock, MetricsProbe, Probe
from sweep.launchers.attach import AttachLauncher
from sweep.launchers.base import ServerHandle
from sweep.profile import Window
from tests.simserver import Url, free_port

HERE = Path(__file__).resolve().parents[1]  # tests/: timed_server.py and fixtures/
TTFT_MS, ITL_MS, HEALTH_MS = 50.0, 10.0, 80.0


@contextlib.contextmanager
def timed_server(*extra: str, deadline_s: float = 20.0) -> Iterator[Url]:
    """Run tests/timed_server.py on a free port; yields its base URL once /model_info answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "timed_server.py"), "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            assert proc.poll() is None, "timed server exited during start-up"
            assert time.monotonic() < deadline, "timed server not up before the deadline"
            try:
                if httpx.get(url + "/model_info", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # polling interval of a condition with a deadline
        yield Url(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _specs(n: int = 400, out: int = 24) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(range(3, 35)), output_tokens=out) for i in range(n)]


def _truth_check(res: WindowResult) -> tuple[float, float]:
    recs = [r for r in res.records if in_window(r, res.window_start, res.window_end) and succeeded(r)]
    assert len(recs) >= 50, len(recs)
    ttft = float(np.median([ttft_ms(r) for r in recs]))
    itl = float(np.median([g for r in recs for g in itl_gaps_ms(r)]))
    return ttft, itl


def _stats(url: str) -> dict[str, int]:
    return dict(httpx.get(url + "/stats", timeout=5.0).json())


def test_attach_with_a_slow_health_reads_the_true_ttft_and_itl() -> None:
    with timed_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--health-ms", str(HEALTH_MS)) as url:
        attach = AttachLauncher(url)
        handle = attach.start(ServerConfig())
        before = _stats(url)
        driver = HttpDriver(alive=attach.alive)
        w = Window(warmup_requests=16, measure_seconds=3.0, drain_seconds=5.0, request_timeout_s=10.0)
        t0 = time.monotonic()
        res = driver.run_window(handle, _specs(), 16, w)
        elapsed = time.monotonic() - t0
        after = _stats(url)
        attach.stop(handle)
    assert res.aborted is None  # a slow /health is not a dead server
    # no generation-running /health during the window; liveness at about one check per second
    assert after["health_calls"] == before["health_calls"]
    assert 1 <= after["model_info_calls"] - before["model_info_calls"] <= elapsed / attach.check_interval_s + 2
    ttft, itl = _truth_check(res)
    assert TTFT_MS - 1.0 <= ttft <= TTFT_MS + 15.0, f"TTFT P50 {ttft:.1f} ms against a truth of {TTFT_MS} ms"
    assert ITL_MS - 2.0 <= itl <= ITL_MS + 2.0, f"ITL P50 {itl:.2f} ms against a truth of {ITL_MS} ms"
    lag_max = client_stats(res.client, res.window_start, res.window_end).loop_lag_max_ms
    assert lag_max is not None and lag_max < 60.0, lag_max  # 80 ms blocking calls left the loop stalled


def test_attach_declares_death_only_after_consecutive_failed_checks() -> None:
    with timed_server() as url:
        attach = AttachLauncher(url, check_interval_s=0.0, check_timeout_s=1.0, failures_to_die=3)
        handle = attach.start(ServerConfig())
        assert attach.alive(handle)
        url.proc.terminate()
        url.proc.wait(timeout=10)
        verdicts = [attach.alive(handle) for _ in range(4)]
    assert verdicts == [True, True, False, False]  # two refused connections are tolerated, the third is not


def test_attach_checks_at_most_once_per_interval() -> None:
    with timed_server() as url:
        attach = AttachLauncher(url, check_interval_s=30.0)
        handle = attach.start(ServerConfig())
        before = _stats(url)["model_info_calls"]
        assert all(attach.alive(handle) for _ in range(50))
        assert _stats(url)["model_info_calls"] - before == 1
        attach.stop(handle)


def test_a_blocking_alive_check_does_not_stall_the_streams() -> None:
    # any launcher's alive() may block (a process-tree walk, an HTTP check): the driver keeps it off the loop
    calls: list[float] = []

    def slow_alive(_: object) -> bool:
        calls.append(time.monotonic())
        time.sleep(0.2)
        return True

    with timed_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as url:
        handle = AttachLauncher(url).start(ServerConfig())
        w = Window(warmup_requests=8, measure_seconds=2.0, drain_seconds=5.0, request_timeout_s=10.0)
        res = HttpDriver(alive=slow_alive, alive_interval_s=0.0).run_window(handle, _specs(), 8, w)
    assert len(calls) >= 5 and res.aborted is None
    ttft, itl = _truth_check(res)
    assert ttft <= TTFT_MS + 15.0 and abs(itl - ITL_MS) <= 2.0, (ttft, itl)


if __name__ == "__main__":  # pragma: no cover - quick manual run
    sys.exit(pytest.main([__file__, "-q"]))


def test_parsing_a_real_metrics_scrape_does_not_stall_the_streams() -> None:
    # A real SGLang 0.5.17 /metrics (664 lines) took prometheus_client ~40-100 ms to parse, on the event loop
    # that reads the streams: at one scrape a second that is a loop-lag P99 of the same size every window.
    fixture = HERE / "fixtures" / "sglang-0.5.17-metrics.txt"
    with timed_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--metrics-file", str(fixture)) as url:
        handle = AttachLauncher(url).start(ServerConfig())

        def probes(h: ServerHandle, clock: Clock) -> list[Probe]:
            return [MetricsProbe(url, interval_s=0.25)]

        w = Window(warmup_requests=8, measure_seconds=3.0, drain_seconds=5.0, request_timeout_s=10.0)
        res = HttpDriver(probes=probes).run_window(handle, _specs(), 8, w)
    assert sum(1 for s in res.samples if s.name == "num_running_reqs") >= 8  # it did scrape and parse
    lag_p99 = client_stats(res.client, res.window_start, res.window_end).loop_lag_p99_ms
    assert lag_p99 is not None and lag_p99 < 20.0, lag_p99
    ttft, itl = _truth_check(res)
    assert ttft <= TTFT_MS + 15.0 and abs(itl - ITL_MS) <= 2.0, (ttft, itl)
