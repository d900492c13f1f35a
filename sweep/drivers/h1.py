"""The load generator's data path: streamed HTTP/1.1 POSTs on asyncio protocols, parsed by httptools (llhttp).

Why not httpx here (it still makes every control call): per network chunk, an httpx stream goes through h11's
pure-Python parser, anyio and a task wake-up before the SSE parser sees a byte. At a few thousand chunks per
second that is most of a core, and the tail of the per-chunk receive lag is event-loop queueing behind that
work (docs/bench-client.md). Here a chunk is stamped once in the loop's read callback, de-chunked by
httptools' C parser and handed to the SSE parser in the same callback; the request's coroutine is woken once,
when the response ends.

One Pool per worker: keep-alive connections to one server, reused LIFO. A request written on a reused
connection that the server had already closed (no response byte came back) is retried once on a fresh
connection: a real SGLang server was seen dropping idle keep-alive connections. https:// URLs verify the server
against the system's CAs (a private CA: point SSL_CERT_FILE at it). Proxy variables are ignored on purpose: a
proxy in the path would be measured as the server.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import cast
from urllib.parse import urlsplit

import httptools

from sweep.drivers.sse import Clock, SseSink, StreamError
from sweep.workload.requests import RequestBody


class _Stale(Exception):
    """A reused keep-alive connection was closed before any response byte: safe to send again."""


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection; at most one request in flight on it."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.sink: SseSink | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.err_body = b""
        self.got_bytes = False
        self.complete = False  # the response ended and the connection may carry another
        self.closed = False
        self.now = 0.0

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's (loop.create_connection)

    def data_received(self, data: bytes) -> None:
        self.now = self.clock()
        if self.sink is None:  # bytes nobody asked for: the connection is unusable
            self._close()
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(StreamError("malformed", f"malformed HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.sink is None or self.waiter is None or self.waiter.done():
            return
        if not self.got_bytes:
            self._resolve(_Stale())
            return
        if self.status == 200:
            try:
                self.sink.end()  # a body delimited by the close: fine if [DONE] came
            except StreamError as err:
                self._resolve(StreamError("disconnect", f"connection broke mid-stream ({err})"))
                return
            self._resolve(None)
            return
        self._resolve(StreamError("disconnect", "connection broke before the response ended"))

    # -- httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        sink = self.sink
        if sink is None:
            return
        if self.status != 200:
            if len(self.err_body) < 200:
                self.err_body += body
            return
        try:
            sink.feed(body, self.now)
        except StreamError as err:
            self.sink = None  # the rest of this read is ignored; the connection is closed
            self._fail(err)

    def on_message_complete(self) -> None:
        if self.sink is None:
            return
        self.complete = self.parser.should_keep_alive()  # llhttp forgets it once feed_data returns
        if self.status != 200:
            text = self.err_body[:200].decode(errors="replace")
            self._fail(StreamError("status", f"HTTP {self.status}: {text}"))
            return
        try:
            self.sink.end()
        except StreamError as err:
            self._fail(err)
            return
        self._resolve(None)

    # -- use
    def start(self, request: bytes, sink: SseSink) -> asyncio.Future[None]:
        assert self.transport is not None
        self.sink, self.status, self.err_body, self.got_bytes, self.complete = sink, 0, b"", False, False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def reusable(self) -> bool:
        return self.complete and not self.closed

    def _fail(self, err: StreamError) -> None:
        self._resolve(err)
        self._close()

    def _resolve(self, err: BaseException | None) -> None:
        w = self.waiter
        if w is not None and not w.done():
            if err is None:
                w.set_result(None)
            else:
                w.set_exception(err)

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Pool:
    """Keep-alive HTTP/1.1 connections to one server, for streamed JSON POSTs."""

    def __init__(self, url: str, headers: dict[str, str], clock: Clock, connect_timeout_s: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        self.clock = clock
        self.connect_timeout_s = connect_timeout_s
        host_hdr = parts.netloc.rsplit("@", 1)[-1]
        head = {"Host": host_hdr, "User-Agent": "sweep", "Accept": "text/event-stream",
                "Content-Type": "application/json", **headers}
        self._head = "".join(f"{k}: {v}\r\n" for k, v in head.items())
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()

    async def stream(self, path: str, body: RequestBody, sink: SseSink) -> None:
        """POST body as JSON and feed the streamed response to sink; raises StreamError on any failure."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        request = (f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}Content-Length: {len(payload)}\r\n\r\n"
                   .encode("latin-1") + payload)
        for _attempt in range(2):
            conn, reused = await self._acquire()
            try:
                await conn.start(request, sink)
            except _Stale:
                self._drop(conn)
                if reused:
                    continue
                raise StreamError("disconnect", "the server closed the connection without a response") from None
            except BaseException:  # StreamError, or cancelled by the request timeout: the connection is done
                self._drop(conn)
                raise
            if conn.reusable():
                conn.sink = conn.waiter = None
                self._idle.append(conn)
            else:
                self._drop(conn)
            return
        raise StreamError("disconnect", "the server closed two connections in a row without a response")

    async def _acquire(self) -> tuple[_Conn, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
            self._drop(conn)
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(self.clock), self.host, self.port, ssl=self.ssl),
                timeout=self.connect_timeout_s)
        except TimeoutError:
            raise StreamError("connect", f"cannot connect to {self.host}:{self.port}: timed out") from None
        except OSError as exc:
            raise StreamError("connect", f"cannot connect to {self.host}:{self.port}: {exc}") from None
        self._open.add(conn)
        return conn, False

    def _drop(self, conn: _Conn) -> None:
        """Forget a connection and close it (a no-op on one already closed)."""
        self._open.discard(conn)
        conn._close()

    def close(self) -> None:
        for conn in list(self._open):
            conn._close()
        self._open.clear()
        self._idle.clear()
