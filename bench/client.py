"""Load-generator capacity: sweep's HttpDriver vs public reference clients, side by side in one run.

References: the official `openai` SDK (always), and SGLang's own benchmark client (`python -m sglang.bench_serving`,
backend sglang-oai-chat) where it can run: it needs sglang with a CUDA torch/torchvision, so on a CPU machine it is
skipped with the reason, and on a GPU host it runs as installed, or through the argv prefix in BENCH_SGLANG_CMD
(a JSON list, e.g. the lent H200's bundle wrapper: tools/sglang-h200/start-server.sh with SGLANG_MODULE set).

Against bench.fast_sse (N one-token chunks per request, D ms apart, served by several SO_REUSEPORT worker
processes), each client runs S closed-loop streams in its own process; we report streamed tokens/s per client
process, the added e2e latency P99 (client-observed e2e minus the ideal N*D pacing), and a server-independent
client overhead: the per-chunk receive lag, client receive time minus the send time the server wrote into the
chunk (same host, same CLOCK_MONOTONIC). Also HttpDriver with client_procs 1, 2 (and 4 where the host has the
cores). On a host with >= 8 usable cores the server workers and the clients run on disjoint CPU sets.
`make bench ARGS=client`.

Knobs (environment): BENCH_TOKENS, BENCH_DELAY_MS, BENCH_WARM_S, BENCH_MEASURE_S, BENCH_STREAMS ("256,512"),
BENCH_CLIENT_PROCS (e.g. "1,2,4"), BENCH_SGLANG_CMD, BENCH_SERVER_PROCS, BENCH_PIN ("0": no CPU partition), BENCH_REF ("0": skip the
reference client, e.g. for a scaling run at an offered load it cannot take).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TOKENS = int(os.environ.get("BENCH_TOKENS", "64"))
DELAY_MS = float(os.environ.get("BENCH_DELAY_MS", "40"))
WARM_S = float(os.environ.get("BENCH_WARM_S", "3"))
MEASURE_S = float(os.environ.get("BENCH_MEASURE_S", "10"))
IDEAL_S = TOKENS * DELAY_MS / 1000.0
LAG_ENV = "BENCH_LAG_PROBE"  # set in the --one process; spawned client processes inherit it
CPUS_ENV = "BENCH_CLIENT_CPUS"


def _send_fields(payload: bytes) -> tuple[float, float] | None:
    """(server send time, server lateness) from a bench.fast_sse token payload `{"t":T,"l":L,...`."""
    if payload[:5] != b'{"t":':
        return None
    i = payload.index(b",", 5)
    j = payload.index(b",", i + 5)
    return float(payload[5:i]), float(payload[i + 5:j])


def _install_lag_probe() -> None:
    """Wrap sweep.drivers.sse._event: per token chunk, keep (receive stamp, stamp - send, parsed - send, late).

    The samples ride on the record (an extra attribute, pickled back from client processes) as one flat list
    of floats, four per chunk (floats are not tracked by the garbage collector; tuples would be). The wrapper
    costs one slice, two float() and one clock read per event, on top of the driver's own work.
    """
    from sweep.drivers import sse

    orig = sse._event
    clock = time.perf_counter

    def _event(payload: bytes, rec: Any, chat: bool, seen: int, now: float, sink: Any) -> int:
        out = orig(payload, rec, chat, seen, now, sink)
        fields = _send_fields(payload)
        if fields is not None:
            lags = rec.__dict__.get("bench_lag")
            if lags is None:
                lags = rec.__dict__["bench_lag"] = []
            lags += (now, now - fields[0], clock() - fields[0], fields[1])
        return out

    sse._event = _event  # type: ignore[assignment]


if os.environ.get(LAG_ENV) == "1":  # also runs in spawned client processes (they import this as __mp_main__)
    _install_lag_probe()


def _specs() -> list[Any]:
    from sweep.core.types import RequestSpec

    return [RequestSpec(index=i, input_ids=(5, 6, 7, 8), output_tokens=TOKENS, text="hi") for i in range(64)]


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _lag_stats(samples: list[float], lo: float, hi: float) -> dict[str, float]:
    """Percentiles (ms) of the per-chunk lags (flat, four floats per chunk) whose receive stamp lies in [lo, hi)."""
    rows = np.array(samples, dtype=float).reshape(-1, 4)
    inside = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi)] * 1000.0
    if not inside.size:
        return {"lag_p50_ms": float("nan"), "lag_p99_ms": float("nan"), "parsed_lag_p99_ms": float("nan"),
                "server_late_p99_ms": float("nan"), "lag_n": 0.0}
    return {"lag_p50_ms": float(np.percentile(inside[:, 1], 50)), "lag_p99_ms": float(np.percentile(inside[:, 1], 99)),
            "parsed_lag_p99_ms": float(np.percentile(inside[:, 2], 99)),
            "server_late_p99_ms": float(np.percentile(inside[:, 3], 99)), "lag_n": float(len(inside))}


def run_sweep(url: str, streams: int, procs: int) -> dict[str, float]:
    """HttpDriver closed loop (chat API) for one window; tokens/s, added latency and receive lag."""
    from sweep.analysis.measure_client import client_stats
    from sweep.core.types import ServerConfig
    from sweep.drivers.http import HttpDriver
    from sweep.launchers.base import ServerHandle
    from sweep.profile import Window

    w = Window(warmup_requests=0, warmup_seconds=WARM_S, measure_seconds=MEASURE_S, drain_seconds=30.0,
               request_timeout_s=60.0)
    res = HttpDriver(api="chat", client_procs=procs).run_window(ServerHandle(ServerConfig(), url), _specs(),
                                                                 streams, w)
    ws, we = res.window_start, res.window_end
    recs = [r for r in res.records if not r.warmup and ws <= r.scheduled_at < we]
    ok = [r for r in recs if r.error is None and r.finished_at is not None]
    toks = [t for r in res.records for t, k in zip(r.chunk_times, r.chunk_tokens, strict=False)
            for _ in range(k) if ws <= t < we]
    added = [((r.finished_at or 0.0) - r.scheduled_at - IDEAL_S) * 1000.0 for r in ok]
    lags = [x for r in res.records for x in r.__dict__.get("bench_lag", ())]
    client = client_stats(res.client, ws, we)
    return {"tok_s": len(toks) / MEASURE_S, "added_p99_ms": _p(added, 99), "errors": float(len(recs) - len(ok)),
            "cpu": client.client_cpu_frac or 0.0, "cpu_total": client.client_cpu_total or 0.0, "procs": float(procs),
            **_lag_stats(lags, ws, we)}


async def _openai_user(client: Any, stop_at: float, out: list[tuple[float, float]], toks: list[float],
                       lags: list[float]) -> None:
    clock = time.perf_counter
    while clock() < stop_at:
        sent = clock()
        stream = await client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "hi"}],
                                                      max_tokens=TOKENS, stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                now = clock()
                toks.append(now)
                extra = chunk.model_extra or {}
                if "t" in extra:
                    lag = now - float(extra["t"])
                    lags += (now, lag, lag, float(extra.get("l", 0.0)))
        out.append((sent, clock()))


async def _openai(url: str, streams: int) -> dict[str, float]:
    import openai

    # the SDK's own HTTP client (default pool: 1000 connections), as users run it
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0, timeout=60.0)
    t0 = time.perf_counter()
    ws, we = t0 + WARM_S, t0 + WARM_S + MEASURE_S
    done: list[tuple[float, float]] = []
    toks: list[float] = []
    lags: list[float] = []
    cpu0: list[tuple[float, float]] = []

    async def mark() -> None:
        await asyncio.sleep(WARM_S)
        cpu0.append((time.process_time(), time.perf_counter()))
        await asyncio.sleep(MEASURE_S)
        cpu0.append((time.process_time(), time.perf_counter()))

    await asyncio.gather(mark(), *(_openai_user(client, we, done, toks, lags) for _ in range(streams)))
    await client.close()
    added = [(f - s - IDEAL_S) * 1000.0 for s, f in done if ws <= s < we]
    cpu = (cpu0[1][0] - cpu0[0][0]) / (cpu0[1][1] - cpu0[0][1])  # per wall second between the marks
    return {"tok_s": sum(1 for t in toks if ws <= t < we) / MEASURE_S, "added_p99_ms": _p(added, 99),
            "errors": 0.0, "cpu": cpu, "cpu_total": cpu,
            "procs": 1.0, **_lag_stats(lags, ws, we)}


def sglang_cmd() -> tuple[list[str] | None, str]:
    """(argv prefix that runs sglang.bench_serving, description) or (None, why it cannot run here)."""
    raw = os.environ.get("BENCH_SGLANG_CMD")
    if raw:
        return list(json.loads(raw)), "BENCH_SGLANG_CMD"
    if importlib.util.find_spec("sglang") is None:
        return None, "sglang is not installed here (its benchmark client needs sglang with CUDA torch/torchvision)"
    return [sys.executable, "-m", "sglang.bench_serving"], "installed sglang"


def _run_child(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a command to its end; (result, CPU seconds it and its children used, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_sglang(url: str, streams: int) -> dict[str, float]:
    """The second reference: SGLang's bench_serving, `streams` concurrent chat streams, enough prompts for the window.

    It reports whole-run numbers (no warm-up cut): output tokens/s over its duration, e2e percentiles. Its CPU is
    the child processes' rusage over the run minus that of `--help` (the imports). Per-chunk receive lag is not
    observable inside it (n/a).
    """
    cmd, _ = sglang_cmd()
    assert cmd is not None
    rounds = math.ceil((WARM_S + MEASURE_S) / IDEAL_S) + 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        args = [*cmd, "--backend", "sglang-oai-chat", "--base-url", url, "--model", "bench",
                "--tokenizer", str(Path(__file__).resolve().parent.parent / "models" / "llama3-8b-shape"),
                "--dataset-name", "random-ids", "--random-input-len", "4", "--random-output-len", str(TOKENS),
                "--random-range-ratio", "1", "--num-prompts", str(streams * rounds), "--max-concurrency",
                str(streams), "--request-rate", "inf", "--output-file", str(out), "--disable-tqdm", "--seed", "1",
                "--warmup-requests", "1"]
        _, startup = _run_child([*cmd, "--help"])  # imports (torch, transformers): paid before any request
        proc, run_cpu = _run_child(args)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"sglang.bench_serving failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
        r = json.loads(out.read_text().strip().splitlines()[-1])
    cpu = max(run_cpu - startup, 0.0) / float(r["duration"])  # still counts its tokenizer and dataset set-up
    return {"tok_s": float(r["output_throughput"]), "added_p99_ms": float(r["p99_e2e_latency_ms"]) - IDEAL_S * 1000.0,
            "errors": float(streams * rounds - int(r["completed"])), "cpu": cpu, "cpu_total": cpu, "procs": 1.0,
            "itl_p99_ms": float(r["p99_itl_ms"]), **_lag_stats([], 0.0, 0.0)}  # no per-chunk lag: all n/a


def run_openai(url: str, streams: int) -> dict[str, float]:
    """The reference: openai.AsyncOpenAI streaming chat completions, `streams` closed-loop users."""
    return asyncio.run(_openai(url, streams))


def _physical_groups(cpus: list[int]) -> list[list[int]]:
    """Usable CPUs grouped by physical core (SMT siblings together), in CPU order; singletons if unknown."""
    groups: dict[tuple[str, str], list[int]] = {}
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            with open(base + "physical_package_id") as f1, open(base + "core_id") as f2:
                key = (f1.read().strip(), f2.read().strip())
        except OSError:
            key = ("cpu", str(c))
        groups.setdefault(key, []).append(c)
    return sorted(groups.values())


def partition(server_procs: int) -> tuple[list[int], list[int]]:
    """(server CPUs, client CPUs): whole physical cores from the top for the server, the rest for the clients.

    Empty lists (no pinning) below 8 usable cores, with BENCH_PIN=0, or where affinity is unsupported.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return [], []
    if len(cpus) < 8 or os.environ.get("BENCH_PIN", "1") == "0":
        return [], []
    groups = _physical_groups(cpus)
    server: list[int] = []
    while groups and len(server) < server_procs and len(groups) > 1:
        server = groups.pop() + server
    client = [c for g in groups for c in g]
    if len(client) < 2:
        return [], []
    return sorted(server), client


