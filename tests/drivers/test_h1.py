"""sweep/drivers/h1.py against raw servers on real sockets: keep-alive reuse, stale connections, broken responses."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from sweep.core.types import RequestRecord
from sweep.drivers.h1 import Pool
from sweep.drivers.sse import SseSink, StreamError
from sweep.workload.requests import ChatBody, GenerateBody

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


def _sse(n: int) -> bytes:
    events = b"".join(
        f"data: {json.dumps({'choices': [{'delta': {'content': 'x'}}]})}\n\n".encode() for _ in range(n))
    return events + b"data: [DONE]\n\n"


def _chunked(body: bytes, pieces: int = 3) -> bytes:
    step = max(1, len(body) // pieces)
    out = b"".join(f"{len(body[i:i + step]):x}\r\n".encode() + body[i:i + step] + b"\r\n"
                   for i in range(0, len(body), step))
    return out + b"0\r\n\r\n"


OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's head and body, or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    return head + await reader.readexactly(length)


def _chat(i: int) -> ChatBody:
    """A small streamed chat body, told apart by its message."""
    return {"model": "m", "messages": [{"role": "user", "content": f"request {i}"}], "max_tokens": 4,
            "ignore_eos": True, "temperature": 0.0, "stream": True}


def _generate() -> GenerateBody:
    """A small streamed /generate body."""
    return {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4, "ignore_eos": True, "temperature": 0.0},
            "stream": True}


def _run(handler: Handler, n_requests: int) -> tuple[list[RequestRecord | StreamError], int, list[bytes]]:
    """Send n_requests one after another through one Pool; (record or error per request, connections, requests)."""
    conns = 0
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        try:
            await handler(reader, writer, conns)
        finally:
            writer.close()

    async def main() -> list[RequestRecord | StreamError]:
        async def record(reader: asyncio.StreamReader) -> bytes | None:
            req = await _read_request(reader)
            if req is not None:
                seen.append(req)
            return req

        nonlocal handler
        inner = handler

        async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
            reader.read_request = record  # type: ignore[attr-defined]
            await inner(reader, writer, conn)

        handler = wrapped
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Pool(f"http://127.0.0.1:{port}", {"Authorization": "Bearer k"}, time.perf_counter)
        out: list[RequestRecord | StreamError] = []
        for i in range(n_requests):
            rec = RequestRecord(index=i, concurrency=1, scheduled_at=0.0, sent_at=0.0)
            try:
                await asyncio.wait_for(pool.stream("/v1/chat/completions", _chat(i),
                                                   SseSink(rec, True, time.perf_counter)), 10)
                out.append(rec)
            except StreamError as exc:
                out.append(exc)
        pool.close()
        server.close()
        return out

    results = asyncio.run(main())
    return results, conns, seen


def test_keep_alive_connection_is_reused_and_request_is_well_formed() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
        while (await reader.read_request(reader)) is not None:  # type: ignore[attr-defined]
            writer.write(OK_HEAD + _chunked(_sse(4), pieces=5))
            await writer.drain()

    results, conns, seen = _run(handler, 3)
    assert conns == 1
    assert all(isinstance(r, RequestRecord) and r.output_tokens == 4 and r.finished_at for r in results)
    head, body = seen[0].split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer k" in head and json.loads(body) == _chat(0)


def test_stale_keep_alive_connection_is_retried_once_on_a_fresh_one() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
        # serve one request per connection, then take the next one and close without answering
        if await reader.read_request(reader) is None:  # type: ignore[attr-defined]
            return
        writer.write(OK_HEAD + _chunked(_sse(2)))
        await writer.drain()
        await reader.read_request(reader)  # type: ignore[attr-defined]

    results, conns, seen = _run(handler, 3)
    assert all(isinstance(r, RequestRecord) and r.output_tokens == 2 for r in results), results
    assert conns == 3 and len(seen) == 5  # requests 2 and 3 were each written twice


def test_fresh_connection_closed_without_answer_is_a_disconnect() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
        await reader.read_request(reader)  # type: ignore[attr-defined]

    results, conns, _ = _run(handler, 1)
    assert isinstance(results[0], StreamError) and results[0].kind == "disconnect" and conns == 1


@pytest.mark.parametrize(("response", "kind", "text"), [
    (b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 8\r\n\r\nbusy now", "status", "HTTP 503: busy now"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nnot hex\r\n", "malformed", "malformed HTTP"),
    (b"garbage\r\n\r\n", "malformed", "malformed HTTP"),
    (OK_HEAD + _chunked(_sse(3))[:40], "disconnect", "connection broke"),
    (OK_HEAD + _chunked(b'data: {"error": {"message": "boom"}}\n\n'), "server_error", "boom"),
    (b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + _sse(3), None, ""),  # body ends with the close
    (b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n" + _sse(1)[:20], "disconnect", "without [DONE]"),
])
def test_broken_responses_are_classified(response: bytes, kind: str | None, text: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
        await reader.read_request(reader)  # type: ignore[attr-defined]
        writer.write(response)
        await writer.drain()

    results, _, _ = _run(handler, 1)
    if kind is None:
        assert isinstance(results[0], RequestRecord) and results[0].output_tokens == 3
    else:
        assert isinstance(results[0], StreamError) and results[0].kind == kind and text in str(results[0])


def test_unreachable_server_is_a_connect_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused

        async def main() -> StreamError:
            pool = Pool(f"http://127.0.0.1:{port}", {}, time.perf_counter)
            rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
            with pytest.raises(StreamError) as exc:
                await pool.stream("/generate", _generate(), SseSink(rec, False, time.perf_counter))
            return exc.value

        assert asyncio.run(main()).kind == "connect"
    with pytest.raises(ValueError, match="not an http"):
        Pool("ftp://x", {}, time.perf_counter)


def test_a_cancelled_request_closes_its_connection() -> None:
    async def main() -> tuple[bool, int]:
        eof = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(OK_HEAD + _chunked(_sse(1)[:60], pieces=1)[:-5])  # one event, then the stream stalls
            await writer.drain()
            if await reader.read() == b"":
                eof.set()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        pool = Pool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", {}, time.perf_counter)
        rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.stream("/v1/chat/completions", _chat(0), SseSink(rec, True, time.perf_counter)),
                                   0.3)
        await asyncio.wait_for(eof.wait(), 10)  # the server saw the client hang up
        server.close()
        return eof.is_set(), len(pool._idle)

    closed, idle = asyncio.run(main())
    assert closed and idle == 0


def test_https_verifies_the_server_and_trusts_a_ca_from_ssl_cert_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    async def main() -> tuple[RequestRecord | StreamError, ...]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await _read_request(reader) is not None:
                writer.write(OK_HEAD + _chunked(_sse(3)))
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        out: list[RequestRecord | StreamError] = []
        for trusted in (False, True):
            if trusted:
                monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
            pool = Pool(url, {}, time.perf_counter)
            rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
            try:
                await asyncio.wait_for(pool.stream("/v1/chat/completions", _chat(0), SseSink(rec, True, time.perf_counter)),
                                       10)
                out.append(rec)
            except StreamError as exc:
                out.append(exc)
            pool.close()
        server.close()
        return tuple(out)

    untrusted, trusted = asyncio.run(main())
    assert isinstance(untrusted, StreamError) and untrusted.kind == "connect" and "CERTIFICATE" in str(untrusted).upper()
    assert isinstance(trusted, RequestRecord) and trusted.output_tokens == 3


def test_a_response_that_never_ends_after_done_is_not_a_timeout_of_the_request() -> None:
    from sweep.core.types import RequestSpec
    from sweep.drivers.worker import Plan, _request
    from sweep.profile import Window

    async def main() -> RequestRecord:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(OK_HEAD + _chunked(_sse(2), pieces=1)[:-5])  # [DONE], but no terminating chunk
            await writer.drain()
            await reader.read()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        plan = Plan(url=url, headers={}, api="chat", model_name="m", specs=[], concurrency=1,
                    window=Window(warmup_requests=0, measure_seconds=1.0, request_timeout_s=0.5))
        pool = Pool(url, {}, time.perf_counter)
        rec = RequestRecord(index=0, concurrency=1, scheduled_at=0.0, sent_at=0.0)
        await _request(pool, plan, RequestSpec(index=0, input_ids=(5, 6), output_tokens=2, text="a b"), rec,
                       time.perf_counter)
        pool.close()
        server.close()
        return rec

    rec = asyncio.run(main())
    assert rec.error is None and rec.finished_at is not None and rec.output_tokens == 2
