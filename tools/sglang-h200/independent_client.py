"""A minimal streaming client for SGLang's /generate, independent of sweep (no sweep import, another HTTP stack).

    python3 independent_client.py --url http://127.0.0.1:30000 --concurrency 16 [--warmup-s 5 --measure-s 20]
        [--stack auto|stdlib|aiohttp] [--seed 1] [--out result.json] [--sessions [--think-s 0.2]]

Closed loop: `concurrency` users, each sends its next request as soon as the last one ended. Requests are
drawn lazily from a seeded generator and never repeat: prompts of U(1000, 1100) token ids in 3..999 (the
llama3-8b-shape vocabulary), 80% starting with one of 16 shared 512-token prefixes; max_new_tokens U(64, 256)
with ignore_eos. Clock: time.perf_counter. A request counts when it was sent inside
[start + warmup_s, start + warmup_s + measure_s):
- TTFT = first event with completion_tokens > 0 minus send time; TPOT = (last token − first token) / (n − 1).
- output tok/s = tokens that *arrived* inside the window (any request) / measure_s.
After the window no new request is sent; those in flight get `--drain-s` to finish (then they are cancelled).

--sessions (issue 31 §4): each user runs conversations instead: U(2, 4) turns, turn 1 a request as above, each later
turn a new message of U(16, 32) token ids sent after the conversation so far (every earlier message and the
server's own output_ids), --think-s after each reply; a failed request ends its session. Besides the figures above
(over every turn) it prints the session figures sweep stores (sweep.analysis.sessions): sessions completed
(every turn answered, the last one sent inside the window), their time P50/P90 (first send to last reply, s), the
cache hit of turn 1 and of later turns (meta_info cached_tokens / prompt_tokens, requests sent inside the window),
and the mean prompt tokens of a later-turn request.

Stacks: `stdlib` is raw asyncio streams with its own HTTP/1.1 chunked decoding (one keep-alive connection per
user); `aiohttp` is aiohttp's client (what the outside check used). `auto` takes aiohttp where it imports.
Prints one JSON line with the figures (and writes it to --out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

PREFIXES, PREFIX_LEN, PREFIX_SHARE = 16, 512, 0.8
PROMPT_LOW, PROMPT_HIGH, OUT_LOW, OUT_HIGH = 1000, 1100, 64, 256
ID_LOW, ID_HIGH = 3, 999


@dataclass
class Rec:
    sent: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (time, new tokens)
    error: str | None = None
    session: int = -1  # --sessions: the conversation and turn (1 = the first) of this request
    turn: int = 0
    final: bool = False  # the session's last turn
    prompt_tokens: int = 0  # meta_info, as the server counted them
    cached_tokens: int = 0
    output_ids: list[int] = field(default_factory=list)  # the reply, for the next turn


class Requests:
    """The request stream: lazily generated, seeded, never repeated."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.prefixes = [[self.rng.randint(ID_LOW, ID_HIGH) for _ in range(PREFIX_LEN)] for _ in range(PREFIXES)]

    def next(self) -> bytes:
        """The next request body, JSON-encoded (before the send time is taken)."""
        n = self.rng.randint(PROMPT_LOW, PROMPT_HIGH)
        if self.rng.random() < PREFIX_SHARE:
            ids = self.prefixes[self.rng.randrange(PREFIXES)] + [self.rng.randint(ID_LOW, ID_HIGH)
                                                                 for _ in range(n - PREFIX_LEN)]
        else:
            ids = [self.rng.randint(ID_LOW, ID_HIGH) for _ in range(n)]
        out = self.rng.randint(OUT_LOW, OUT_HIGH)
        return json.dumps({"input_ids": ids, "stream": True,
                           "sampling_params": {"max_new_tokens": out, "ignore_eos": True, "temperature": 0}}).encode()


