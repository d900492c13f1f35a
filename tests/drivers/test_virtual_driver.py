"""VirtualDriver: closed-loop clients in simulated time produce a complete, flagged WindowResult."""

from __future__ import annotations

import random

import pytest

from sweep.core.errors import LaunchError
from sweep.core.types import MediaItem, RequestSpec, ServerConfig
from sweep.drivers.virtual import VirtualDriver
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import Window


def specs(n: int = 50, seed: int = 0) -> list[RequestSpec]:
    rng = random.Random(seed)
    return [RequestSpec(index=i, input_ids=tuple(rng.randrange(3, 1000) for _ in range(rng.randint(100, 600))),
                        output_tokens=rng.randint(32, 200)) for i in range(n)]


def test_short_window_records_warmup_samples_and_counters() -> None:
    launcher = VirtualLauncher("H200", "llama3-8b")
    handle = launcher.start(ServerConfig(max_running_requests=32))
    assert handle.simulated and handle.url is None and handle.server_info["simulated"] is True
    sp = specs()
    window = Window(warmup_requests=20, warmup_seconds=0.0, measure_seconds=30.0, drain_seconds=30.0)
    res = VirtualDriver().run_window(handle, sp, 16, window)
    assert res.simulated and res.concurrency == 16
    assert res.window_end - res.window_start == pytest.approx(30.0)
    warm = [r for r in res.records if r.warmup]
    measured = [r for r in res.records if not r.warmup]
    assert len(warm) >= 20 and len(measured) > 50
    assert all(r.sent_at >= res.window_start and r.sent_at < res.window_end for r in measured)
    # the k-th dispatched request is specs[k % len(specs)]
    assert [r.index for r in res.records[:60]] == [i % len(sp) for i in range(60)]
    for r in measured:
        assert r.error is None and r.first_token_at is not None and r.finished_at is not None
        assert r.sent_at < r.first_token_at <= r.finished_at
        assert sum(r.chunk_tokens) == r.output_tokens == sp[r.index].output_tokens
        assert r.chunk_times[0] == r.first_token_at and r.chunk_times[-1] == r.finished_at
    names = {s.name for s in res.samples}
    assert {"num_running_reqs", "num_queue_reqs", "token_usage", "cache_hit_rate", "num_retracted_reqs"} <= names
    ts = sorted({s.t for s in res.samples})
    assert ts[1] - ts[0] == pytest.approx(1.0)
    assert {s.source for s in res.samples} == {"metrics", "gpu", "histogram"}
    # the window's TTFT histogram is stored with the run, as the HTTP driver stores the server's
    stored = [(float(s.labels[3:]), s.value) for s in res.samples if s.source == "histogram"]
    assert stored == [(le, c) for le, c in res.ttft_histogram]
    assert all("simulated=1" in s.labels for s in res.samples if s.source == "gpu")
    done = res.counters_end["num_requests_total"] - res.counters_start["num_requests_total"]
    assert done > 0 and res.counters_end["generation_tokens_total"] > res.counters_start["generation_tokens_total"]
    assert res.ttft_histogram[-1][0] == float("inf") and res.ttft_histogram[-1][1] > 0


def test_time_warmup_timeout_and_determinism() -> None:
    launcher = VirtualLauncher("L40S", "llama3-8b")
    cfg = ServerConfig(max_running_requests=8, mem_fraction_static=0.9)
    window = Window(warmup_requests=0, warmup_seconds=5.0, measure_seconds=20.0, drain_seconds=1.0,
                    request_timeout_s=15.0)
    a = VirtualDriver().run_window(launcher.start(cfg), specs(), 64, window)
    b = VirtualDriver().run_window(launcher.start(cfg), specs(), 64, window)
    assert [(r.sent_at, r.finished_at, r.error) for r in a.records] == [(r.sent_at, r.finished_at, r.error)
                                                                        for r in b.records]
    assert all(r.warmup == (r.sent_at < a.window_start) for r in a.records)
    assert a.window_start == pytest.approx(5.0)
    timeouts = [r for r in a.records if r.error_kind == "timeout"]
    assert timeouts, "64 users on an 8-slot L40S must overrun a 15 s request timeout"
    assert all(r.finished_at is None for r in timeouts)


def test_multimodal_specs_and_oom_launch() -> None:
    img = MediaItem(kind="image", data_urls=("data:image/png;base64,AAAA",), width=448, height=448)
    sp = [RequestSpec(index=i, input_ids=(5, 6, 7, i + 10), output_tokens=16, modality="image", media=(img,))
          for i in range(4)]
    handle = VirtualLauncher("H200", "qwen2.5-vl-7b").start(ServerConfig())
    res = VirtualDriver().run_window(handle, sp, 2, Window(warmup_requests=0, measure_seconds=5.0))
    assert res.records and all(r.prompt_tokens == 4 + 258 and r.modality == "image" for r in res.records)
    assert any(r.cached_tokens >= 256 for r in res.records)  # the same image hits the prefix cache
    with pytest.raises(LaunchError) as exc:
        VirtualLauncher("L40S", "llama3-70b").start(ServerConfig(mem_fraction_static=0.5))
    assert exc.value.reason == "oom"


def test_a_long_window_at_128_streams_completes_every_measured_request() -> None:
    """Five simulated minutes at 128 streams: thousands of requests, none lost (CPU cost: `make bench ARGS=virtual`)."""
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig())
    window = Window(warmup_requests=100, measure_seconds=300.0, drain_seconds=30.0)
    res = VirtualDriver().run_window(handle, specs(500, seed=3), 128, window)
    measured = [r for r in res.records if not r.warmup and res.window_start <= r.scheduled_at < res.window_end]
    assert len(measured) > 1500
    assert all(r.error is None and r.finished_at is not None for r in measured)
    assert res.window_end - res.window_start == 300.0


def test_a_warm_up_longer_than_the_request_timeout_is_sent_in_full() -> None:
    """warmup_requests is honoured however long it takes (issue 23 §11: 1,000,000 ran as 303)."""
    launcher = VirtualLauncher("H200", "llama3-8b")
    handle = launcher.start(ServerConfig(max_running_requests=8))
    window = Window(warmup_requests=400, warmup_seconds=0.0, measure_seconds=5.0, drain_seconds=5.0,
                    request_timeout_s=2.0)
    res = VirtualDriver().run_window(handle, specs(), 2, window)
    warm = [r for r in res.records if r.warmup]
    assert len(warm) >= 400
    assert res.window_start - min(r.sent_at for r in res.records) > window.request_timeout_s


def test_a_warm_up_whose_every_request_is_refused_still_ends() -> None:
    """Prompts longer than the context are refused at once and their users send nothing more: the window opens."""
    launcher = VirtualLauncher("H200", "llama3-8b")
    handle = launcher.start(ServerConfig(max_running_requests=8))
    huge = [RequestSpec(index=0, input_ids=tuple(range(3, 300_003)), output_tokens=8)]
    window = Window(warmup_requests=50, warmup_seconds=0.0, measure_seconds=2.0, drain_seconds=1.0)
    res = VirtualDriver().run_window(handle, huge, 2, window)
    assert res.records and all(r.error for r in res.records)
