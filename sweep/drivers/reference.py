"""The independent reference client of `sweep crosscheck`: closed-loop streaming on a different HTTP stack.

sweep's load generator is asyncio protocols + httptools (sweep.drivers.h1) with its own SSE parser (sse.SseSink);
this client shares neither: asyncio streams (StreamReader/StreamWriter) carry the bytes, h11's state machine
frames the requests and parses the responses, and the SSE lines are split and read here. (httpx was the first
choice, but its async pool added 50-90 ms per request at 8 concurrent streams on a loaded 2-core host where a
plain h11 client added 11-21 ms, measured against the server's own e2e_latency: a reference must not bring its
own bias.) What it shares is what makes the two windows the same experiment: the request bodies
(sse.request_for), the closed-loop users (one keep-alive connection each), the warm-up rule and window bounds
(sweep.drivers.coord.Coord, sweep.profile.warmup: the window opens once warmup_requests requests completed,
warmup_seconds passed and every user had a request in flight, lasts measure_seconds, then drain_seconds of grace) and the definitions applied to the records afterwards (sweep.analysis.measure).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import h11

from sweep.core.errors import SweepError
from sweep.core.types import CUT, RequestRecord, SessionSpec, WindowResult
from sweep.drivers.coord import Coord
from sweep.drivers.http import run_loop
from sweep.drivers.sse import SseEvent, request_for, share_by_length
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, ClosedArrival, Window
from sweep.profile.warmup import WarmupRule
from sweep.workload.requests import RequestBody
from sweep.workload.sessions import Conversation, Reply, SessionStream
from sweep.workload.stream import Requests, spec_at

Clock = Callable[[], float]
ConversationFactory = Callable[[SessionSpec], Conversation]
NAME = "reference-h11"


class H11Reference:
    """Runs one closed-loop window like HttpDriver does, over asyncio streams + h11; records, never computes."""

    name = NAME
    simulated = False

    def __init__(self, api: str = "generate", model_name: str = "default", url: str | None = None,
                 clock: Clock = time.perf_counter, conversation: ConversationFactory = Conversation):
        self.api = api
        self.model_name = model_name
        self.url = url  # None: the server handle's own URL
        self.clock = clock
        self.conversation = conversation  # what a session's turns send (the workload's own rule; tests break it)

    def run_window(self, handle: ServerHandle, specs: Requests, concurrency: int,
                   window: Window, arrival: ArrivalProcess | None = None) -> WindowResult:
        """Warm up, measure one window of `concurrency` closed-loop users, drain; every record kept."""
        if arrival is not None and arrival.open_loop:
            raise SweepError("the reference client runs closed-loop windows only (arrival.kind: closed)")
        think = arrival.think_time_s if isinstance(arrival, ClosedArrival) else 0.0
        base = (self.url or handle.url or "").rstrip("/")
        if not base:
            raise SweepError("the reference client needs a server URL")
        if isinstance(specs, SessionStream):
            from sweep.drivers.reference_sessions import run_sessions

            return run_loop(run_sessions(self, base, handle.headers(), specs, concurrency, window, think))
        return run_loop(self._run(base, handle.headers(), specs, concurrency, window, think))

    async def _run(self, base: str, headers: dict[str, str], specs: Requests, concurrency: int,
                   window: Window, think: float) -> WindowResult:
        coord = Coord(WarmupRule.closed(window, concurrency, concurrency, think))
        records: list[RequestRecord] = []
        t0 = self.clock()
        coord.begin(t0)
        users = [asyncio.create_task(self._user(Connection(base, headers), specs, concurrency, u, coord, t0, window,
                                                think, records)) for u in range(concurrency)]
        while not all(u.done() for u in users):
            ws = coord.poll(self.clock())
            if ws is not None and self.clock() >= ws + window.measure_seconds:
                break
            await asyncio.wait(users, timeout=0.05)
        ws = coord.window_start()
        end = (ws if ws is not None else self.clock()) + window.measure_seconds
        pending = {u for u in users if not u.done()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, end + window.drain_seconds - self.clock()))
        for u in pending:
            u.cancel()
        for res in await asyncio.gather(*users, return_exceptions=True):
            if isinstance(res, BaseException) and not isinstance(res, asyncio.CancelledError):
                raise res
        ws = coord.window_start()
        opened = coord.opened()
        if ws is None:
            ws = t0
        return WindowResult(concurrency=concurrency, records=sorted(records, key=lambda r: r.scheduled_at),
                            samples=[], window_start=ws, window_end=ws + window.measure_seconds,
                            warmup_requests=opened[1] if opened else 0, warmup_seconds=opened[2] if opened else 0.0,
                            window_opened_by=opened[0] if opened else None)

    async def _user(self, conn: Connection, specs: Requests, users: int, u: int, coord: Coord,
                    t0: float, window: Window, think: float, out: list[RequestRecord]) -> None:
        """One closed-loop user: request j of user u is request number j * users + u, as in sweep's own driver."""
        j = 0
        try:
            while True:
                now = self.clock()
                ws = coord.window_start()
                if ws is not None and now >= ws + window.measure_seconds:
                    return
                spec = spec_at(specs, j * users + u)
                j += 1
                rec = RequestRecord(index=spec.index, concurrency=users, scheduled_at=now, sent_at=now,
                                    prompt_tokens=spec.prompt_tokens, modality=spec.modality,
                                    warmup=coord.claim(now))
                out.append(rec)
                coord.sent(0, now)
                try:
                    async with asyncio.timeout(window.request_timeout_s):
                        await self.request(conn, *request_for(self.api, spec, self.model_name), rec)
                except TimeoutError:
                    rec.error, rec.error_kind = "request timed out", "timeout"
                    await conn.close()
                except asyncio.CancelledError:
                    if rec.finished_at is None and rec.error is None:
                        rec.error, rec.error_kind = "still running when the drain grace ended", CUT
                    raise
                coord.done(0, self.clock())  # a completion of the warm-up's count
                if think:
                    await asyncio.sleep(think)
        finally:
            await conn.close()

    async def request(self, conn: Connection, path: str, body: RequestBody, rec: RequestRecord,
                      reply: Reply | None = None) -> None:
        """Send one streamed request and fill rec (and a session turn's reply: its text and output ids, which the
        next turn sends); a failed request is recorded (rec.error), never raised."""
        tokens = _Tokens(self.api == "chat", reply)
        buf = b""
        try:
            status = await conn.send(path, json.dumps(body).encode())
            if status != 200:
                rec.error, rec.error_kind = f"HTTP {status}", "status"
                async for _ in conn.body():
                    pass
                return
            async for data in conn.body():
                now = self.clock()
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        tokens.finish(rec, now)
                        continue
                    tokens.event(json.loads(payload), rec, now)
        except (OSError, h11.ProtocolError, EOFError) as exc:
            rec.error, rec.error_kind = f"{type(exc).__name__}: {exc}", "disconnect"
            await conn.close()
            return
        except (ValueError, _ServerError) as exc:
            rec.error, rec.error_kind = str(exc), "server_error" if isinstance(exc, _ServerError) else "malformed"
            await conn.close()
            return
        if rec.finished_at is None and rec.error is None:
            rec.error, rec.error_kind = "stream ended without [DONE]", "disconnect"


