"""SGLang-compatible HTTP front (starlette) over the simulator Engine, stepped in wall-clock time."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from sglang_sim import openai_api
from sglang_sim.engine import Engine, SimRequest
from sglang_sim.media import count_items
from sglang_sim.metrics import exposition
from sglang_sim.stream import Stream
from sglang_sim.tokenizer import SimTokenizer, load

VERSION = "0.5.17-sim"
EXEMPT = ("/health", "/ready", "/metrics")  # srt/utils/auth.py: always reachable without a key


@dataclass
class Faults:
    crash_after_s: float | None = None
    crash_after_requests: int | None = None
    hang_after_s: float | None = None
    slow_start_s: float = 0.0
    malformed_sse_rate: float = 0.0
    http500_rate: float = 0.0
    slow_metrics_s: float = 0.0


class SimServer:
    """Holds the engine, the stream table and the lifecycle flags; builds the ASGI app."""

    def __init__(self, engine: Engine, info: dict[str, Any], model_name: str, faults: Faults,
                 log: Callable[[str], None], api_key: str | None = None, enable_metrics: bool = False,
                 stream_interval: int = 1, seed: int = 0, has_vision: bool = False,
                 tokenizer: SimTokenizer | None = None):
        self.engine, self.info, self.model_name, self.faults, self.log = engine, info, model_name, faults, log
        self.tokenizer = tokenizer or load(str(info.get("model_path") or ""))
        self.api_key, self.enable_metrics, self.stream_interval = api_key, enable_metrics, max(1, stream_interval)
        self.has_vision = has_vision
        self.rng = random.Random(seed)
        self.streams: dict[str, Stream] = {}
        self.ready = self.draining = self.hung = False
        self.received = 0
        self.wake = asyncio.Event()
        self.t0 = time.monotonic()
        self.crash: Callable[[str], None] = lambda msg: os._exit(1)

    # ---- engine loop -------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    async def run_engine(self) -> None:
        """Step the engine, sleep each step's simulated duration, then deliver its tokens."""
        eng = self.engine
        busy = False
        while True:
            if self.hung:
                await asyncio.Event().wait()  # a wedged scheduler: nothing moves again
            if not eng.has_work():
                eng.idle_until(self.now())  # refresh the gauges once on going idle
                self.wake.clear()
                await self.wake.wait()
                busy = False
                continue
            now = self.now()
            # lagging behind wall time: take bigger decode runs so Python catches up with the GPU model
            lag = now - eng.now
            steps = self.stream_interval if lag < 0.05 else max(self.stream_interval, 64)
            # A busy GPU starts its next forward when the last one ends, not when Python wakes up: sleep and
            # loop overshoot (~1 ms a step) would otherwise stretch every 5 ms step. Beyond 50 ms behind,
            # the simulated clock jumps to wall time rather than replaying a backlog.
            start = max(eng.now, now - 0.05) if busy else now
            res = eng.step(start, max_steps=steps)
            busy = True
            delay = res.end - self.now()
            await asyncio.sleep(delay if delay > 0 else 0)
            self.deliver()

    def deliver(self) -> None:
        eng, si = self.engine, self.stream_interval
        for st in self.streams.values():
            r = eng.reqs.get(st.rid)
            if r is None:
                continue
            n, done = eng.output_len(r), r.status in ("finished", "aborted")
            if done or (n > st.sent and (st.sent == 0 or n - st.sent >= si)):
                st.sent = n
                st.queue.put_nowait((n, done))

    # ---- request plumbing --------------------------------------------------------------------
    def _gate(self) -> Response | None:
        if self.draining or not self.ready:
            return JSONResponse({"error": {"message": "server is not ready or is shutting down", "code": 503}}, 503)
        self.received += 1
        lim = self.faults.crash_after_requests
        if lim is not None and self.received > lim:
            self.log(f"Scheduler hit an exception: simulated crash after {lim} requests (--sim-crash-after-requests)")
            self.crash("requests")
        if self.faults.http500_rate and self.rng.random() < self.faults.http500_rate:
            return JSONResponse({"error": {"message": "simulated internal server error", "type": "InternalServerError",
                                           "code": 500}}, 500)
        return None

    def submit(self, ids: list[int], max_new: int, media: dict[str, int], streaming: bool,
                rid: str | None) -> tuple[Stream, Any]:
        rid = rid or uuid.uuid4().hex
        st = Stream(rid, self.tokenizer, seed=zlib.crc32(rid.encode()))
        self.streams[rid] = st
        r = self.engine.submit(SimRequest(rid, tuple(ids), max_new, media, streaming=streaming,
                                          output_ids=st.output_ids), self.now())
        self.wake.set()
        if r.status in ("finished", "aborted"):
            st.queue.put_nowait((0, True))
        return st, r

    async def updates(self, st: Stream) -> AsyncIterator[tuple[int, bool]]:
        """Latest (tokens, done) per wake-up; coalesces a backlog into one update."""
        while True:
            n, done = await st.queue.get()
            while not st.queue.empty() and not done:
                n, done = st.queue.get_nowait()
            yield n, done
            if done:
                return

    async def whole_output(self, st: Stream, r: Any) -> None:
        """A non-streamed request: wait for its last update and take all of its output."""
        async for _n, _done in self.updates(st):
            pass
        st.grow(self.engine.output_len(r))

    def close(self, st: Stream, r: Any) -> None:
        if r.status not in ("finished", "aborted"):
            self.engine.abort(st.rid)  # the client went away: SGLang aborts the request
        self.streams.pop(st.rid, None)
        self.engine.forget(st.rid)

    def _meta(self, r: Any, st: Stream, done: bool, media: dict[str, int]) -> dict[str, Any]:
        meta: dict[str, Any] = {"id": st.rid, "finish_reason": r.finish_reason if done else None,
                                "prompt_tokens": r.prompt_len, "completion_tokens": len(st.ids),
                                "cached_tokens": r.cached_tokens, "num_retractions": r.num_retractions,
                                "reasoning_tokens": 0, "weight_version": "default"}
        for kind, n in media.items():
            meta[f"{kind}_tokens"] = n
        if done:
            meta["e2e_latency"] = (r.finished_at or self.engine.now) - r.arrival
        return meta

    def sse(self, obj: Any) -> str:
        if self.faults.malformed_sse_rate and self.rng.random() < self.faults.malformed_sse_rate:
            return 'data: {"text": "trunc\n\n'  # a cut-off JSON object, as a broken proxy would deliver
        return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"

    # ---- endpoints ---------------------------------------------------------------------------
    async def body(self, request: Request) -> dict[str, Any] | Response:
        """The request's JSON object, or the error response SGLang would give (bad JSON, not ready, faults)."""
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "invalid JSON body", "code": 400}}, 400)
        gate = self._gate()
        return gate if gate is not None else body

    async def generate(self, request: Request) -> Response:
        body = await self.body(request)
        if isinstance(body, Response):
            return body
        sp = body.get("sampling_params") or {}
        if "input_ids" in body and body["input_ids"] is not None:
            ids = [int(x) for x in body["input_ids"]]
        elif isinstance(body.get("text"), str):
            ids = self.tokenizer.encode(body["text"])
        else:
            return JSONResponse({"error": {"message": "exactly one of text or input_ids is required", "code": 400}}, 400)
        media: dict[str, int] = {}
        for kind in ("image", "video", "audio"):
            data = body.get(f"{kind}_data")
            if data:
                urls = data if isinstance(data, list) else [data]
                n, extra = count_items(kind, [str(u) for u in urls])
                media[kind] = n
                ids += extra
        st, r = self.submit(ids, int(sp.get("max_new_tokens", 128)), media, bool(body.get("stream")), body.get("rid"))
        if body.get("stream"):
            return StreamingResponse(self._gen_stream(st, r, media), media_type="text/event-stream")
        try:
            await self.whole_output(st, r)
            return JSONResponse({"text": st.text, "output_ids": st.ids, "meta_info": self._meta(r, st, True, media)})
        finally:
            self.close(st, r)

    async def _gen_stream(self, st: Stream, r: Any, media: dict[str, int]) -> AsyncIterator[str]:
        try:
            async for n, done in self.updates(st):
                st.grow(n)
                if done and r.status == "aborted" and not st.ids:
                    yield self.sse({"error": {"message": r.finish_reason.get("message", "aborted"),
                                               "type": "BadRequestError", "code": 400, "retryable": False}})
                else:
                    yield self.sse({"text": st.text, "output_ids": st.ids, "meta_info": self._meta(r, st, done, media)})
            yield "data: [DONE]\n\n"
        finally:
            self.close(st, r)

    async def chat(self, request: Request) -> Response:
        return await openai_api.chat(self, request)

    async def completions(self, request: Request) -> Response:
        return await openai_api.completions(self, request)

    async def health(self, request: Request) -> Response:
        if self.hung:  # health_generate never gets its token; SGLang answers 503 after 20 s
            try:
                await asyncio.wait_for(asyncio.Event().wait(), timeout=20.0)
            except TimeoutError:
                return Response(status_code=503)
        return Response(status_code=200 if self.ready and not self.draining else 503)

    async def server_info(self, request: Request) -> Response:
        info = dict(self.info)
        info["internal_states"] = [dict(self.engine.gauges)]
        return JSONResponse(info)

    async def model_info(self, request: Request) -> Response:
        return JSONResponse({"model_path": self.info.get("model_path"), "tokenizer_path": self.info.get("model_path"),
                             "served_model_name": self.model_name, "is_generation": True,
                             "has_image_understanding": self.has_vision, "weight_version": "default",
                             "simulated": True})

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                          "owned_by": "sglang-sim", "root": self.model_name}]})

    async def flush_cache(self, request: Request) -> Response:
        if self.streams or not self.engine.flush_cache():
            return PlainTextResponse("Cache not flushed. Please check if there are pending requests.", 400)
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. (When there are "
                                 "running or waiting requests, the operation will not be performed.)\n", 200)

    async def metrics(self, request: Request) -> Response:
        if not self.enable_metrics:
            return PlainTextResponse("Not Found", 404)
        if self.faults.slow_metrics_s:
            await asyncio.sleep(self.faults.slow_metrics_s)
        snap = self.engine.metrics()
        snap["pid"] = os.getpid()
        return PlainTextResponse(exposition(snap, self.model_name), media_type="text/plain; version=0.0.4")

    def app(self) -> Callable[..., Awaitable[None]]:
        routes = [Route("/generate", self.generate, methods=["POST"]),
                  Route("/v1/chat/completions", self.chat, methods=["POST"]),
                  Route("/v1/completions", self.completions, methods=["POST"]),
                  Route("/health", self.health), Route("/health_generate", self.health), Route("/ready", self.health),
                  Route("/server_info", self.server_info), Route("/get_server_info", self.server_info),
                  Route("/model_info", self.model_info), Route("/get_model_info", self.model_info),
                  Route("/v1/models", self.models),
                  Route("/flush_cache", self.flush_cache, methods=["GET", "POST"]),
                  Route("/metrics", self.metrics)]
        inner = Starlette(routes=routes)
        key = self.api_key

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if key and scope["type"] == "http" and not scope["path"].startswith(EXEMPT):
                auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
                if auth != f"Bearer {key}":
                    await JSONResponse({"error": "Unauthorized"}, 401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return app
