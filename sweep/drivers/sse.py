"""One streamed request's body: request bodies per API, incremental SSE parsing, chunk times, failure classes.

error_kind values: status (non-200), timeout, disconnect (connection broke or stream ended without
[DONE]), malformed (undecodable event), server_error (an error event or an abort), connect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypedDict

from sweep.core.types import JSON, RequestRecord, RequestSpec
from sweep.engines import Paths, default
from sweep.workload.requests import RequestBody, chat_body, generate_body
from sweep.workload.sessions import Reply

Clock = Callable[[], float]


# One SSE event's JSON as the servers send it (the fields read here; a server may send more, or less).
class PromptDetails(TypedDict, total=False):
    cached_tokens: int | None


class Usage(TypedDict, total=False):
    """An OpenAI chat stream's token counts (the last event, with stream_options.include_usage)."""

    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_details: PromptDetails | None


class Delta(TypedDict, total=False):
    content: str | None


class Choice(TypedDict, total=False):
    delta: Delta | None


class MetaInfo(TypedDict, total=False):
    """/generate's per-event counts (cumulative) and, at the end, why the request finished."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    num_retractions: int | None
    finish_reason: dict[str, JSON] | str | None  # {"type": "abort", "message": ...} for an abort


class SseEvent(TypedDict, total=False):
    """One `data:` line of a stream: a chat chunk (choices, usage), a /generate chunk (meta_info, output_ids)
    or an error event."""

    choices: list[Choice]
    usage: Usage | None
    meta_info: MetaInfo
    output_ids: list[int]
    text: str
    error: JSON


class StreamError(Exception):
    """A failure of one stream, with its error_kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def request_for(api: str, spec: RequestSpec, model_name: str, paths: Paths | None = None) -> tuple[str, RequestBody]:
    """(path, JSON body) of a streamed request in the given API; the path is the engine's (default: SGLang's)."""
    path = (paths or default().paths).request(api)
    if api == "chat":
        return path, chat_body(spec, model_name, stream=True)
    return path, generate_body(spec, stream=True)


class SseSink:
    """Incremental SSE parser for one streamed response: feed it network chunks as they arrive.

    Chunks may split events anywhere; each `data:` line is one event, and every event that arrived in one
    network chunk gets that chunk's receive time. `done` turns true at `data: [DONE]`; `feed` raises
    StreamError for an error event, an abort or a malformed event.

    Tokens per event: /generate events carry the cumulative meta_info.completion_tokens. A chat content event
    carries usage.completion_tokens (cumulative) when the server sends continuous usage stats (chat_body asks
    for them; SGLang and vLLM honour `stream_options.continuous_usage_stats`). Without it an event may still
    hold several tokens (`--stream-interval`), so content events count one each until [DONE], and then the
    final usage count is shared out over them in proportion to their text length (at least one each).
    """

    __slots__ = ("rec", "chat", "clock", "buf", "seen", "done", "chars", "reply")

    def __init__(self, rec: RequestRecord, chat: bool, clock: Clock, reply: Reply | None = None):
        self.rec, self.chat, self.clock = rec, chat, clock
        self.reply = reply  # sessions: the reply's ids and text are kept here (the next turn sends them)
        self.buf = b""
        self.seen = 0
        self.done = False
        self.chars: list[int] | None = [] if chat else None  # content length per counted event, no usage seen

    def feed(self, chunk: bytes, now: float) -> None:
        if self.done:
            return
        buf = self.buf + chunk if self.buf else chunk
        if b"\n" not in chunk:
            self.buf = buf
            return
        *lines, self.buf = buf.split(b"\n")
        for raw in lines:
            if raw[:5] != b"data:":
                continue
            payload = raw[5:].strip()
            if payload == b"[DONE]":
                self._finish()
                return
            self.seen = _event(payload, self.rec, self.chat, self.seen, now, self)

    def end(self) -> None:
        """The response body ended: fine after [DONE] (also an unterminated last line), else a disconnect."""
        if self.done:
            return
        if self.buf[:5] == b"data:" and self.buf[5:].strip() == b"[DONE]":
            self._finish()
            return
        raise StreamError("disconnect", "stream ended without [DONE]")

    def _finish(self) -> None:
        rec = self.rec
        if self.chars and rec.output_tokens > sum(rec.chunk_tokens):
            rec.chunk_tokens = share_by_length(rec.output_tokens, self.chars)
        rec.output_tokens = max(rec.output_tokens, self.seen)
        self.rec.finished_at = self.clock()
        self.done = True


