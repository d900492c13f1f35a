"""A minimal, fast OpenAI-compatible streaming server for client benchmarks (raw asyncio, HTTP/1.1 keep-alive).

`python -m bench.fast_sse --port P --tokens N --delay-ms D [--procs W] [--cpus 8,9,...]`: every POST gets N
chat-completion chunks, one token each, then [DONE], as chunked transfer encoding. Token k (1-based) is due at
arrival + k*D on an absolute schedule (no drift from sleep overshoot), so the ideal end-to-end time is N*D.

W worker processes (default: $BENCH_SERVER_PROCS, else min(8, cores // 2), at least 1) each run their own
lean asyncio loop on their own listening socket bound to the same port with SO_REUSEPORT (the kernel spreads
connections over them), so on a many-core host the server is not the ceiling of a client benchmark. With
--cpus, worker i is pinned to cpus[i % len(cpus)]. Where SO_REUSEPORT is missing the workers share one
inherited listening socket instead.

Every token chunk carries two extra fields first: "t", the server's time.monotonic() (CLOCK_MONOTONIC on
Linux, the same clock as time.perf_counter) right before the write, and "l", how late that write was against
its schedule (seconds). Same host, same clock: a client's receive time minus "t" is its own receive lag,
independent of the server's load; "l" shows whether the server kept its pacing.

The parent prints `ready procs=W` once every worker listens, and stops its workers on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n"
_MODELS_BODY = b'{"object":"list","data":[{"id":"bench","object":"model","owned_by":"bench"}]}'
MODELS = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
          b"connection: keep-alive\r\n\r\n%s" % (len(_MODELS_BODY), _MODELS_BODY))
# token payload, split around the per-chunk send time "t" and lateness "l"
TOKEN_PRE = b'data: {"t":'
TOKEN_MID = b',"l":'
TOKEN_POST = (b',"id":"b","object":"chat.completion.chunk","created":0,"model":"bench",'
              b'"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n')


def default_procs() -> int:
    """min(8, usable cores // 2), at least 1; $BENCH_SERVER_PROCS overrides."""
    env = os.environ.get("BENCH_SERVER_PROCS")
    if env:
        return max(1, int(env))
    return max(1, min(8, usable_cores() // 2))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _token(now: float, late: float) -> bytes:
    payload = b"%s%.6f%s%.6f%s" % (TOKEN_PRE, now, TOKEN_MID, late, TOKEN_POST)
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tokens: int, delay: float) -> None:
    """Serve keep-alive requests on one connection until the client closes it."""
    usage = _event({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}})
    tail = usage + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    clock = time.monotonic
    sleep = asyncio.sleep
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"POST "):  # a benchmark client's readiness or info probe
                writer.write(MODELS if head.startswith(b"GET /v1/models ") else NOT_FOUND)
                continue
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            start = clock()
            writer.write(HEAD)
            for k in range(1, tokens + 1):
                due = start + k * delay
                now = clock()
                if due > now:
                    await sleep(due - now)
                    now = clock()
                writer.write(_token(now, now - due))
            writer.write(tail)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    return sock


async def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(0.5)
    os._exit(0)  # the parent is gone: do not outlive it


async def serve(sock: socket.socket, tokens: int, delay: float, parent: int | None) -> None:
    """Accept on this worker's listening socket forever."""
    sock.setblocking(False)
    server = await asyncio.start_server(lambda r, w: handle(r, w, tokens, delay), sock=sock, backlog=4096)
    if parent is not None:
        asyncio.get_running_loop().create_task(_watch_parent(parent))
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def _worker(a: argparse.Namespace) -> None:
    if a.cpu is not None:
        try:
            os.sched_setaffinity(0, {a.cpu})
        except (AttributeError, OSError):
            pass
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    sock = socket.socket(fileno=a.fd) if a.fd is not None else _listener(a.port)
    asyncio.run(serve(sock, a.tokens, a.delay_ms / 1000.0, os.getppid()))


def _parent(a: argparse.Namespace) -> None:
    procs = a.procs if a.procs else default_procs()
    cpus = [int(c) for c in a.cpus.split(",") if c] if a.cpus else []
    shared: socket.socket | None = None
    if not hasattr(socket, "SO_REUSEPORT"):
        shared = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        shared.bind(("127.0.0.1", a.port))
        shared.listen(4096)
    children: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        for c in children:
            if c.poll() is None:
                c.terminate()
        for c in children:
            try:
                c.wait(timeout=5)
            except subprocess.TimeoutExpired:
                c.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for i in range(procs):
            cmd = [sys.executable, "-m", "bench.fast_sse", "--worker", "--port", str(a.port), "--tokens",
                   str(a.tokens), "--delay-ms", str(a.delay_ms)]
            if cpus:
                cmd += ["--cpu", str(cpus[i % len(cpus)])]
            fds: tuple[int, ...] = ()
            if shared is not None:
                cmd += ["--fd", str(shared.fileno())]
                fds = (shared.fileno(),)
            children.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, pass_fds=fds))
        for c in children:
            assert c.stdout is not None
            line = c.stdout.readline().strip()
            if line != b"ready":
                raise RuntimeError(f"server worker failed to start: {line!r}")
        print(f"ready procs={procs}", flush=True)
        while True:  # wait for a signal; a dead worker is reported, not replaced
            for c in children:
                if c.poll() is not None:
                    print(f"fast_sse: worker {c.pid} exited with {c.returncode}", file=sys.stderr, flush=True)
                    children.remove(c)
                    break
            if not children:
                sys.exit(1)
            time.sleep(0.5)
    finally:
        stop()


def main() -> None:
    """Parse flags; start the workers (parent) or serve (worker)."""
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--procs", type=int, default=0, help="worker processes (default $BENCH_SERVER_PROCS or "
                                                         "min(8, cores // 2))")
    p.add_argument("--cpus", default="", help="comma-separated CPUs; worker i is pinned to cpus[i % n]")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--fd", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        _worker(a)
    else:
        _parent(a)


if __name__ == "__main__":
    main()
