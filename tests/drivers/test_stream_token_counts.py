"""Tokens per streamed event: a server with --stream-interval k sends k tokens per event, and every API must count
them (chat used to count one per event, so its ITL read k times the truth). The cross-check's reference client
(sweep.drivers.reference) passes the same tests: a reference that counts worse than the client it judges raises
false DIFFERS (issue 23 §16: ITL 40 ms against a truth of 10 at stream interval 4)."""

from __future__ import annotations

import json
import statistics

import pytest

from sweep.analysis.measure import compute_stats
from sweep.core.types import RequestRecord, RequestSpec, ServerConfig
from sweep.drivers.h11_stream import _Tokens
from sweep.drivers.http import HttpDriver
from sweep.drivers.reference import H11Reference
from sweep.drivers.sse import SseSink
from sweep.launchers.base import ServerHandle
from sweep.profile import SLA, Window
from tests.simserver import sim_server


def _specs(n: int = 32) -> list[RequestSpec]:
    return [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 300 for j in range(64)), output_tokens=48)
            for i in range(n)]


def _chat_event(content: str, usage: dict[str, int] | None = None) -> bytes:
    ev: dict[str, object] = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    if usage is not None:
        ev["usage"] = usage
    return f"data: {json.dumps(ev)}\n\n".encode()


CLIENTS = ["sweep", "reference"]


def _feed(events: list[bytes], client: str = "sweep") -> RequestRecord:
    rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
    if client == "reference":  # the reference reads each `data:` line's JSON itself
        tokens = _Tokens(chat=True)
        for i, e in enumerate(events):
            tokens.event(json.loads(e.decode().removeprefix("data: ")), rec, float(i))
        tokens.finish(rec, 50.0)
        return rec
    sink = SseSink(rec, True, lambda: 99.0)
    for i, e in enumerate(events):
        sink.feed(e, float(i))
    sink.feed(b"data: [DONE]\n\n", 50.0)
    sink.end()
    return rec


@pytest.mark.parametrize("client", CLIENTS)
def test_chat_events_count_the_tokens_their_usage_says(client: str) -> None:
    """continuous usage stats: each content event carries the cumulative completion_tokens."""
    rec = _feed([_chat_event(" a", {"prompt_tokens": 5, "completion_tokens": 1}),
                 _chat_event(" b c d e", {"prompt_tokens": 5, "completion_tokens": 5}),
                 _chat_event(" f g", {"prompt_tokens": 5, "completion_tokens": 7})], client)
    assert rec.chunk_tokens == [1, 4, 2] and rec.output_tokens == 7


@pytest.mark.parametrize("client", CLIENTS)
def test_chat_events_without_usage_share_the_final_count_by_their_content(client: str) -> None:
    """No per-event usage: the final usage count is spread over the content events by their text length."""
    usage = f"data: {json.dumps({'choices': [], 'usage': {'prompt_tokens': 5, 'completion_tokens': 9}})}\n\n"
    rec = _feed([_chat_event(" a"), _chat_event(" b c d e"), _chat_event(" f g h i"), usage.encode()], client)
    assert rec.chunk_tokens == [1, 4, 4] and rec.output_tokens == 9


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("api", ["chat", "generate"])
def test_itl_matches_tpot_with_a_stream_interval(api: str, client: str) -> None:
    """Against the simulator with --stream-interval 4: ITL P50 is the per-token gap (close to TPOT P50), not 4x."""
    with sim_server("--stream-interval", "4") as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        w = Window(warmup_requests=4, measure_seconds=2.0, drain_seconds=10.0, request_timeout_s=30.0)
        driver = HttpDriver(api=api) if client == "sweep" else H11Reference(api=api)
        res = driver.run_window(h, _specs(), 4, w)
    ok = [r for r in res.records if r.error is None and r.finished_at is not None]
    assert ok and all(sum(r.chunk_tokens) == r.output_tokens == 48 for r in ok)
    # the server did group tokens 4 per event (a late reader may get two updates in one event, as from SGLang)
    assert statistics.median(k for r in ok for k in r.chunk_tokens[1:]) == 4
    s = compute_stats(res, SLA(ttft_ms=10_000, tpot_ms=10_000))
    assert s.itl_p50_ms == pytest.approx(s.tpot_p50_ms, rel=0.35), (s.itl_p50_ms, s.tpot_p50_ms)