def share_by_length(total: int, lengths: list[int]) -> list[int]:
    """Split total tokens over events in proportion to their text lengths: at least 1 each, largest remainders."""
    weights = [max(1, n) for n in lengths]
    w = sum(weights)
    raw = [total * x / w for x in weights]
    out = [max(1, int(r)) for r in raw]
    order = sorted(range(len(out)), key=lambda i: out[i] - raw[i])  # furthest below its share first
    i = 0
    while sum(out) < total:
        out[order[i % len(out)]] += 1
        i += 1
    for j in reversed(order):  # over (floors of 1 pushed it up): take back from the most over-served
        while sum(out) > total and out[j] > 1:
            out[j] -= 1
    return out


def _event(payload: bytes, rec: RequestRecord, chat: bool, seen: int, now: float, sink: SseSink) -> int:
    """Apply one event to rec; returns the tokens seen so far."""
    try:
        event: SseEvent = json.loads(payload)
    except ValueError:
        raise StreamError("malformed", f"malformed SSE event: {payload[:80]!r}") from None
    if not isinstance(event, dict):
        raise StreamError("malformed", "SSE event is not a JSON object")
    if "error" in event:
        err = event["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise StreamError("server_error", f"server error event: {msg}")
    if sink.reply is not None:
        _keep_reply(event, chat, sink.reply)
    total = _tokens_so_far(event, seen, chat, sink)
    if total > seen:
        if rec.first_token_at is None:
            rec.first_token_at = now
        rec.chunk_times.append(now)
        rec.chunk_tokens.append(total - seen)
        seen = total
    _meta(event, rec, chat)
    return seen


def _keep_reply(event: SseEvent, chat: bool, reply: Reply) -> None:
    """Grow a session's reply by one event: chat content deltas; /generate's output ids and text, which are
    cumulative (SGLang's default) or deltas (--incremental-streaming-output: a list that does not extend the last)."""
    if chat:
        choices = event.get("choices") or []
        content = (choices[0].get("delta") or {}).get("content") if choices else None
        if content:
            reply.text += content
        return
    ids, text = event.get("output_ids"), event.get("text")
    if isinstance(ids, list) and ids:
        cumulative = len(ids) >= len(reply.ids) and ids[:len(reply.ids)] == reply.ids
        reply.ids = list(ids) if cumulative else reply.ids + list(ids)
        if isinstance(text, str):
            reply.text = text if cumulative else reply.text + text
    elif isinstance(text, str) and text.startswith(reply.text):
        reply.text = text


def _tokens_so_far(event: SseEvent, seen: int, chat: bool, sink: SseSink) -> int:
    if chat:
        choices = event.get("choices") or []
        content = (choices[0].get("delta") or {}).get("content") if choices else None
        if not content:
            return seen
        usage = event.get("usage")
        if isinstance(usage, dict) and "completion_tokens" in usage:
            sink.chars = None  # exact counts from here on: nothing to share out at the end
            return max(seen, int(usage["completion_tokens"]))
        if sink.chars is not None:
            sink.chars.append(len(content))
        return seen + 1
    meta = event.get("meta_info") or {}
    if "completion_tokens" in meta:
        return int(meta["completion_tokens"])
    return len(event.get("output_ids") or [])


def _meta(event: SseEvent, rec: RequestRecord, chat: bool) -> None:
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
            raise StreamError("server_error", f"request aborted by the server: {fr.get('message', '')}")
