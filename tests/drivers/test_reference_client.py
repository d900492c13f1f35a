"""The h11 reference client against the simulated server: streams recorded like sweep's own, failures recorded."""

from __future__ import annotations

from sweep.analysis.measure import in_window, succeeded
from sweep.core.types import RequestSpec, ServerConfig
from sweep.drivers.reference import H11Reference
from sweep.launchers.base import ServerHandle
from sweep.profile import Window
from tests.simserver import sim_server

SPECS = [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(64)), output_tokens=8 + i % 5,
                     text=" ".join(f"t{3 + j:03d}" for j in range(64))) for i in range(200)]
WINDOW = Window(warmup_requests=4, measure_seconds=1.5, drain_seconds=10.0, request_timeout_s=20.0)


def test_reference_streams_both_apis_with_the_servers_token_counts() -> None:
    with sim_server("--api-key", "k3y") as url:
        handle = ServerHandle(config=ServerConfig(), url=url, api_key="k3y", simulated=True)
        for api in ("generate", "chat"):
            res = H11Reference(api=api).run_window(handle, SPECS, 4, WINDOW)
            ok = [r for r in res.records if in_window(r, res.window_start, res.window_end) and succeeded(r)]
            assert len(ok) >= 8, api
            for r in ok:
                spec = SPECS[[s.index for s in SPECS].index(r.index)]
                assert r.output_tokens == spec.output_tokens, api
                assert sum(r.chunk_tokens) == spec.output_tokens, api
                assert r.first_token_at is not None and r.finished_at is not None
                assert r.scheduled_at < r.first_token_at <= r.finished_at
            assert sum(r.warmup for r in res.records) >= 4  # the same warm-up rule as sweep's driver


def test_refused_requests_are_recorded_not_raised() -> None:
    with sim_server("--api-key", "k3y") as url:
        handle = ServerHandle(config=ServerConfig(), url=url, simulated=True)  # no key: every request refused
        res = H11Reference().run_window(handle, SPECS, 2, WINDOW.model_copy(update={"measure_seconds": 0.5}))
    assert res.records and all(r.error_kind == "status" and r.error == "HTTP 401" for r in res.records)
