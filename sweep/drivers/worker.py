"""The client side of one window in one process: closed-loop users or an open-loop dispatcher, plus self-check.

A worker runs in the driver's own event loop (client_procs=1) or in a spawned process (client_procs>1);
the Coord object (sweep.drivers.coord) is what the workers of one window share. A sessions workload
(workload.sessions) runs each user's conversations turn by turn (run_session).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

import numpy as np

from sweep.core.types import CUT, UNSENT, RequestRecord, RequestSpec, SessionSpec
from sweep.drivers.coord import Coord
from sweep.drivers.h1 import Pool
from sweep.drivers.handover import BATCH_S, Emit, Outbox
from sweep.drivers.pace import sleep_until, tick
from sweep.drivers.sse import Clock, SseSink, StreamError, request_for
from sweep.engines import Paths, default
from sweep.profile import Window
from sweep.workload.requests import estimated_prompt_tokens
from sweep.workload.sessions import Conversation, Reply, SessionStream
from sweep.workload.stream import Requests, StreamExhausted, spec_at


@dataclass
class Plan:
    """What one worker does in one window (picklable: sent to spawned processes)."""

    url: str
    headers: dict[str, str]
    api: str
    model_name: str
    specs: Requests  # a stream view (the study) or a list that cycles (tests, benches)
    window: Window
    concurrency: int  # the step label written into every record
    users: int = 0  # closed loop: this worker's users
    think_time_s: float = 0.0
    shard: int = 0
    n_shards: int = 1
    offsets: np.ndarray | None = None  # open loop: this worker's scheduled send offsets from t0
    numbers: np.ndarray | None = None  # open loop: the global request number of each offset
    max_in_flight: int = 1 << 30
    paths: Paths = field(default_factory=lambda: default().paths)  # the server engine's paths (request_for)
    batch: int = 0  # streamed (issue 23 §2): ended requests leave in batches of this many (0: all at the end)
    batch_s: float = BATCH_S  # ... or every this many seconds; only those not sent on come back in WorkerResult


@dataclass
class WorkerResult:
    """A worker's records and self-check readings (sent back to the parent pickled)."""

    records: list[RequestRecord]  # a streamed window: only those not sent on in a batch
    dispatch_lags: np.ndarray  # seconds, measured-window dispatches only
    cap_waits: np.ndarray  # open loop: seconds a request waited for an in-flight slot (window only)
    ticks: np.ndarray  # rows (t, loop lag s, process cpu s)
    max_in_flight_seen: int = 0
    error: str | None = None
    exhausted: str | None = None  # the request stream ran out (a dataset without replay): why


@dataclass
class _State:
    records: list[RequestRecord] = field(default_factory=list)
    sent: int = 0  # closed loop: dispatches by this worker (its k-th takes stream request k * n_shards + shard)
    exhausted: str | None = None
    lags: list[tuple[float, float]] = field(default_factory=list)  # (scheduled, lag)
    waits: list[tuple[float, float]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    out: Outbox | None = None  # a streamed window: batches of ended requests leave through it (Plan.batch)

    def end(self, rec: RequestRecord, now: float) -> None:
        """A request ended (finished, failed, cut, or never sent): a streamed window sends a batch on when due."""
        if self.out is not None:
            self.records = self.out.end(rec, now, self.records)


async def run_worker(plan: Plan, coord: Coord, t0: float, clock: Clock = time.perf_counter,
                     emit: Emit | None = None) -> WorkerResult:
    """Run this worker's share of the window from t0 until the window ends and the drain grace passes. emit (with
    plan.batch > 0): ended requests go to it in batches (a session's once it ended), the result keeps the rest."""
    w = plan.window
    st = _State()
    if emit is not None and plan.batch > 0:
        st.out = Outbox(emit, plan.batch, plan.batch_s)
    ticks: list[tuple[float, float, float]] = []
    client = Pool(plan.url, plan.headers, clock)
    try:
        ticker = asyncio.create_task(tick(ticks, clock))
        await sleep_until(t0, clock)
        tasks: set[asyncio.Task[None]] = set()
        if plan.offsets is None:
            user = _session_user if isinstance(plan.specs, SessionStream) else _user
            users = [asyncio.create_task(user(client, plan, coord, t0, st, u, clock)) for u in range(plan.users)]
            tasks.update(users)
            await _until_window_end(coord, w, users, clock)
        else:
            await _open_loop(client, plan, coord, t0, st, tasks, clock)
        coord_ws = coord.window_start()
        end = (coord_ws if coord_ws is not None else clock()) + w.measure_seconds
        # a window decided early (Coord.end_early) cuts what still runs at once: its verdict needs no drain
        remaining = 0.0 if coord.early_end() is not None else end + w.drain_seconds - clock()
        pending = {t for t in tasks if not t.done()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, remaining))
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        ticker.cancel()
    finally:
        client.close()
    ws = coord.window_start()
    lo, hi = (ws, ws + w.measure_seconds) if ws is not None else (math.inf, math.inf)
    return WorkerResult(
        records=st.records,
        dispatch_lags=np.array([lag for s, lag in st.lags if lo <= s < hi], dtype=float),
        cap_waits=np.array([wt for s, wt in st.waits if lo <= s < hi], dtype=float),
        ticks=np.array(ticks, dtype=float).reshape(-1, 3), max_in_flight_seen=st.peak, exhausted=st.exhausted)