class _Tokens:
    """One stream's token count, by the rule sweep's own client follows (sweep.drivers.sse.SseSink's docstring).

    /generate: each event's cumulative meta_info.completion_tokens (else its output_ids). Chat: a content event's
    cumulative usage.completion_tokens when the server sends continuous usage stats (request_for asks for them);
    without it an event may still hold several tokens (--stream-interval), so such events count one each until
    [DONE], and then the final usage count is shared out over them by their text length (share_by_length).
    Counting one token per chat event read ITL 4x the truth at stream interval 4 (issue 23 §16)."""

    def __init__(self, chat: bool, reply: Reply | None = None):
        self.chat = chat
        self.reply = reply
        self.seen = 0
        self.chars: list[int] | None = [] if chat else None  # content length per counted event, no usage seen

    def event(self, event: SseEvent, rec: RequestRecord, now: float) -> None:
        """Apply one event to rec: its tokens, its usage/meta figures; an error event or an abort raises."""
        if not isinstance(event, dict):
            raise ValueError("SSE event is not a JSON object")
        if "error" in event:
            raise _ServerError(f"server error event: {event['error']}")
        total = self.seen
        if self.chat:
            choices = event.get("choices") or []
            content = (choices[0].get("delta") or {}).get("content") if choices else None
            usage = event.get("usage") or {}
            if content and self.reply is not None:
                self.reply.text += content
            if content:
                if "completion_tokens" in usage:
                    self.chars = None  # exact counts from here on
                    total = max(self.seen, int(usage["completion_tokens"]))
                else:
                    total = self.seen + 1
                    if self.chars is not None:
                        self.chars.append(len(content))
            if usage:
                rec.prompt_tokens = int(usage.get("prompt_tokens", rec.prompt_tokens))
                rec.output_tokens = int(usage.get("completion_tokens", rec.output_tokens))
                rec.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        else:
            meta = event.get("meta_info") or {}
            total = int(meta.get("completion_tokens", len(event.get("output_ids") or [])))
            rec.prompt_tokens = int(meta.get("prompt_tokens", rec.prompt_tokens))
            rec.cached_tokens = int(meta.get("cached_tokens", rec.cached_tokens) or 0)
            if self.reply is not None:
                _keep(event, self.reply)
            fr = meta.get("finish_reason")
            if isinstance(fr, dict) and fr.get("type") == "abort":
                raise _ServerError(f"request aborted by the server: {fr.get('message', '')}")
        if total > self.seen:
            if rec.first_token_at is None:
                rec.first_token_at = now
            rec.chunk_times.append(now)
            rec.chunk_tokens.append(total - self.seen)
            self.seen = total

    def finish(self, rec: RequestRecord, now: float) -> None:
        """[DONE]: chat events counted one each get the final usage count shared out by their text length."""
        if self.chars and rec.output_tokens > sum(rec.chunk_tokens):
            rec.chunk_tokens = share_by_length(rec.output_tokens, self.chars)
        rec.output_tokens = max(rec.output_tokens, self.seen)
        rec.finished_at = now


