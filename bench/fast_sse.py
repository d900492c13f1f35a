"""A minimal, fast OpenAI-compatible streaming server for client benchmarks (raw asyncio, HTTP/1.1 keep-alive).

`python -m bench.fast_sse --port P --tokens N --delay-ms D`: every POST gets N chat-completion chunks, one
token each, D ms apart, then [DONE], as chunked transfer encoding. Pre-encoded bytes keep the server cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import json

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


TOKEN = _event({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]})


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tokens: int, delay: float) -> None:
    """Serve keep-alive requests on one connection until the client closes it."""
    usage = _event({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}})
    tail = usage + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            writer.write(HEAD)
            for _ in range(tokens):
                await asyncio.sleep(delay)
                writer.write(TOKEN)
            writer.write(tail)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, tokens: int, delay: float) -> None:
    """Listen on 127.0.0.1:port forever."""
    server = await asyncio.start_server(lambda r, w: handle(r, w, tokens, delay), "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Parse flags and serve."""
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--delay-ms", type=float, default=20.0)
    a = p.parse_args()
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(a.port, a.tokens, a.delay_ms / 1000.0))


if __name__ == "__main__":
    main()
