"""What a window sent, as token sequences in send order: the input of the cache prediction (issue 20 §3).

A request's prompt is rebuilt from the study's stream (a pure function of the profile and the request's position,
sweep.workload.stream), so nothing but the records is kept. What the server caches after a request is its prompt
and its reply (SGLang's cache_finished_req), so each sequence comes with `cached` = prompt + reply, the reply as
tokens no prompt can contain (negative ids, unique per request) of the length the server produced.

Sessions (workload.sessions): turn k's prompt = the system prompt, then every earlier turn's messages each followed
by its reply (the same reply tokens that turn's `cached` held), then turn k's own message: the structure the client
sent, with the server's reply ids stood in for by their placeholders, so a perfect cache hits exactly what the
server could. Media and chat-template tokens are left out (they are not in the ids the stream holds).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sweep.core.types import UNSENT, RequestRecord, SessionSpec
from sweep.profile import MAX_FANOUT, MAX_TURNS
from sweep.workload.sessions import SessionStream
from sweep.workload.stream import Requests, spec_at

_SHIFT = 22  # reply tokens of one request: at most 2**22 (MAX_TOKENS is 2**21)


@dataclass(frozen=True)
class Sent:
    """One request as the server's cache saw it: what it looked up, then what it kept."""

    record: RequestRecord
    prompt: tuple[int, ...]
    cached: tuple[int, ...]


def reply_tokens(index: int, turn: int, branch: int, n: int) -> tuple[int, ...]:
    """n placeholder tokens for the reply to one request (negative: never a prompt token; unique per request)."""
    base = -(((index * (MAX_TURNS + 1) + turn) * MAX_FANOUT + branch + 1) << _SHIFT)
    return tuple(range(base, base - n, -1))


def sent_sequences(records: Sequence[RequestRecord], specs: Requests) -> Iterator[Sent]:
    """Every request that reached the server, in send order, with its prompt and what the server cached after it."""
    sent = sorted((r for r in records if r.error_kind != UNSENT), key=lambda r: r.sent_at)
    if isinstance(specs, SessionStream):
        yield from _session_sequences(sent, specs)
        return
    for r in sent:
        prompt = spec_at(specs, r.index).input_ids
        yield Sent(r, prompt, prompt + reply_tokens(r.index, 0, 0, r.output_tokens))


def _session_sequences(sent: list[RequestRecord], stream: SessionStream) -> Iterator[Sent]:
    outputs = {(r.index, r.turn, r.branch): r.output_tokens for r in sent}
    contexts: dict[int, tuple[int, tuple[int, ...]]] = {}  # session -> (turns folded in, the context so far)
    sessions: dict[int, SessionSpec] = {}
    for r in sent:
        turn, branch = (r.turn or 1) - 1, r.branch or 0
        session = sessions.get(r.index) or sessions.setdefault(r.index, stream.at(r.index))
        done, ctx = contexts.get(r.index, (0, session.system_ids))
        while done < turn:  # fold the earlier turns in: each message, then its reply
            for b, msg in enumerate(session.turns[done].branches):
                n = outputs.get((r.index, done + 1, b), msg.output_tokens)
                ctx = ctx + msg.input_ids + reply_tokens(r.index, done + 1, b, n)
            done += 1
        contexts[r.index] = (done, ctx)
        prompt = ctx + session.turns[turn].branches[branch].input_ids
        yield Sent(r, prompt, prompt + reply_tokens(r.index, turn + 1, branch, r.output_tokens))