def _keep(event: SseEvent, reply: Reply) -> None:
    """Grow a /generate reply by one event: output_ids and text, cumulative (SGLang's default) or incremental
    (--incremental-streaming-output), told apart by whether the new ones start with what was kept."""
    ids, text = event.get("output_ids"), event.get("text")
    if isinstance(ids, list) and ids:
        new = [int(i) for i in ids]
        reply.ids = new if new[:len(reply.ids)] == reply.ids and len(new) >= len(reply.ids) else reply.ids + new
    if isinstance(text, str) and text:
        reply.text = text if text.startswith(reply.text) else reply.text + text


class _ServerError(Exception):
    """An error event or an abort in the stream."""


class Connection:
    """One keep-alive HTTP/1.1 connection driven by h11: connects on first use and again after a close."""

    def __init__(self, base: str, headers: dict[str, str]):
        parts = urlsplit(base)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.headers = [("Host", parts.netloc), ("Content-Type", "application/json"), ("Accept", "text/event-stream"),
                        *headers.items()]
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.h11 = h11.Connection(h11.CLIENT)

    async def send(self, path: str, body: bytes) -> int:
        """POST body (headers and body in one write) and return the response status."""
        if self.writer is None or self.h11.our_state is not h11.IDLE:
            await self.close()
            ctx = ssl.create_default_context() if self.tls else None
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, ssl=ctx)
            self.h11 = h11.Connection(h11.CLIENT)
        head = h11.Request(method="POST", target=self.prefix + path,
                           headers=[*self.headers, ("Content-Length", str(len(body)))])
        assert self.writer is not None
        self.writer.write(self.h11.send(head) + (self.h11.send(h11.Data(data=body)) or b"")
                          + (self.h11.send(h11.EndOfMessage()) or b""))
        await self.writer.drain()
        while True:
            event = await self._next()
            if isinstance(event, h11.Response):
                return int(event.status_code)

    async def body(self) -> AsyncIterator[bytes]:
        """The response body's chunks as they arrive; afterwards the connection is ready for the next request."""
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
                    self.h11.start_next_cycle()
                return

    async def _next(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        assert self.reader is not None
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.reader.read(65536)
                if not data:
                    raise EOFError("the server closed the connection")
                self.h11.receive_data(data)
                continue
            return event

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await self.writer.wait_closed()
        self.reader = self.writer = None
