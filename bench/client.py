"""Load-generator capacity: sweep's HttpDriver vs the official `openai` SDK client, side by side in one run.

Against bench.fast_sse (N one-token chunks per request, D ms apart), each client runs S closed-loop streams
in its own process; we report streamed tokens/s per client process and the added latency P99 (e2e minus the
server's ideal N*D). Also HttpDriver with client_procs 1 and 2. `make bench ARGS=client`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

TOKENS = int(os.environ.get("BENCH_TOKENS", "64"))
DELAY_MS = float(os.environ.get("BENCH_DELAY_MS", "40"))
WARM_S = float(os.environ.get("BENCH_WARM_S", "3"))
MEASURE_S = float(os.environ.get("BENCH_MEASURE_S", "10"))
IDEAL_S = TOKENS * DELAY_MS / 1000.0


def _specs() -> list[Any]:
    from sweep.types import RequestSpec

    return [RequestSpec(index=i, input_ids=(5, 6, 7, 8), output_tokens=TOKENS, text="hi") for i in range(64)]


def run_sweep(url: str, streams: int, procs: int) -> dict[str, float]:
    """HttpDriver closed loop (chat API) for one window; tokens/s and added latency of measured requests."""
    from launchers.base import ServerHandle
    from sweep.drivers.http import HttpDriver
    from sweep.profile import Window
    from sweep.types import ServerConfig

    w = Window(warmup_requests=0, warmup_seconds=WARM_S, measure_seconds=MEASURE_S, drain_seconds=30.0,
               request_timeout_s=60.0)
    res = HttpDriver(api="chat", client_procs=procs).run_window(ServerHandle(ServerConfig(), url), _specs(),
                                                                 streams, w)
    recs = [r for r in res.records if not r.warmup and res.window_start <= r.scheduled_at < res.window_end]
    ok = [r for r in recs if r.error is None and r.finished_at is not None]
    toks = [t for r in res.records for t, k in zip(r.chunk_times, r.chunk_tokens, strict=False)
            for _ in range(k) if res.window_start <= t < res.window_end]
    added = [((r.finished_at or 0.0) - r.scheduled_at - IDEAL_S) * 1000.0 for r in ok]
    return {"tok_s": len(toks) / MEASURE_S, "added_p99_ms": float(np.percentile(added, 99)) if added else float("nan"),
            "errors": float(len(recs) - len(ok)), "cpu": res.client["cpu"], "cpu_total": res.client["cpu_total"]}


async def _openai_user(client: Any, stop_at: float, out: list[tuple[float, float]], toks: list[float]) -> None:
    while time.perf_counter() < stop_at:
        sent = time.perf_counter()
        stream = await client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "hi"}],
                                                      max_tokens=TOKENS, stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                toks.append(time.perf_counter())
        out.append((sent, time.perf_counter()))


async def _openai(url: str, streams: int) -> dict[str, float]:
    import openai

    # the SDK's own HTTP client (default pool: 1000 connections), as users run it
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0, timeout=60.0)
    t0 = time.perf_counter()
    ws, we = t0 + WARM_S, t0 + WARM_S + MEASURE_S
    done: list[tuple[float, float]] = []
    toks: list[float] = []
    cpu0: list[float] = []

    async def mark() -> None:
        await asyncio.sleep(WARM_S)
        cpu0.append(time.process_time())
        await asyncio.sleep(MEASURE_S)
        cpu0.append(time.process_time())

    await asyncio.gather(mark(), *(_openai_user(client, we, done, toks) for _ in range(streams)))
    await client.close()
    added = [(f - s - IDEAL_S) * 1000.0 for s, f in done if ws <= s < we]
    return {"tok_s": sum(1 for t in toks if ws <= t < we) / MEASURE_S,
            "added_p99_ms": float(np.percentile(added, 99)) if added else float("nan"), "errors": 0.0,
            "cpu": (cpu0[1] - cpu0[0]) / MEASURE_S, "cpu_total": (cpu0[1] - cpu0[0]) / MEASURE_S}


def run_openai(url: str, streams: int) -> dict[str, float]:
    """The reference: openai.AsyncOpenAI streaming chat completions, `streams` closed-loop users."""
    return asyncio.run(_openai(url, streams))


def _server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.fast_sse", "--port", str(port), "--tokens", str(TOKENS),
                             "--delay-ms", str(DELAY_MS)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def _one(url: str, kind: str, streams: int, procs: int = 1) -> dict[str, float]:
    """Run one client configuration in a fresh process (fair CPU, clean loop); its JSON line is the result."""
    out = subprocess.run([sys.executable, "-m", "bench.client", "--one", url, kind, str(streams), str(procs)],
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    """Run every client configuration, one at a time, against one fast server; print a markdown table."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = _server(port)
    url = f"http://127.0.0.1:{port}"
    rows: list[tuple[str, int, dict[str, float]]] = []
    try:
        for streams in (256, 512):
            rows.append(("openai SDK (reference)", streams, _one(url, "openai", streams)))
            rows.append(("sweep HttpDriver, 1 proc", streams, _one(url, "sweep", streams, 1)))
            rows.append(("sweep HttpDriver, 2 procs", streams, _one(url, "sweep", streams, 2)))
    finally:
        server.terminate()
        server.wait()
    print(f"server: bench.fast_sse, {TOKENS} tokens x {DELAY_MS:g} ms (ideal e2e {IDEAL_S * 1000:.0f} ms); "
          f"window {MEASURE_S:g} s after {WARM_S:g} s warm-up; host cores: {os.cpu_count()}")
    print("| client | streams | tokens/s | tokens/s per proc | added e2e P99 ms | busiest proc CPU | errors |")
    print("|---|---|---|---|---|---|---|")
    ref = {s: r["tok_s"] for name, s, r in rows if name.startswith("openai")}
    for name, streams, r in rows:
        n = 2 if "2 procs" in name else 1
        print(f"| {name} | {streams} | {r['tok_s']:.0f} ({r['tok_s'] / ref[streams]:.2f}x ref) | {r['tok_s'] / n:.0f} | "
              f"{r['added_p99_ms']:.1f} | {r['cpu']:.2f} | {r['errors']:.0f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        u, k, n, p = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(run_openai(u, n) if k == "openai" else run_sweep(u, n, p)))
        sys.exit(0)
    sys.exit(main())