async def _until_window_end(coord: Coord, w: Window, users: list[asyncio.Task[None]], clock: Clock) -> None:
    while not coord.stopped() and not all(u.done() for u in users):
        ws = coord.poll(clock())
        if ws is not None and clock() >= ws + w.measure_seconds:
            return
        await asyncio.sleep(0.01 if ws is None else max(0.001, min(0.05, ws + w.measure_seconds - clock())))


class _WatchedSink(SseSink):
    """SseSink that tells the Coord each time response bytes arrive (the hang watch's evidence of progress), and its
    running board the request's first token (the early-stop test's view of it, sweep.drivers.running)."""

    __slots__ = ("coord", "shard", "slot")

    def __init__(self, rec: RequestRecord, chat: bool, clock: Clock, coord: Coord, shard: int,
                 reply: Reply | None = None):
        super().__init__(rec, chat, clock, reply)
        self.coord, self.shard = coord, shard
        self.slot: int | None = None  # its slot on coord.board while it runs (None: untracked)

    def feed(self, chunk: bytes, now: float) -> None:
        self.coord.progress(self.shard, now)
        board = self.coord.board
        if self.slot is None or board is None or self.rec.first_token_at is not None:
            super().feed(chunk, now)
            return
        board.hold(self.shard, self.slot)  # a reader leaves it out while a first token timed at `now` may come
        try:
            super().feed(chunk, now)
        finally:
            board.release(self.shard, self.slot, self.rec.first_token_at)


async def _request(client: Pool, plan: Plan, spec: RequestSpec, rec: RequestRecord, clock: Clock,
                   coord: Coord | None = None, turn: tuple[Conversation, Reply] | None = None) -> None:
    """Send one streamed request and fill rec; a failed request is recorded (rec.error), never raised.

    turn: a session's sub-request (spec is its new message): the conversation so far is sent before it and the
    server's reply is kept for the next turn."""
    chat = plan.api == "chat"
    reply = None
    if turn is None:
        path, body = request_for(plan.api, spec, plan.model_name, plan.paths)
    else:
        conv, reply = turn
        path, body = plan.paths.request(plan.api), conv.body(plan.api, spec, plan.model_name)
    sink = SseSink(rec, chat, clock, reply) if coord is None else _WatchedSink(rec, chat, clock, coord, plan.shard,
                                                                                reply)
    if coord is not None:
        coord.sent(plan.shard, clock())
        if coord.board is not None and isinstance(sink, _WatchedSink):
            sink.slot = coord.board.start(plan.shard, rec)
    try:
        async with asyncio.timeout(plan.window.request_timeout_s):
            await client.stream(path, body, sink)
    except StreamError as exc:
        rec.error, rec.error_kind = str(exc), exc.kind
    except TimeoutError:
        if rec.finished_at is None:  # [DONE] came but the response never ended: the request itself is complete
            rec.error, rec.error_kind = "request timed out", "timeout"
    except asyncio.CancelledError:
        if rec.finished_at is None and rec.error is None:
            early = coord is not None and coord.early_end() is not None
            rec.error = f"still running when the {'window stopped early' if early else 'drain grace ended'}"
            rec.error_kind = CUT
        raise
    finally:
        if coord is not None:
            if coord.board is not None and isinstance(sink, _WatchedSink) and sink.slot is not None:
                coord.board.end(plan.shard, sink.slot)  # before its record is handed on as ended
            coord.done(plan.shard, clock())


