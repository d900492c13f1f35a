"""Sessions (workload.sessions) on the virtual driver: closed-loop users that run conversations in simulated time.

The same sessions as the HTTP driver sends (sweep.workload.sessions.make_session), turn by turn: a turn's
sub-requests are submitted together, each = the conversation so far + its new message (media placeholders inline,
where the message carried them); when all have ended the conversation grows by each message and the reply the
engine produced (output ids from the reply's own seed, the ids the engine caches at finish, as SGLang caches a
finished request's prompt and output), the user thinks (a timer in simulated time) and sends the next turn. A
failed sub-request ends its session; a session whose next turn would pass max_context ends there; after its last
turn the user starts the next session while the window lasts. Open-loop arrivals with sessions run on the HTTP
driver only.
"""

from __future__ import annotations

import heapq
import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from sglang_sim.engine import SimRequest
from sweep.core.types import RequestRecord, RequestSpec, SessionSpec
from sweep.workload.sessions import SessionStream, turn_fits
from sweep.workload.stream import Requests


class WindowRun(Protocol):
    """What the users need of the virtual driver's window (sweep.drivers.virtual._WindowRun)."""

    specs: Requests

    @property
    def we(self) -> float: ...

    def next_rid(self, t: float) -> str: ...
    def submit(self, sr: SimRequest, spec: RequestSpec, t: float, scheduled: float) -> RequestRecord: ...
    def settle(self, rid: str, t: float) -> None: ...
    def hand_over(self, rec: RequestRecord | None = None) -> None: ...


def reply_ids(rid: str, n: int) -> list[int]:
    """The ids of a virtual request's first n output tokens (ids 3..999, a pure function of its rid)."""
    seed = zlib.crc32(rid.encode())
    return [3 + (seed * 2654435761 + i * 40503) % 997 for i in range(n)]


@dataclass
class _User:
    """One closed-loop user's running session."""

    session: SessionSpec
    ids: list[int]  # the conversation so far as the engine sees it (media placeholders inline)
    turn: int = 0  # the turn in flight (0-based)
    pending: dict[str, int] = field(default_factory=dict)  # rid -> branch of the turn in flight
    sent: list[tuple[str, list[int]]] = field(default_factory=list)  # (rid, message ids) of the turn, by branch
    records: list[RequestRecord] = field(default_factory=list)
    failed: bool = False


class SessionUsers:
    """The users of one virtual window whose stream is a SessionStream."""

    def __init__(self, run: WindowRun, to_request: Callable[[RequestSpec, str], SimRequest]):
        assert isinstance(run.specs, SessionStream)
        self.run, self.stream, self.to_request = run, run.specs, to_request
        self.next_session = 0
        self.owner: dict[str, _User] = {}
        self.live: dict[int, _User] = {}  # id -> a user whose session has not ended (its records not handed over)
        self.timers: list[tuple[float, int, _User]] = []  # (when, tie-break, user): a think time ending
        self._seq = itertools.count()

    def start(self, t: float) -> None:
        """A user starts the stream's next session at t (while the window lasts)."""
        if t >= self.run.we:
            return
        session = self.stream.at(self.next_session)
        self.next_session += 1
        user = _User(session, list(session.system_ids))
        self.live[id(user)] = user
        self._send_turn(user, t)

    def ended(self, rid: str, t: float) -> None:
        """A sub-request ended (its record is filled): when its turn is done, go on with the session."""
        user = self.owner.pop(rid, None)
        if user is None:
            return
        user.pending.pop(rid, None)
        if user.pending:
            return
        done = [r for r in user.records if r.turn == user.turn + 1]
        if any(r.error is not None for r in done):
            self._end(user)
            self.start(t)  # a failed request ends its session: the conversation cannot go on
            return
        for (sent_rid, msg_ids), r in zip(user.sent, done, strict=True):
            user.ids += msg_ids + reply_ids(sent_rid, r.output_tokens)
        user.turn += 1
        if user.turn >= len(user.session.turns) or not self._fits(user):
            self._close(user)
            self.start(t)
            return
        think = user.session.turns[user.turn].think_s
        if think > 0:
            heapq.heappush(self.timers, (t + think, next(self._seq), user))
        else:
            self._send_turn(user, t)

    def fire(self, now: float) -> None:
        """Send every turn whose think time has ended by now."""
        while self.timers and self.timers[0][0] <= now:
            at, _, user = heapq.heappop(self.timers)
            if at < self.run.we:
                self._send_turn(user, at)

    def next_timer(self) -> float:
        return self.timers[0][0] if self.timers else float("inf")

    def _fits(self, user: _User) -> bool:
        return turn_fits(len(user.ids), user.session.turns[user.turn], user.session.max_context)

    def _close(self, user: _User) -> None:
        for r in user.records:
            r.session_turns = user.turn
        self._end(user)

    def _end(self, user: _User) -> None:
        """The session ended: its requests are handed to a streamed window's sink (none label them again)."""
        self.live.pop(id(user), None)
        for r in user.records:
            self.run.hand_over(r)

    def end_all(self) -> None:
        """The window ended: the sessions still open (cut by it) are handed over as they are."""
        for user in list(self.live.values()):
            self._end(user)

    def _send_turn(self, user: _User, t: float) -> None:
        if user.turn == 0 and not self._fits(user):
            self._close(user)
            return
        user.sent = []
        turn = user.session.turns[user.turn]
        for j, msg in enumerate(turn.branches):
            rid = self.run.next_rid(t)
            proto = self.to_request(msg, rid)
            msg_ids = list(proto.input_ids)
            sr = SimRequest(rid, tuple(user.ids) + tuple(msg_ids), msg.output_tokens, proto.media_tokens,
                            output_ids=partial(reply_ids, rid))
            user.sent.append((rid, msg_ids))
            user.pending[rid] = j
            self.owner[rid] = user
            rec = self.run.submit(sr, msg, t, t)
            rec.turn, rec.branch, rec.context_tokens = user.turn + 1, j, len(user.ids)
            rec.sent_prompt_tokens = len(sr.input_ids)
            user.records.append(rec)
        for rid, _ in list(user.sent):  # after every sub-request is in: one refused at once ends the turn alone
            self.run.settle(rid, t)
