"""One in-flight HTTP request's stream, and what an API front needs of the server that feeds it.

`sglang_sim.server` owns the streams and the engine; the OpenAI-compatible routes (`sglang_sim.openai_api`) are
written against `ApiHost` alone, so neither module imports the other's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from sglang_sim.tokenizer import SimTokenizer


def out_tokens(seed: int, start: int, end: int) -> list[int]:
    """Pseudo-random generated token numbers of one request (the tokenizer maps each to a word and its id)."""
    return [(seed * 2654435761 + i * 40503) % 997 for i in range(start, end)]


@dataclass
class Stream:
    """One in-flight HTTP request: the engine loop posts (tokens, done) updates to its queue."""

    rid: str
    tokenizer: SimTokenizer
    queue: asyncio.Queue[tuple[int, bool]] = field(default_factory=asyncio.Queue)
    sent: int = 0
    ids: list[int] = field(default_factory=list)
    text: str = ""
    seed: int = 0

    def output_ids(self, n: int) -> list[int]:
        """The ids of the first n output tokens (the engine caches a finished request's reply by them)."""
        return [self.tokenizer.out_piece(k)[0] for k in out_tokens(self.seed, 0, n)]

    def grow(self, n: int) -> None:
        if n > len(self.ids):
            pieces = [self.tokenizer.out_piece(k) for k in out_tokens(self.seed, len(self.ids), n)]
            self.ids += [i for i, _ in pieces]
            self.text += "".join(t for _, t in pieces)


class ApiHost(Protocol):
    """What an API front takes from the server: request bodies, submission, updates, framing and closing."""

    info: dict[str, Any]
    model_name: str
    tokenizer: SimTokenizer

    async def body(self, request: Request) -> dict[str, Any] | Response:
        """The request's JSON object, or the error response SGLang would give."""
        ...

    def submit(self, ids: list[int], max_new: int, media: dict[str, int], streaming: bool,
               rid: str | None) -> tuple[Stream, Any]:
        """Hand one request to the engine; its stream and the engine's request."""
        ...

    def updates(self, st: Stream) -> AsyncIterator[tuple[int, bool]]:
        """The latest (tokens, done) per wake-up, until done."""
        ...

    async def whole_output(self, st: Stream, r: Any) -> None:
        """Wait for a non-streamed request's end and take all of its output."""
        ...

    def close(self, st: Stream, r: Any) -> None:
        """Forget the stream (aborting the request if it still runs)."""
        ...

    def sse(self, obj: Any) -> str:
        """One server-sent event carrying `obj`."""
        ...