async def _user(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State, u: int,
                clock: Clock) -> None:
    """One closed-loop user: send, wait for the whole response, think, repeat until the window ends."""
    w = plan.window
    ready_at = clock()
    while not coord.stopped():
        now = clock()
        ws = coord.window_start()
        if ws is not None and now >= ws + w.measure_seconds:
            return
        # The worker's users share one counter: the window sends the stream in order (disjoint per shard), so a
        # finite dataset is used up only when the window really needed every entry.
        k = st.sent * plan.n_shards + plan.shard
        st.sent += 1
        try:
            spec = spec_at(plan.specs, k)
        except StreamExhausted as exc:
            st.exhausted = str(exc)
            coord.stop()
            return
        warm = coord.claim(now)
        st.lags.append((now, max(0.0, now - ready_at)))
        rec = RequestRecord(index=spec.index, concurrency=plan.concurrency, scheduled_at=now, sent_at=now,
                            prompt_tokens=spec.prompt_tokens, modality=spec.modality, warmup=warm,
                            sent_prompt_tokens=estimated_prompt_tokens(spec),
                            sent_output_tokens=spec.output_tokens)
        st.records.append(rec)
        try:
            await _request(client, plan, spec, rec, clock, coord)
        finally:
            st.end(rec, clock())
        if plan.think_time_s:
            await asyncio.sleep(plan.think_time_s)
        ready_at = clock()


async def _session_user(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State, u: int,
                        clock: Clock) -> None:
    """One closed-loop user of a sessions workload: run a session turn by turn, then the next, until the window
    ends (a session cut by the window's end is left unfinished: its records say so by session_turns None)."""
    w = plan.window
    while not coord.stopped():
        ws = coord.window_start()
        if ws is not None and clock() >= ws + w.measure_seconds:
            return
        k = st.sent * plan.n_shards + plan.shard
        st.sent += 1
        session = _session_at(plan, st, coord, k)
        if session is None or not await run_session(client, plan, coord, t0, st, session, clock, clock()):
            return


def _session_at(plan: Plan, st: _State, coord: Coord, k: int) -> SessionSpec | None:
    """Session k of the window's stream; None (the window stopped, st.exhausted says why) past a dataset's end."""
    assert isinstance(plan.specs, SessionStream)
    try:
        return plan.specs.at(k)
    except StreamExhausted as exc:
        st.exhausted = str(exc)
        coord.stop()
        return None


async def run_session(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State, session: SessionSpec,
                      clock: Clock, scheduled: float, warmup: bool | None = None) -> bool:
    """Send a session's turns in order (each turn's sub-requests in parallel); False when the window ended or the
    driver stopped before it was done. A failed request ends the session (the conversation cannot go on).
    warmup None: each request is claimed against the warm-up (closed loop); else every request gets that label. A
    streamed window sends the session's requests on when it ends (its end labels them: session_turns)."""
    sent: list[RequestRecord] = []
    try:
        return await _turns(client, plan, coord, t0, st, session, clock, scheduled, warmup, sent)
    finally:
        for r in sent:
            st.end(r, clock())


async def _turns(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State, session: SessionSpec,
                 clock: Clock, scheduled: float, warmup: bool | None, sent: list[RequestRecord]) -> bool:
    w = plan.window
    conv = Conversation(session)
    ready_at = scheduled
    for t, turn in enumerate(session.turns):
        if t and turn.think_s:
            await asyncio.sleep(turn.think_s)
        if t:
            ready_at = clock()
        now = clock()
        ws = coord.window_start()
        if coord.stopped() or (ws is not None and now >= ws + w.measure_seconds):
            return False
        if not conv.fits(turn):
            break
        warm = coord.claim(now) if warmup is None else warmup
        st.lags.append((now if t or warmup is None else scheduled, max(0.0, now - ready_at)))
        replies = [Reply() for _ in turn.branches]
        recs = []
        for j, msg in enumerate(turn.branches):
            whole = conv.prompt(msg)
            recs.append(RequestRecord(
                index=session.index, concurrency=plan.concurrency, scheduled_at=now if t else scheduled, sent_at=now,
                prompt_tokens=whole.prompt_tokens, modality=whole.modality, warmup=warm,
                sent_prompt_tokens=estimated_prompt_tokens(whole), sent_output_tokens=msg.output_tokens,
                turn=t + 1, branch=j, context_tokens=conv.tokens))
        st.records.extend(recs)
        sent.extend(recs)
        await asyncio.gather(*(_request(client, plan, msg, rec, clock, coord, (conv, reply))
                               for msg, rec, reply in zip(turn.branches, recs, replies, strict=True)))
        if any(rec.error is not None for rec in recs):
            return True
        conv.add(list(zip(turn.branches, replies, strict=True)))
    turns = max((r.turn or 0 for r in sent), default=0)
    for r in sent:
        r.session_turns = turns
    return True