def _server(port: int, procs: int, cpus: list[int]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "bench.fast_sse", "--port", str(port), "--tokens", str(TOKENS),
           "--delay-ms", str(DELAY_MS), "--procs", str(procs)]
    if cpus:
        cmd += ["--cpus", ",".join(map(str, cpus))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith(b"ready"), line
    return proc


def _one(url: str, kind: str, streams: int, procs: int, cpus: list[int]) -> dict[str, float]:
    """Run one client configuration in a fresh process (fair CPU, clean loop); its JSON line is the result."""
    env = dict(os.environ, **{LAG_ENV: "1", CPUS_ENV: ",".join(map(str, cpus))})
    out = subprocess.run([sys.executable, "-m", "bench.client", "--one", url, kind, str(streams), str(procs)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} x {streams} streams, {procs} procs failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _clocks_shared() -> tuple[bool, str]:
    """Whether time.monotonic (server stamps) and time.perf_counter (client stamps) read the same clock."""
    m, p = time.get_clock_info("monotonic"), time.get_clock_info("perf_counter")
    same = m.implementation == p.implementation and abs(time.monotonic() - time.perf_counter()) < 1e-3
    return same, f"monotonic={m.implementation}, perf_counter={p.implementation}"


def _ints(env: str, default: list[int]) -> list[int]:
    raw = os.environ.get(env)
    return [int(x) for x in raw.split(",") if x.strip()] if raw else default


def main() -> int:
    """Run every client configuration, one at a time, against one fast server; print a markdown table."""
    import socket

    from bench.fast_sse import default_procs, usable_cores

    cores = usable_cores()
    server_procs = default_procs()
    server_cpus, client_cpus = partition(server_procs)
    n_client_cores = len(client_cpus) or cores
    procs_list = _ints("BENCH_CLIENT_PROCS", [1, 2, 4] if n_client_cores >= 4 else [1, 2])
    streams_list = _ints("BENCH_STREAMS", [256, 512])
    with_ref = os.environ.get("BENCH_REF", "1") != "0"
    sgl_cmd, sgl_why = sglang_cmd()
    if with_ref:
        print(f"SGLang bench_serving reference: {'runs via ' + sgl_why if sgl_cmd else 'skipped: ' + sgl_why}",
              flush=True)
    same_clock, clock_desc = _clocks_shared()
    plural = "es" if server_procs > 1 else ""
    print(f"host: {os.cpu_count()} cores ({cores} usable); server: bench.fast_sse x {server_procs} process{plural} "
          f"(SO_REUSEPORT){' on CPUs ' + _ranges(server_cpus) if server_cpus else ''}; clients "
          f"{'on CPUs ' + _ranges(client_cpus) if client_cpus else 'unpinned (server and clients share the cores)'}"
          f"; clocks: {clock_desc}{'' if same_clock else ' (NOT shared: receive lag not valid)'}", flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = _server(port, server_procs, server_cpus)
    url = f"http://127.0.0.1:{port}"
    rows: list[tuple[str, int, dict[str, float]]] = []
    try:
        for streams in streams_list:
            if with_ref:
                rows.append(("openai SDK (reference)", streams, _one(url, "openai", streams, 1, client_cpus)))
                if sgl_cmd is not None:
                    try:
                        rows.append(("SGLang bench_serving (reference)", streams,
                                     _one(url, "sglang", streams, 1, client_cpus)))
                    except RuntimeError as exc:  # say why and go on: the other rows still mean something
                        print(f"SGLang bench_serving at {streams} streams failed: {exc}", flush=True)
            for n in procs_list:
                name = f"sweep HttpDriver, {n} proc{'s' if n > 1 else ''}"
                rows.append((name, streams, _one(url, "sweep", streams, n, client_cpus)))
    finally:
        server.terminate()
        server.wait()
    print(f"load: {TOKENS} tokens x {DELAY_MS:g} ms per request (ideal e2e {IDEAL_S * 1000:.0f} ms); "
          f"window {MEASURE_S:g} s after {WARM_S:g} s warm-up")
    print("| client | streams | offered tok/s | tokens/s | tokens/s per proc | added e2e P99 ms | "
          "recv lag P50 / P99 ms | parsed lag P99 ms | server late P99 ms | busiest proc CPU | "
          "client CPU us/token | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ref = {s: r["tok_s"] for name, s, r in rows if name.startswith("openai")}
    sgl = {s: r["tok_s"] for name, s, r in rows if name.startswith("SGLang")}
    for name, streams, r in rows:
        nprocs = r.get("procs", 1.0) or 1.0
        lag = (f"{r['lag_p50_ms']:.2f} / {r['lag_p99_ms']:.2f}" if same_clock and r["lag_n"] else "n/a")
        parsed = f"{r['parsed_lag_p99_ms']:.2f}" if same_clock and r["lag_n"] else "n/a"
        if "itl_p99_ms" in r:  # bench_serving: its own ITL P99 against the 40 ms pacing, in place of the lag
            lag = f"ITL P99 {r['itl_p99_ms']:.1f} (pacing {DELAY_MS:g})"
        offered = streams * 1000.0 / DELAY_MS
        ratios = [f"{r['tok_s'] / base[streams]:.2f}x {label}" for label, base in (("SDK", ref), ("SGLang", sgl))
                  if streams in base]
        vs_ref = f" ({', '.join(ratios)})" if ratios else ""
        us_tok = r["cpu_total"] / r["tok_s"] * 1e6 if r["tok_s"] else float("nan")
        print(f"| {name} | {streams} | {offered:.0f} | {r['tok_s']:.0f}{vs_ref} | "
              f"{r['tok_s'] / nprocs:.0f} | {r['added_p99_ms']:.1f} | {lag} | {parsed} | "
              f"{r['server_late_p99_ms']:.2f} | {r['cpu']:.2f} | {us_tok:.1f} | {r['errors']:.0f} |")
    return 0


def _ranges(cpus: list[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}-{c}" if c != start else f"{c}")
            start = None
    return ",".join(out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        pin = os.environ.get(CPUS_ENV)
        if pin:
            os.sched_setaffinity(0, {int(c) for c in pin.split(",")})  # spawned client processes inherit it
        u, k, n, p = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        runner = {"openai": lambda: run_openai(u, n), "sglang": lambda: run_sglang(u, n)}.get(k, lambda: run_sweep(u, n, p))
        print(json.dumps(runner()))
        sys.exit(0)
    sys.exit(main())
