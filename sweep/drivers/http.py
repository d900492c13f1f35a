"""Closed-loop HTTP load generator: N users over real sockets, SSE streaming, warm-up, window, drain.

The driver only executes and records; it computes no statistics (that is sweep.measure).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil

from launchers.base import ServerHandle
from sweep.profile import Window
from sweep.types import RequestRecord, RequestSpec, Sample, WindowResult
from sweep.workload import chat_body, generate_body

Clock = Callable[[], float]


class _StreamError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class _WindowState:
    """Shared between the user coroutines of one window."""

    t0: float
    window: Window
    dispatched: int = 0
    window_start: float | None = None
    stop_dispatch: bool = False
    records: list[RequestRecord] = field(default_factory=list)
    dispatch_lags: list[float] = field(default_factory=list)
    warm: asyncio.Event = field(default_factory=asyncio.Event)


class HttpDriver:
    """Runs one ladder step against a server URL with `concurrency` closed-loop users."""

    simulated = False

    def __init__(self, api: str = "generate", model_name: str = "default", metrics_interval_s: float = 1.0,
                 think_time_s: float = 0.0, probes: Callable[[ServerHandle, Clock], list[Any]] | None = None,
                 alive: Callable[[ServerHandle], bool] | None = None, clock: Clock = time.perf_counter):
        self.api = api
        self.model_name = model_name
        self.metrics_interval_s = metrics_interval_s
        self.think_time_s = think_time_s
        self.probes = probes
        self.alive = alive
        self.clock = clock

    def run_window(self, handle: ServerHandle, specs: Sequence[RequestSpec], concurrency: int,
                   window: Window) -> WindowResult:
        """Warm up, measure one window, drain; returns every record and sample."""
        return asyncio.run(self._run(handle, specs, concurrency, window))

    async def _run(self, handle: ServerHandle, specs: Sequence[RequestSpec], concurrency: int,
                   window: Window) -> WindowResult:
        assert handle.url, "the HTTP driver needs a server URL"
        limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
        timeout = httpx.Timeout(window.request_timeout_s, connect=30.0)
        probes = self.probes(handle, self.clock) if self.probes else []
        from sweep.probes import MetricsProbe  # local: probes imports httpx-heavy bits lazily

        metrics = next((p for p in probes if isinstance(p, MetricsProbe)), None)
        async with httpx.AsyncClient(base_url=handle.url, headers=handle.headers(), limits=limits,
                                     timeout=timeout) as client:
            for p in probes:
                await p.start()
            state = _WindowState(t0=self.clock(), window=window)
            proc = psutil.Process()
            proc.cpu_percent(None)
            loop_lag: list[float] = []
            lag_task = asyncio.create_task(self._loop_lag(loop_lag))
            users = [asyncio.create_task(self._user(client, specs, concurrency, state)) for _ in range(concurrency)]
            aborted, start_snapshot = await self._supervise(handle, state, users, metrics)
            counters_start = dict(start_snapshot.counters) if start_snapshot is not None else {}
            window_end = (state.window_start or state.t0) + window.measure_seconds
            end_snapshot = await self._snapshot(metrics)
            await self._drain(users, window.drain_seconds)
            lag_task.cancel()
            for p in probes:
                await p.stop()
        cpu = proc.cpu_percent(None) / 100.0
        samples: list[Sample] = []
        for p in probes:
            samples.extend(getattr(p, "samples", []))
        lags = sorted(state.dispatch_lags) or [0.0]
        client = {
            "dispatch_lag_p99_ms": lags[min(len(lags) - 1, int(0.99 * len(lags)))] * 1000.0,
            "loop_lag_max_ms": max(loop_lag or [0.0]) * 1000.0,
            "cpu": cpu,
        }
        counters_end, ttft_hist = {}, []
        if end_snapshot is not None:
            counters_end = dict(end_snapshot.counters)
            ttft_hist = self._hist_delta(start_snapshot, end_snapshot)
        return WindowResult(
            concurrency=concurrency, records=state.records, samples=samples,
            window_start=state.window_start if state.window_start is not None else state.t0,
            window_end=window_end, warmup_requests=window.warmup_requests,
            warmup_seconds=window.warmup_seconds, counters_start=counters_start, counters_end=counters_end,
            ttft_histogram=ttft_hist, client=client, simulated=handle.simulated, aborted=aborted,
        )

    async def _supervise(self, handle: ServerHandle, state: _WindowState, users: list[asyncio.Task],
                         metrics: Any) -> tuple[str | None, Any]:
        """Wait for warm-up (then snapshot the server counters), then for the window; stop if the server dies."""
        window = state.window
        start_snapshot = None
        while True:
            if state.window_start is not None and self.clock() >= state.window_start + window.measure_seconds:
                break
            if all(u.done() for u in users):
                break
            if self.alive is not None and not self.alive(handle):
                state.stop_dispatch = True
                return "server died during the window", start_snapshot
            if start_snapshot is None and state.warm.is_set():
                start_snapshot = await self._snapshot(metrics) or False
            await asyncio.sleep(min(0.05, window.measure_seconds / 20))
        state.stop_dispatch = True
        return None, (start_snapshot or None)

    async def _snapshot(self, metrics: Any) -> Any:
        if metrics is None:
            return None
        try:
            return await metrics.scrape_once()
        except Exception:  # noqa: BLE001 - a failed final scrape leaves counters empty, measure copes
            return None

    @staticmethod
    def _hist_delta(start: Any, end: Any) -> list[tuple[float, float]]:
        from sweep.probes import histogram_delta

        if start is None:
            return []
        return histogram_delta(start, end, "time_to_first_token_seconds")

    async def _drain(self, users: list[asyncio.Task], grace: float) -> None:
        done, pending = await asyncio.wait(users, timeout=grace) if users else (set(), set())
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _loop_lag(self, out: list[float]) -> None:
        interval = 0.05
        while True:
            before = self.clock()
            await asyncio.sleep(interval)
            out.append(max(0.0, self.clock() - before - interval))

    def _mark_dispatch(self, state: _WindowState, now: float) -> bool:
        """Count one dispatch; returns True when this request belongs to the warm-up."""
        w = state.window
        idx = state.dispatched
        state.dispatched += 1
        if state.window_start is None:
            if idx >= w.warmup_requests and now - state.t0 >= w.warmup_seconds:
                state.window_start = now
                state.warm.set()
            else:
                return True
        return False

    async def _user(self, client: httpx.AsyncClient, specs: Sequence[RequestSpec], concurrency: int,
                    state: _WindowState) -> None:
        ready_at = self.clock()
        while not state.stop_dispatch:
            now = self.clock()
            if state.window_start is not None and now >= state.window_start + state.window.measure_seconds:
                return
            spec = specs[state.dispatched % len(specs)]
            warmup = self._mark_dispatch(state, now)
            state.dispatch_lags.append(max(0.0, now - ready_at))
            rec = RequestRecord(index=spec.index, concurrency=concurrency, scheduled_at=now, sent_at=now,
                                prompt_tokens=spec.prompt_tokens, modality=spec.modality, warmup=warmup)
            state.records.append(rec)
            try:
                await asyncio.wait_for(self._one(client, spec, rec), timeout=state.window.request_timeout_s)
            except TimeoutError:
                rec.error, rec.error_kind = "request timed out", "timeout"
            except asyncio.CancelledError:
                if rec.finished_at is None and rec.error is None:
                    rec.error, rec.error_kind = "still running when the drain grace ended", "drain_cutoff"
                raise
            if self.think_time_s:
                await asyncio.sleep(self.think_time_s)
            ready_at = self.clock()

    async def _one(self, client: httpx.AsyncClient, spec: RequestSpec, rec: RequestRecord) -> None:
        if self.api == "chat":
            path, body = "/v1/chat/completions", chat_body(spec, self.model_name, stream=True)
        else:
            path, body = "/generate", generate_body(spec, stream=True)
        try:
            async with client.stream("POST", path, json=body) as resp:
                if resp.status_code != 200:
                    text = (await resp.aread())[:200].decode(errors="replace")
                    rec.error, rec.error_kind = f"HTTP {resp.status_code}: {text}", "status"
                    return
                await self._consume(resp, rec, chat=self.api == "chat")
        except _StreamError as exc:
            rec.error, rec.error_kind = str(exc), exc.kind
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            rec.error, rec.error_kind = f"connection broke: {type(exc).__name__}", "disconnect"
        except httpx.ConnectError as exc:
            rec.error, rec.error_kind = f"cannot connect: {exc}", "connect"
        except httpx.TimeoutException:
            rec.error, rec.error_kind = "request timed out", "timeout"

    async def _consume(self, resp: httpx.Response, rec: RequestRecord, chat: bool) -> None:
        """Parse an SSE stream; httpx's line iterator already copes with arbitrary chunk boundaries."""
        seen = 0
        done = False
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            now = self.clock()
            try:
                event = json.loads(payload)
            except json.JSONDecodeError:
                raise _StreamError("malformed", f"malformed SSE event: {payload[:80]!r}") from None
            if not isinstance(event, dict):
                raise _StreamError("malformed", "SSE event is not a JSON object")
            if "error" in event:
                err = event["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                raise _StreamError("server_error", f"server error event: {msg}")
            total = self._tokens_so_far(event, seen, chat)
            if total > seen:
                if rec.first_token_at is None:
                    rec.first_token_at = now
                rec.chunk_times.append(now)
                rec.chunk_tokens.append(total - seen)
                seen = total
            self._meta(event, rec, chat)
        if not done:
            raise _StreamError("disconnect", "stream ended without [DONE]")
        rec.output_tokens = max(rec.output_tokens, seen)
        rec.finished_at = self.clock()

    @staticmethod
    def _tokens_so_far(event: dict[str, Any], seen: int, chat: bool) -> int:
        if chat:
            choices = event.get("choices") or []
            if choices and (choices[0].get("delta") or {}).get("content"):
                return seen + 1
            return seen
        meta = event.get("meta_info") or {}
        if "completion_tokens" in meta:
            return int(meta["completion_tokens"])
        return len(event.get("output_ids") or [])

    @staticmethod
    def _meta(event: dict[str, Any], rec: RequestRecord, chat: bool) -> None:
        if chat:
            usage = event.get("usage")
            if usage:
                rec.prompt_tokens = int(usage.get("prompt_tokens", rec.prompt_tokens))
                rec.output_tokens = int(usage.get("completion_tokens", rec.output_tokens))
                details = usage.get("prompt_tokens_details") or {}
                rec.cached_tokens = int(details.get("cached_tokens") or 0)
            return
        meta = event.get("meta_info") or {}
        if meta:
            rec.prompt_tokens = int(meta.get("prompt_tokens", rec.prompt_tokens))
            rec.cached_tokens = int(meta.get("cached_tokens", rec.cached_tokens) or 0)
            rec.num_retractions = int(meta.get("num_retractions", rec.num_retractions) or 0)
            fr = meta.get("finish_reason")
            if isinstance(fr, dict) and fr.get("type") == "abort":
                raise _StreamError("server_error", f"request aborted by the server: {fr.get('message', '')}")