async def _open_loop(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State,
                     tasks: set[asyncio.Task[None]], clock: Clock) -> None:
    """Dispatch at the scheduled times until the window ends (known once it opened: sweep.profile.warmup); one
    scheduled before the window's start is warm-up; a request over the in-flight cap waits, its scheduled time still
    counts."""
    assert plan.offsets is not None and plan.numbers is not None
    w = plan.window
    slots = asyncio.Semaphore(plan.max_in_flight)
    for off, k in zip(plan.offsets.tolist(), plan.numbers.tolist(), strict=True):
        sched = t0 + off
        if coord.stopped() or sched >= coord.latest_end(w.measure_seconds):
            break
        await sleep_until(sched, clock)
        end = coord.latest_end(w.measure_seconds)  # the window's end, or the latest it can be while it has not opened
        if sched >= end:
            break
        drain_end = end + w.drain_seconds
        if isinstance(plan.specs, SessionStream):
            if not await _open_session(client, plan, coord, t0, st, tasks, clock, sched, int(k), slots, drain_end):
                break
            continue
        try:
            spec = spec_at(plan.specs, int(k))
        except StreamExhausted as exc:
            st.exhausted = str(exc)
            coord.stop()
            break
        rec = RequestRecord(index=spec.index, concurrency=plan.concurrency, scheduled_at=sched, sent_at=sched,
                            prompt_tokens=spec.prompt_tokens, modality=spec.modality, warmup=coord.claim(sched),
                            sent_prompt_tokens=estimated_prompt_tokens(spec),
                            sent_output_tokens=spec.output_tokens)
        st.records.append(rec)
        eligible = sched
        if slots.locked():
            try:
                await asyncio.wait_for(slots.acquire(), timeout=max(0.0, drain_end - clock()))
            except TimeoutError:
                rec.error, rec.error_kind = "never sent: the in-flight cap stayed full to the drain's end", UNSENT
                st.end(rec, clock())
                continue
            eligible = clock()
            st.waits.append((sched, eligible - sched))
        else:
            await slots.acquire()
        task = asyncio.create_task(_open_request(client, plan, spec, rec, eligible, slots, st, clock, coord))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _open_session(client: Pool, plan: Plan, coord: Coord, t0: float, st: _State,
                        tasks: set[asyncio.Task[None]], clock: Clock, sched: float, k: int,
                        slots: asyncio.Semaphore, drain_end: float) -> bool:
    """Start session k at its scheduled time (open loop: sessions arrive at the rate); it holds one in-flight slot
    for all its turns. False when the stream ran out."""
    session = _session_at(plan, st, coord, k)
    if session is None:
        return False
    warm = coord.claim(sched)
    try:
        await asyncio.wait_for(slots.acquire(), timeout=max(0.0, drain_end - clock()))
    except TimeoutError:
        return True

    async def go() -> None:
        try:
            await run_session(client, plan, coord, t0, st, session, clock, sched, warmup=warm)
        finally:
            slots.release()

    task = asyncio.create_task(go())
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return True


async def _open_request(client: Pool, plan: Plan, spec: RequestSpec, rec: RequestRecord,
                        eligible: float, slots: asyncio.Semaphore, st: _State, clock: Clock,
                        coord: Coord | None = None) -> None:
    st.in_flight += 1
    st.peak = max(st.peak, st.in_flight)
    try:
        rec.sent_at = clock()
        st.lags.append((rec.scheduled_at, max(0.0, rec.sent_at - eligible)))
        await _request(client, plan, spec, rec, clock, coord)
    finally:
        st.in_flight -= 1
        slots.release()
        st.end(rec, clock())
