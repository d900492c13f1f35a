"""The reference client's session replay: `sweep crosscheck` on a workload.sessions profile (issue 31 §4).

sweep.drivers.reference's H11Reference runs a SessionStream here, so multi-turn figures are cross-checked like single
requests. What it shares with sweep's own driver (sweep.drivers.worker) is what makes the two windows one
experiment: the sessions (the same SessionStream: the same conversations, each turn's think time and fan-out), the
rule for what a turn sends (sweep.workload.sessions.Conversation, passed in as a factory: the conversation so far,
the server's own replies included, then the turn's new message), the closed-loop users (session k of the window is
the k-th one a user starts; each user runs a session turn by turn, each turn's sub-requests in parallel, then the
next session), the warm-up rule and the record fields the session figures read (turn, branch, context_tokens,
session_turns: set on every request of a session that ended, None on one the window cut off). What it does not
share: the HTTP stack (asyncio streams + h11, one keep-alive connection per parallel sub-request) and the SSE
reading, including how a reply's text and output ids are gathered for the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from sweep.core.errors import StreamExhausted
from sweep.core.types import RequestRecord, SessionSpec, WindowResult
from sweep.drivers.coord import Coord
from sweep.drivers.h11_stream import Connection, within_timeout
from sweep.engines import default
from sweep.profile import Window
from sweep.profile.warmup import WarmupRule
from sweep.workload.requests import RequestBody, estimated_prompt_tokens
from sweep.workload.sessions import Conversation, Reply, SessionStream


class SessionClient(Protocol):
    """What the replay needs of the reference client (sweep.drivers.reference.H11Reference)."""

    api: str
    model_name: str
    clock: Callable[[], float]
    conversation: Callable[[SessionSpec], Conversation]

    async def request(self, conn: Connection, path: str, body: RequestBody, rec: RequestRecord,
                      reply: Reply | None = None) -> None: ...


class _Window:
    """One window's shared state: the warm-up coordinator, the records, the next session's number."""

    def __init__(self, ref: SessionClient, base: str, headers: dict[str, str], stream: SessionStream,
                 concurrency: int, window: Window, think: float):
        self.ref, self.base, self.headers, self.stream = ref, base, headers, stream
        self.concurrency, self.window, self.think = concurrency, window, think
        self.coord = Coord(WarmupRule.closed(window, concurrency, concurrency, think))
        self.records: list[RequestRecord] = []
        self.next_session = 0
        self.stopped = False
        self.path = default().paths.request(ref.api)

    def ended(self, now: float) -> bool:
        ws = self.coord.window_start()
        return self.stopped or (ws is not None and now >= ws + self.window.measure_seconds)


async def run_sessions(ref: SessionClient, base: str, headers: dict[str, str], stream: SessionStream,
                       concurrency: int, window: Window, think: float) -> WindowResult:
    """Warm up, measure one window of `concurrency` closed-loop session users, drain; every record kept."""
    st = _Window(ref, base, headers, stream, concurrency, window, think)
    clock = ref.clock
    t0 = clock()
    st.coord.begin(t0)
    users = [asyncio.create_task(_user(st)) for _ in range(concurrency)]
    while not all(u.done() for u in users):
        ws = st.coord.poll(clock())
        if ws is not None and clock() >= ws + window.measure_seconds:
            break
        await asyncio.wait(users, timeout=0.05)
    ws = st.coord.window_start()
    end = (ws if ws is not None else clock()) + window.measure_seconds
    pending = {u for u in users if not u.done()}
    if pending:
        _, pending = await asyncio.wait(pending, timeout=max(0.0, end + window.drain_seconds - clock()))
    for u in pending:
        u.cancel()
    for res in await asyncio.gather(*users, return_exceptions=True):
        if isinstance(res, BaseException) and not isinstance(res, asyncio.CancelledError):
            raise res
    opened = st.coord.opened()
    ws = st.coord.window_start()
    ws = t0 if ws is None else ws
    return WindowResult(concurrency=concurrency, records=sorted(st.records, key=lambda r: r.scheduled_at),
                        samples=[], window_start=ws, window_end=ws + window.measure_seconds,
                        warmup_requests=opened[1] if opened else 0, warmup_seconds=opened[2] if opened else 0.0,
                        window_opened_by=opened[0] if opened else None)


async def _user(st: _Window) -> None:
    """One closed-loop user: the next session of the window, turn by turn, until the window ends."""
    conns: list[Connection] = []
    try:
        while not st.ended(st.ref.clock()):
            k = st.next_session
            st.next_session += 1
            try:
                session = st.stream.at(k)
            except StreamExhausted:
                st.stopped = True
                return
            await _session(st, session, conns)  # the next session at once, as sweep's own session users do
    finally:
        for c in conns:
            await c.close()


async def _session(st: _Window, session: SessionSpec, conns: list[Connection]) -> None:
    """Send a session's turns in order; a failed request ends it (the conversation cannot go on)."""
    ref, clock = st.ref, st.ref.clock
    conv = ref.conversation(session)
    sent: list[RequestRecord] = []
    for t, turn in enumerate(session.turns):
        if t and turn.think_s:
            await asyncio.sleep(turn.think_s)
        now = clock()
        if st.ended(now):
            return
        if not conv.fits(turn):
            break
        warm = st.coord.claim(now)
        while len(conns) < len(turn.branches):
            conns.append(Connection(st.base, st.headers))
        recs, replies = [], [Reply() for _ in turn.branches]
        for j, msg in enumerate(turn.branches):
            whole = conv.prompt(msg)
            recs.append(RequestRecord(
                index=session.index, concurrency=st.concurrency, scheduled_at=now, sent_at=now,
                prompt_tokens=whole.prompt_tokens, modality=whole.modality, warmup=warm,
                sent_prompt_tokens=estimated_prompt_tokens(whole), sent_output_tokens=msg.output_tokens,
                turn=t + 1, branch=j, context_tokens=conv.tokens))
        st.records.extend(recs)
        sent.extend(recs)
        await asyncio.gather(*(_send(st, conns[j], conv.body(ref.api, msg, ref.model_name), rec, reply)
                               for j, (msg, rec, reply) in enumerate(zip(turn.branches, recs, replies, strict=True))))
        if any(rec.error is not None for rec in recs):
            return
        conv.add(list(zip(turn.branches, replies, strict=True)))
    turns = max((r.turn or 0 for r in sent), default=0)
    for r in sent:
        r.session_turns = turns


async def _send(st: _Window, conn: Connection, body: RequestBody, rec: RequestRecord, reply: Reply) -> None:
    """One sub-request of a turn, its reply kept; a failure is recorded on rec, never raised."""
    st.coord.sent(0, st.ref.clock())
    try:
        await within_timeout(st.ref.request(conn, st.path, body, rec, reply), conn, rec, st.window.request_timeout_s)
    finally:
        st.coord.done(0, st.ref.clock())
