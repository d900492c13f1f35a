"""Test helper: a real TCP proxy on 127.0.0.1 that delivers every server→client byte `delay_s` late.

A delay line, not a throttle: each chunk read from the server is written to the client delay_s after it arrived,
in order, so a stream's first token (TTFT, end-to-end latency) is late by delay_s and the gaps between tokens stay
as the server sent them. Runs its own event loop in a thread; use as a context manager that yields the base URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read() -> None:
        while data := await reader.read(65536):
            await queue.put((time.monotonic() + delay_s, data))
        await queue.put((time.monotonic() + delay_s, b""))

    async def write() -> None:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    with contextlib.suppress(OSError, ConnectionError):
        await asyncio.gather(read(), write())


@contextlib.contextmanager
def delay_proxy(upstream_port: int, delay_s: float) -> Iterator[str]:
    """Listen on a free port; every connection is relayed to 127.0.0.1:upstream_port, replies delay_s late."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(_pump(c_reader, s_writer, 0.0), _pump(s_reader, c_writer, delay_s))

    async def serve() -> asyncio.Server:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        return server

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(serve())
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10.0):
        raise AssertionError("delay proxy did not start")
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10.0)