def _event(line: bytes, rec: Rec, now: float) -> bool:
    """Apply one SSE line; True at [DONE]."""
    if not line.startswith(b"data:"):
        return False
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return True
    ev = json.loads(payload)
    if "error" in ev:
        raise RuntimeError(f"server error: {ev['error']}")
    meta = ev.get("meta_info") or {}
    total = int(meta.get("completion_tokens", 0))
    rec.prompt_tokens = int(meta.get("prompt_tokens", rec.prompt_tokens) or 0)
    rec.cached_tokens = int(meta.get("cached_tokens", rec.cached_tokens) or 0)
    ids = ev.get("output_ids")
    if isinstance(ids, list) and ids:  # cumulative (SGLang's default) or only the new ones
        grew = len(ids) >= len(rec.output_ids) and ids[:len(rec.output_ids)] == rec.output_ids
        rec.output_ids = list(ids) if grew else rec.output_ids + list(ids)
    if total > rec.tokens:
        if rec.first is None:
            rec.first = now
        rec.arrivals.append((now, total - rec.tokens))
        rec.tokens, rec.last = total, now
    return False


class StdlibConn:
    """One keep-alive HTTP/1.1 connection on asyncio streams; decodes chunked or length-delimited bodies."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, data: bytes, rec: Rec) -> None:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None and self.writer is not None
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nAccept: text/event-stream\r\n\r\n%s"
                          % (path.encode(), self.host.encode(), self.port, len(data), data))
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (ln.partition(b":") for ln in head.split(b"\r\n")[1:] if ln)}
        if status != 200:
            raise RuntimeError(f"HTTP {status}")
        buf = b""
        done = False
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                chunk = await self.reader.readexactly(size + 2)
                now = time.perf_counter()
                buf += chunk[:-2]
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    done = _event(ln, rec, now) or done
        else:
            left = int(headers.get(b"content-length", b"-1"))
            while left != 0:
                chunk = await self.reader.read(65536 if left < 0 else min(left, 65536))
                if not chunk:
                    break
                now = time.perf_counter()
                left -= len(chunk) if left > 0 else 0
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    done = _event(ln, rec, now) or done
            if headers.get(b"connection", b"").lower() == b"close" or left < 0:
                self.close()
        if buf:
            done = _event(buf, rec, time.perf_counter()) or done
        if not done:
            raise RuntimeError("stream ended without [DONE]")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class AiohttpConn:
    """The same on aiohttp (one shared session)."""

    def __init__(self, url: str, session: Any) -> None:
        self.url, self.session = url, session

    async def post(self, path: str, data: bytes, rec: Rec) -> None:
        async with self.session.post(self.url + path, data=data,
                                     headers={"Content-Type": "application/json"}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            done = False
            async for line in resp.content:  # aiohttp yields line by line
                done = _event(line.rstrip(b"\r\n"), rec, time.perf_counter()) or done
            if not done:
                raise RuntimeError("stream ended without [DONE]")

    def close(self) -> None:
        pass


class Sessions:
    """The conversation stream (--sessions): seeded, never repeated; turn 1 drawn as Requests draws a request."""

    def __init__(self, seed: int) -> None:
        self.reqs = Requests(seed)
        self.rng = self.reqs.rng
        self.count = 0

    def next(self) -> tuple[int, list[list[int]], list[int]]:
        """(session number, each turn's new message ids, each turn's max_new_tokens)."""
        first = json.loads(self.reqs.next())
        n = self.rng.randint(2, 4)
        msgs = [first["input_ids"]] + [[self.rng.randint(ID_LOW, ID_HIGH) for _ in range(self.rng.randint(16, 32))]
                                       for _ in range(n - 1)]
        outs = [first["sampling_params"]["max_new_tokens"]] + [self.rng.randint(OUT_LOW, OUT_HIGH)
                                                              for _ in range(n - 1)]
        self.count += 1
        return self.count - 1, msgs, outs


def _body(ids: list[int], out: int) -> bytes:
    return json.dumps({"input_ids": ids, "stream": True,
                       "sampling_params": {"max_new_tokens": out, "ignore_eos": True, "temperature": 0}}).encode()


def session_figures(recs: list[Rec], ws: float, we: float) -> dict[str, Any]:
    """The session figures of --sessions (module docstring)."""
    by: dict[int, list[Rec]] = {}
    for r in recs:
        by.setdefault(r.session, []).append(r)
    times, turns = [], []
    for rs in by.values():
        last = max(rs, key=lambda r: r.turn)
        if last.final and all(r.error is None and r.last is not None for r in rs) \
                and ws <= last.sent:
            times.append(max(r.last or 0.0 for r in rs) - min(r.sent for r in rs))
            turns.append(len(rs))
    inside = [r for r in recs if ws <= r.sent < we]
    first = [r for r in inside if r.turn == 1]
    later = [r for r in inside if r.turn > 1]

    def hit(rs: list[Rec]) -> float | None:
        prompt = sum(r.prompt_tokens for r in rs)
        return sum(r.cached_tokens for r in rs) / prompt if prompt else None

    return {"sessions_completed": len(times), "turns_per_session": sum(turns) / len(turns) if turns else None,
            "session_p50_s": _pct(times, 50), "session_p90_s": _pct(times, 90), "cache_hit_turn1": hit(first),
            "cache_hit_later": hit(later),
            "later_prompt_tokens": sum(r.prompt_tokens for r in later) / len(later) if later else None}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


async def run(url: str, concurrency: int, warmup_s: float, measure_s: float, drain_s: float, seed: int,
              stack: str, sessions: bool = False, think_s: float = 0.2) -> dict[str, Any]:
    url = url.rstrip("/")
    reqs = Requests(seed)
    convs = Sessions(seed)
    recs: list[Rec] = []
    session = None
    if stack == "auto":
        try:
            import aiohttp  # noqa: F401
            stack = "aiohttp"
        except ImportError:
            stack = "stdlib"
    if stack == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                        timeout=aiohttp.ClientTimeout(total=None, sock_read=600))
    start = time.perf_counter()
    ws, we = start + warmup_s, start + warmup_s + measure_s

    async def send(conn: StdlibConn | AiohttpConn, body: bytes, rec: Rec) -> None:
        recs.append(rec)
        try:
            await conn.post("/generate", body, rec)
        except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
            conn.close()

    async def user() -> None:
        conn: StdlibConn | AiohttpConn = AiohttpConn(url, session) if session is not None else StdlibConn(url)
        try:
            while time.perf_counter() < we:
                if not sessions:
                    body = reqs.next()
                    await send(conn, body, Rec(sent=time.perf_counter()))
                    continue
                k, msgs, outs = convs.next()
                context: list[int] = []
                for t, (msg, out) in enumerate(zip(msgs, outs, strict=True), start=1):
                    if t > 1:
                        await asyncio.sleep(think_s)
                    if time.perf_counter() >= we:
                        break
                    body = _body(context + msg, out)
                    rec = Rec(sent=time.perf_counter(), session=k, turn=t, final=t == len(msgs))
                    await send(conn, body, rec)
                    if rec.error is not None:
                        break
                    context = context + msg + rec.output_ids
        finally:
            conn.close()

    tasks = [asyncio.create_task(user()) for _ in range(concurrency)]
    await asyncio.sleep(max(0.0, we - time.perf_counter()))
    _, pending = await asyncio.wait(tasks, timeout=drain_s)
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if session is not None:
        await session.close()
    inside = [r for r in recs if ws <= r.sent < we]
    ok = [r for r in inside if r.error is None and r.first is not None]
    ttft = [(r.first - r.sent) * 1000.0 for r in ok if r.first is not None]
    tpot = [(r.last - r.first) * 1000.0 / (r.tokens - 1) for r in ok
            if r.last is not None and r.first is not None and r.tokens > 1]
    arrived = sum(n for r in recs for t, n in r.arrivals if ws <= t < we)
    out = {"client": f"independent-{stack}", "concurrency": concurrency, "measure_s": measure_s,
           "n": len(inside), "errors": sum(1 for r in inside if r.error), "output_tps": arrived / measure_s,
           "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99),
           "tpot_p50_ms": _pct(tpot, 50), "tpot_p99_ms": _pct(tpot, 99),
           "first_error": next((r.error for r in inside if r.error), None)}
    return {**out, **session_figures(recs, ws, we)} if sessions else out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--measure-s", type=float, default=20.0)
    p.add_argument("--drain-s", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stack", choices=("auto", "stdlib", "aiohttp"), default="auto")
    p.add_argument("--out", default=None)
    p.add_argument("--sessions", action="store_true", help="multi-turn conversations (module docstring)")
    p.add_argument("--think-s", type=float, default=0.2, help="--sessions: seconds between a reply and the next turn")
    a = p.parse_args()
    result = asyncio.run(run(a.url, a.concurrency, a.warmup_s, a.measure_s, a.drain_s, a.seed, a.stack,
                             a.sessions, a.think_s))
    line = json.dumps(result)
    print(line, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
