"""The independent reference client of `sweep crosscheck`: closed-loop streaming on a different HTTP stack.

sweep's load generator is asyncio protocols + httptools (sweep.drivers.h1) with its own SSE parser (sse.SseSink);
this client shares neither: asyncio streams (StreamReader/StreamWriter) carry the bytes, h11's state machine
frames the requests and parses the responses, and the SSE lines are split and read by its own code
(sweep.drivers.h11_stream). A sessions workload is replayed whole (sweep.drivers.reference_sessions). (httpx was the first
choice, but its async pool added 50-90 ms per request at 8 concurrent streams on a loaded 2-core host where a
plain h11 client added 11-21 ms, measured against the server's own e2e_latency: a reference must not bring its
own bias.) What it shares is what makes the two windows the same experiment: the request bodies
(sse.request_for), the closed-loop users (one keep-alive connection each), the warm-up rule and window bounds
(sweep.drivers.coord.Coord, sweep.profile.warmup: the window opens once warmup_requests requests completed,
warmup_seconds passed and every user had a request in flight, lasts measure_seconds, then drain_seconds of grace) and the definitions applied to the records afterwards (sweep.analysis.measure).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from sweep.core.errors import SweepError
from sweep.core.types import RequestRecord, SessionSpec, WindowResult
from sweep.drivers.coord import Coord
from sweep.drivers.h11_stream import Clock, Connection, stream_request, within_timeout
from sweep.drivers.http import run_loop
from sweep.drivers.reference_sessions import run_sessions
from sweep.drivers.sse import request_for
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, ClosedArrival, Window
from sweep.profile.warmup import WarmupRule
from sweep.workload.requests import RequestBody
from sweep.workload.sessions import Conversation, Reply, SessionStream
from sweep.workload.stream import Requests, spec_at

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
                await within_timeout(self.request(conn, *request_for(self.api, spec, self.model_name), rec), conn,
                                     rec, window.request_timeout_s)
                coord.done(0, self.clock())  # a completion of the warm-up's count
                if think:
                    await asyncio.sleep(think)
        finally:
            await conn.close()

    async def request(self, conn: Connection, path: str, body: RequestBody, rec: RequestRecord,
                      reply: Reply | None = None) -> None:
        """Send one streamed request and fill rec (and a session turn's reply); a failure is recorded, never raised."""
        await stream_request(conn, path, body, rec, self.clock, self.api == "chat", reply)
