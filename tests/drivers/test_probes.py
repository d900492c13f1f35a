"""Probes: /metrics parsing (real 0.5.17 scrape, 0.4.x aliases), scraping with one retry, GPU and process probes."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from sweep.analysis.measure import histogram_quantile
from sweep.analysis.server_metrics import SAMPLED, MetricsSnapshot, histogram_delta, only_names, parse_metrics
from sweep.drivers.probes import GpuProbe, MetricsProbe, ProcessProbe

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sglang-0.5.17-metrics.txt"


@pytest.fixture(scope="module")
def snap() -> MetricsSnapshot:
    return parse_metrics(FIXTURE.read_text())


def test_fixture_gauges_and_constants(snap: MetricsSnapshot) -> None:
    assert snap.get("num_running_reqs") == 0.0
    assert snap.get("num_queue_reqs") == 0.0
    assert snap.get("max_total_num_tokens") == 52278.0
    assert snap.get("context_len") == 32768.0
    assert snap.get("new_token_ratio") == pytest.approx(0.098)
    assert not any(name.startswith("sglang:") for name in snap.values)


def test_fixture_counters_keep_total_suffix_and_sum_label_sets(snap: MetricsSnapshot) -> None:
    assert snap.get("prompt_tokens_total") == 10.0 + 2722045.0  # is_streaming false + true
    assert snap.get("generation_tokens_total") == 8.0 + 411516.0
    assert snap.get("num_requests_total") == 1.0 + 2578.0
    assert snap.get("num_retracted_requests_total") == 2.0
    assert snap.get("cached_tokens_total") == 974100.0  # only cache_source="device" in this scrape
    assert snap.get("prompt_tokens") is None  # the parser's family name must not leak
    assert snap.counters["num_retracted_requests_total"] == 2.0


def test_fixture_histogram_buckets(snap: MetricsSnapshot) -> None:
    h = snap.histograms["time_to_first_token_seconds"]
    b = dict(h.buckets)
    assert b[0.1] == 689.0 and b[2.0] == 1.0 + 1528.0 and b[math.inf] == 2579.0
    assert h.count == 2579.0
    assert h.sum == pytest.approx(1.0998555950000082 + 15827.56176751601)
    assert [le for le, _ in h.buckets] == sorted(le for le, _ in h.buckets)
    # median rank 1289.5 lies in (0.6, 0.8]: 0.6 + 0.2 * (1289.5 - 1257) / (1328 - 1257)
    assert histogram_quantile(h.buckets, 0.5) == pytest.approx(0.6 + 0.2 * 32.5 / 71)


def test_cached_tokens_counts_total_source_only_when_present() -> None:
    head = "# TYPE sglang:cached_tokens_total counter\n"
    with_total = head + "".join(
        f'sglang:cached_tokens_total{{cache_source="{s}",model_name="m"}} {v}\n'
        for s, v in (("device", 100), ("host", 50), ("total", 150))
    )
    assert parse_metrics(with_total).get("cached_tokens_total") == 150.0
    without = head + "".join(
        f'sglang:cached_tokens_total{{cache_source="{s}",model_name="m"}} {v}\n'
        for s, v in (("device", 100), ("host", 50))
    )
    assert parse_metrics(without).get("cached_tokens_total") == 150.0


OLD_STYLE = """\
# TYPE sglang:num_waiting_reqs gauge
sglang:num_waiting_reqs{model_name="m"} 7
# TYPE sglang:gpu_cache_usage_percent gauge
sglang:gpu_cache_usage_percent{model_name="m"} 45
# TYPE sglang:prefix_cache_hit_rate gauge
sglang:prefix_cache_hit_rate{model_name="m"} 0.8
# TYPE sglang:total_retracted_reqs gauge
sglang:total_retracted_reqs{model_name="m"} 12
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3
sglang:num_running_reqs{model_name="m",tp_rank="1"} 4
"""


def test_aliases_resolve_older_names() -> None:
    s = parse_metrics(OLD_STYLE)
    assert s.get("num_queue_reqs") == 7.0
    assert s.get("token_usage") == pytest.approx(0.45)  # percent -> fraction
    assert s.get("cache_hit_rate") == pytest.approx(0.8)
    assert s.get("num_retracted_requests_total") == 12.0  # 0.4.x cumulative gauge
    assert s.get("num_running_reqs") == 7.0  # summed over label sets


def test_canonical_name_wins_over_alias() -> None:
    text = "sglang:num_queue_reqs 2\nsglang:num_waiting_reqs 9\n"
    assert parse_metrics(text).get("num_queue_reqs") == 2.0


def _hist_text(counts: list[int], total_sum: float) -> str:
    les = ["0.1", "1.0", "+Inf"]
    lines = ["# TYPE sglang:time_to_first_token_seconds histogram"]
    lines += [
        f'sglang:time_to_first_token_seconds_bucket{{le="{le}"}} {c}'
        for le, c in zip(les, counts, strict=True)
    ]
    lines += [
        f"sglang:time_to_first_token_seconds_sum {total_sum}",
        f"sglang:time_to_first_token_seconds_count {counts[-1]}",
    ]
    return "\n".join(lines) + "\n"


def test_histogram_delta_over_the_window() -> None:
    start, end = parse_metrics(_hist_text([5, 8, 10], 3.0)), parse_metrics(_hist_text([9, 20, 25], 9.0))
    assert histogram_delta(start, end, "time_to_first_token_seconds") == [
        (0.1, 4.0),
        (1.0, 12.0),
        (math.inf, 15.0),
    ]
    assert histogram_delta(None, end, "time_to_first_token_seconds") == [
        (0.1, 9.0),
        (1.0, 20.0),
        (math.inf, 25.0),
    ]
    assert histogram_delta(end, start, "time_to_first_token_seconds") == [
        (0.1, 5.0),
        (1.0, 8.0),
        (math.inf, 10.0),
    ]
    assert histogram_delta(start, end, "no_such_histogram") == []


def test_gpu_probe_is_a_no_op_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    def no_driver() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    probe = GpuProbe(interval_s=0.001)
    assert probe.read() == [] and probe.available is False and probe.unavailable_reason

    async def run() -> None:
        await probe.start()
        await asyncio.sleep(0.02)
        await probe.stop()

    asyncio.run(run())
    assert probe.samples == [] and probe.errors == 0


def test_gpu_probe_never_raises_on_this_machine() -> None:
    probe = GpuProbe()
    readings = probe.read()
    assert all(s.source == "gpu" for s in readings)
    asyncio.run(probe.close())


def test_gpu_probe_samples_memory_and_util_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=(h + 1) * 1024 * 2**20),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=50 + h),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    probe = GpuProbe(clock=lambda: 42.0)
    got = {(s.name, s.labels): s.value for s in probe.read()}
    assert got == {
        ("gpu_mem_used_mib", "gpu=0"): 1024.0,
        ("gpu_util", "gpu=0"): 50.0,
        ("gpu_mem_used_mib", "gpu=1"): 2048.0,
        ("gpu_util", "gpu=1"): 51.0,
    }


def test_process_probe_reads_rss_and_cpu_of_a_tree() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        probe = ProcessProbe(os.getpid(), clock=lambda: 1.0)
        first = {s.name: s for s in probe.read()}
        assert set(first) == {"rss_mib", "cpu_percent"}
        assert first["rss_mib"].value > 5 and first["rss_mib"].labels == f"pid={os.getpid()}"
        assert child.pid in probe._procs  # descendants are part of the tree
    finally:
        child.kill()
        child.wait()
    assert ProcessProbe(child.pid).read() == []  # gone: nothing, no exception


class _Server:
    """A tiny HTTP/1.1 server on 127.0.0.1 serving the fixture; can drop the first `drop` connections."""

    def __init__(self, body: bytes, drop: int = 0) -> None:
        self.hits = 0
        self.drop = drop
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                outer.hits += 1
                if outer.drop > 0:
                    outer.drop -= 1
                    self.close_connection = True  # hang up without a response, as a stale keep-alive does
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fixture_body() -> bytes:
    return FIXTURE.read_bytes()


async def _until(cond: Callable[[], bool], deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, "condition not met before the deadline"
        await asyncio.sleep(0.005)


def test_metrics_probe_scrapes_a_real_http_server(fixture_body: bytes) -> None:
    ticks = itertools.count(100)

    async def run(url: str) -> MetricsProbe:
        probe = MetricsProbe(
            types.SimpleNamespace(url=url + "/"), interval_s=0.01, clock=lambda: float(next(ticks))
        )
        snap = await probe.scrape_once()
        assert snap.get("max_total_num_tokens") == 52278.0 and snap.t == 100.0
        await probe.start()
        await _until(lambda: len({s.t for s in probe.samples}) >= 3)
        await probe.stop()
        return probe

    with _Server(fixture_body) as server:
        probe = asyncio.run(run(server.url))
    names = {s.name for s in probe.samples}
    assert {"num_running_reqs", "num_queue_reqs", "token_usage", "num_retracted_requests_total"} <= names
    assert all(s.source == "metrics" for s in probe.samples) and probe.errors == 0
    assert sorted({s.t for s in probe.samples})[:1] == [101.0]


def test_metrics_probe_retries_once_on_a_dropped_connection(fixture_body: bytes) -> None:
    async def run(url: str) -> MetricsSnapshot:
        probe = MetricsProbe(url)
        try:
            return await probe.scrape_once()
        finally:
            await probe.close()

    with _Server(fixture_body, drop=1) as server:
        snap = asyncio.run(run(server.url))
        assert server.hits == 2
    assert snap.get("num_retracted_requests_total") == 2.0


def test_metrics_probe_gives_up_after_one_retry(fixture_body: bytes) -> None:
    async def run(url: str) -> None:
        probe = MetricsProbe(url)
        try:
            await probe.scrape_once()
        finally:
            await probe.close()

    with _Server(fixture_body, drop=5) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            asyncio.run(run(server.url))
        assert server.hits == 2


def test_metrics_probe_loop_counts_errors_instead_of_dying() -> None:
    async def run() -> MetricsProbe:
        probe = MetricsProbe("http://127.0.0.1:9", interval_s=0.001)  # discard port: connection refused
        await probe.start()
        await _until(lambda: probe.errors >= 2)
        await probe.stop()
        return probe

    probe = asyncio.run(run())
    assert probe.samples == [] and probe.last_error and "Connect" in probe.last_error


def test_a_probe_parses_only_its_own_lines_and_reads_the_same_values() -> None:
    probe = MetricsProbe("http://127.0.0.1:9")
    for text in (FIXTURE.read_text(), OLD_STYLE):
        full, few = parse_metrics(text), parse_metrics(only_names(text, probe._lines))
        assert {n: few.get(n) for n in SAMPLED} == {n: full.get(n) for n in SAMPLED}
        assert not few.histograms  # the buckets, most of a real scrape, are skipped
