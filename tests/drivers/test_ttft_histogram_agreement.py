"""On one window, the client's TTFT percentiles agree with the server's TTFT histogram within a bucket."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from sweep.analysis.measure import histogram_quantile, in_window, succeeded, ttft_ms
from sweep.core.types import RequestSpec, ServerConfig
from sweep.drivers.http import HttpDriver
from sweep.drivers.probes import Clock, MetricsProbe, Probe
from sweep.launchers.base import ServerHandle
from sweep.profile import Window
from tests.simserver import sim_server


def _probes(handle: ServerHandle, clock: Clock) -> list[Probe]:
    return [MetricsProbe(handle.url or "", headers=handle.headers(), interval_s=1.0, clock=clock)]


def _bucket(buckets: list[tuple[float, float]], v: float) -> tuple[float, float]:
    """(lower, upper) bounds of the finite bucket holding v."""
    les = [le for le, _ in sorted(buckets) if np.isfinite(le)]
    i = bisect.bisect_left(les, v)
    return (les[i - 1] if i > 0 else 0.0), (les[i] if i < len(les) else float("inf"))


@pytest.mark.parametrize("procs", [1, 2])
def test_client_ttft_percentiles_match_server_histogram(procs: int) -> None:
    # long prompts on a slowed GPU put TTFT in the 0.1-2 s range, where SGLang's buckets are fine enough to test
    specs = [RequestSpec(index=i, input_ids=tuple(3 + (i * 31 + j) % 990 for j in range(1500 + 40 * (i % 20))),
                         output_tokens=4) for i in range(60)]
    with sim_server("--sim-speed", "3", "--disable-radix-cache") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=8, measure_seconds=6.0, drain_seconds=30.0, request_timeout_s=60.0)
        res = HttpDriver(probes=_probes, client_procs=procs).run_window(h, specs, 8, w)
    ok = [r for r in res.records if in_window(r, res.window_start, res.window_end) and succeeded(r)]
    client = np.array([ttft_ms(r) for r in ok]) / 1000.0
    assert len(client) >= 20 and res.ttft_histogram
    server_n = res.ttft_histogram[-1][1]
    assert abs(server_n - len(client)) <= 8 + 0.1 * len(client)  # same requests, up to the window's edges
    for q in (0.5, 0.9, 0.99):
        s = histogram_quantile(res.ttft_histogram, q)
        c = float(np.quantile(client, q))
        lo, hi = _bucket(res.ttft_histogram, s)
        # agreement = same bucket, give or take one neighbouring bucket at the edge (window boundaries differ)
        lo2, _ = _bucket(res.ttft_histogram, lo * 0.999) if lo > 0 else (0.0, 0.0)
        _, hi2 = _bucket(res.ttft_histogram, hi * 1.001)
        assert lo2 <= c <= hi2, f"q={q}: client {c:.3f}s vs histogram {s:.3f}s (bucket {lo}-{hi})"
        assert lo <= s <= hi
