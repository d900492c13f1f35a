"""Test helper: a fake SGLang server with known timings, run as its own process (raw asyncio, HTTP/1.1 keep-alive).

`python tests/timed_server.py --port P --ttft-ms 50 --itl-ms 10 --health-ms 80` serves
- POST /generate (stream): token k (1-based, k <= sampling_params.max_new_tokens) is due at arrival +
  ttft + (k-1)*itl on an absolute schedule (no drift from sleep overshoot), one event per token in SGLang's
  shape (cumulative completion_tokens in meta_info), then `data: [DONE]`. So the truth is known exactly:
  TTFT = ttft, every inter-token gap = itl, whatever the concurrency (no batching, no queue).
- GET /health: answers 200 after health_ms (SGLang's /health runs a one-token generation and is slow under
  load), and counts the calls (GET /stats returns {"health_calls": N, "model_info_calls": M}).
- GET /model_info, /server_info: JSON at once (the knobs given with --server-info JSON).
- GET /metrics: the text of --metrics-file (e.g. a real SGLang 0.5.17 scrape), 404 without one.
Prints `ready` once listening. Used by tests/launchers/test_attach_timing.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time

_STATS = {"health_calls": 0, "model_info_calls": 0}


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _json(obj: object, status: str = "200 OK") -> bytes:
    body = json.dumps(obj).encode()
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: keep-alive\r\n\r\n%s"
            % (status.encode(), len(body), body))


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")


async def _generate(writer: asyncio.StreamWriter, body: bytes, a: argparse.Namespace) -> None:
    start = time.monotonic()
    req = json.loads(body or b"{}")
    n = int((req.get("sampling_params") or {}).get("max_new_tokens", 16))
    prompt = len(req.get("input_ids") or [])
    writer.write(HEAD)
    for k in range(1, n + 1):
        due = start + (a.ttft_ms + (k - 1) * a.itl_ms) / 1000.0
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        finish = {"type": "length", "length": n} if k == n else None
        event = {"text": "x" * k, "meta_info": {"prompt_tokens": prompt, "completion_tokens": k,
                                                 "cached_tokens": 0, "finish_reason": finish}}
        writer.write(_chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
    writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, a: argparse.Namespace) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length) if length else b""
            target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            if head.startswith(b"POST ") and target == b"/generate":
                await _generate(writer, body, a)
            elif target == b"/health":
                _STATS["health_calls"] += 1
                await asyncio.sleep(a.health_ms / 1000.0)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n")
            elif target == b"/metrics" and a.metrics_body:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: %d\r\n"
                             b"connection: keep-alive\r\n\r\n%s" % (len(a.metrics_body), a.metrics_body))
            elif target == b"/stats":
                writer.write(_json(_STATS))
            elif target == b"/model_info":
                _STATS["model_info_calls"] += 1
                writer.write(_json({"model_path": "timed-fake", "is_generation": True}))
            elif target == b"/server_info":
                writer.write(_json({"version": "timed-fake", "model_path": "timed-fake", **json.loads(a.server_info)}))
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _serve(a: argparse.Namespace) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, a), "127.0.0.1", a.port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--health-ms", type=float, default=80.0)
    p.add_argument("--server-info", default="{}", help="JSON object merged into /server_info")
    p.add_argument("--metrics-file", default=None, help="text served at /metrics")
    a = p.parse_args()
    a.metrics_body = open(a.metrics_file, "rb").read() if a.metrics_file else b""  # noqa: SIM115
    asyncio.run(_serve(a))


if __name__ == "__main__":
    main()
