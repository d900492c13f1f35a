"""HTTP load generator over real sockets: closed or open loop, SSE streaming, warm-up, window, drain.

The driver only executes and records; it computes no statistics (that is sweep.analysis.measure). The client
work runs in sweep.drivers.worker, in this process (client_procs=1) or sharded over spawned processes;
this module runs the probes, watches the server, snapshots /metrics at the window's bounds and merges.

Multi-process windows (client_procs=N): every child connects, reports ready, and then all start at one
t0 chosen by the parent (a start barrier; time.perf_counter is CLOCK_MONOTONIC, one clock per machine).
Closed loop: N shards of concurrency/N users; the warm-up (sweep.profile.warmup) is counted globally (shared marks
under one lock, sweep.drivers.coord) and the event that ends it sets the shared window start. Open loop: the whole
schedule is computed here, shard i takes requests i, i+N, ... (rate/N each, disjoint, deterministic), the cap is
split likewise; the window opens by the same rule, so the schedule runs to the window's latest possible end.

Streamed (run_window's sink, issue 23 §2): the workers send the requests that ended on in bounded batches while the
window runs (sweep.drivers.handover), so no process holds a whole window of per-token chunks; a session's requests
go once the session ended (its end labels its turns: session_turns).

Liveness: the launcher's alive() is called in a thread of its own every ALIVE_INTERVAL_S, never on the
event loop, so a slow check (attach mode asks the server over HTTP) cannot delay the streams' chunks.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np

from sweep.core import interrupt
from sweep.core.types import SERVER_DIED, ClientSamples, RecordSink, RequestRecord, Sample, WindowResult
from sweep.drivers import arrivals
from sweep.drivers.coord import Coord, SharedCoord
from sweep.drivers.handover import BATCH, Handover, Sender, receive
from sweep.drivers.worker import Plan, WorkerResult, run_worker
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, ClosedArrival, Window
from sweep.profile.warmup import WarmupRule
from sweep.workload.requests import warm_media_pool
from sweep.workload.stream import Requests, StreamExhausted
from sweep.workload.stream_view import StreamView

if TYPE_CHECKING:  # a spawned client process imports this module: it needs none of these
    from sweep.analysis.early_stop import EarlyStop
    from sweep.analysis.server_metrics import MetricsSnapshot
    from sweep.drivers.probes import MetricsProbe, Probe
    from sweep.engines import MetricNames

    Snaps = tuple[MetricsSnapshot | None, MetricsSnapshot | None, float]  # /metrics at the window's bounds, its start

Clock = Callable[[], float]
STALL_TIMEOUT_S = 120.0  # no response bytes this long while requests are in flight: the server is hung
START_MARGIN_S = 0.05  # t0 is this far after the start barrier, so every worker is waiting when it comes
ALIVE_INTERVAL_S = 0.25  # how often the launcher's alive() runs (in its own thread) during a window
# How often the supervising loop asks the early-stop test: reading the requests in flight costs ~3 ms at 512 of them
# on the event loop that reads the streams, so not at every 50 ms tick (a stop comes at most this much later)
EARLY_CHECK_S = 0.5
# The supervising loop waking this much later than it asked: the process was not running (SIGSTOP, a VM pause, swap)
# or its loop was blocked. The server's silence before that moment went unobserved, so it is no sign of a hang.
SUSPENDED_S = 1.0
T = TypeVar("T")


def run_loop(coro: Coroutine[object, object, T]) -> T:
    """Run a coroutine on uvloop where it is installed (a faster event loop: lower per-chunk overhead and
    tail latency in the load generator), else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        factory = None
    else:
        factory = uvloop.new_event_loop
    with interrupt.for_asyncio(), asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


class HttpDriver:
    """Runs one ladder step against a server URL: closed loop (`concurrency` users) or an open-loop arrival."""

    simulated = False
    streams = True  # run_window takes a sink (sweep.ladder.recorder): ended requests are handed over in batches

    def __init__(self, api: str = "generate", model_name: str = "default", metrics_interval_s: float = 1.0,
                 think_time_s: float = 0.0, probes: Callable[[ServerHandle, Clock], list[Probe]] | None = None,
                 alive: Callable[[ServerHandle], bool] | None = None, clock: Clock = time.perf_counter,
                 client_procs: int = 1, seed: int = 0, alive_interval_s: float = ALIVE_INTERVAL_S,
                 stall_timeout_s: float | None = STALL_TIMEOUT_S):
        if client_procs < 1:
            raise ValueError("client_procs must be >= 1")
        self.api = api
        self.model_name = model_name
        self.metrics_interval_s = metrics_interval_s
        self.think_time_s = think_time_s
        self.probes = probes
        self.alive = alive
        self.alive_interval_s = alive_interval_s
        self.clock = clock
        self.client_procs = client_procs
        self.seed = seed
        self.stall_timeout_s = stall_timeout_s
        self._window_t0: float | None = None
        self._suspended = 0.0  # the running window's own suspensions, seconds (WindowResult.suspended_s)
        self._early: EarlyStop | None = None  # the running window's early-stop test (run_window's early_stop)
        self._stopped: str | None = None  # why the running window stopped early
        self._next_check = 0.0  # when the supervising loop next asks the early-stop test

    def window_elapsed(self) -> float | None:
        """Seconds into the current window on the driver's clock (None between windows), for progress."""
        t0 = self._window_t0
        return None if t0 is None else self.clock() - t0

    def run_window(self, handle: ServerHandle, specs: Requests, concurrency: int,
                   window: Window, arrival: ArrivalProcess | None = None,
                   sink: RecordSink | None = None, early_stop: EarlyStop | None = None) -> WindowResult:
        """Warm up, measure one window, drain; returns every record and sample.

        With `early_stop`, every ended request goes to it as its batch comes (at most BATCH_S late) and the
        supervising loop asks it every EARLY_CHECK_S with the requests the workers have in flight (Coord.running,
        sweep.drivers.running: a request past the TTFT bound with no first token is over it already): once it
        decides, the window ends there (Coord.end_early: dispatch stops, what still runs is cut at once, no drain)
        and the result's stopped_early says why.

        With `sink`, every request that ended is handed to it (in a thread of this process, in the order its batch
        came) with the measured window's [start, end) while the window runs; a session's once the session ended.

        arrival None or ClosedArrival: `concurrency` closed-loop users (ClosedArrival's think time wins).
        RateArrival / GammaArrival / TraceArrival: open loop at the scheduled times (seeded by the driver's
        seed and `concurrency`), `concurrency` only labels the step.
        """
        assert handle.url, "the HTTP driver needs a server URL"
        plans, rule = self._plans(handle, specs, concurrency, window, arrival)
        if early_stop is not None:
            sink = _watched(sink, early_stop)
        if sink is not None:
            plans = [replace(p, batch=BATCH) for p in plans]
        self._window_t0 = self.clock()
        self._early, self._stopped, self._next_check = early_stop, None, 0.0
        try:
            return run_loop(self._run(handle, plans, concurrency, window, rule, sink))
        finally:
            self._window_t0, self._early = None, None

    def flush_cache(self, handle: ServerHandle) -> str | None:
        """Empty the server's prefix cache (its engine's flush path); None when done, else why not."""
        from sweep.drivers.flush import flush_over_http

        return flush_over_http(str(handle.url or ""), dict(handle.headers()), path=handle.dialect.paths.flush_cache)

    def _plans(self, handle: ServerHandle, specs: Requests, concurrency: int, window: Window,
               arrival: ArrivalProcess | None) -> tuple[list[Plan], WarmupRule]:
        n = self.client_procs
        base = Plan(url=str(handle.url or ""), headers=dict(handle.headers()), api=self.api, paths=handle.dialect.paths,
                    model_name=self.model_name, specs=specs, window=window, concurrency=concurrency)
        sched = arrivals.step_schedule(arrival, window, self.seed, concurrency, specs) if arrival is not None else None
        if sched is None:
            think = arrival.think_time_s if isinstance(arrival, ClosedArrival) else self.think_time_s
            n = min(n, concurrency)
            return [replace(base, users=arrivals.split_int(concurrency, n, i), think_time_s=think, shard=i,
                            n_shards=n) for i in range(n)], WarmupRule.closed(window, concurrency, concurrency, think)
        offsets, cap = sched.offsets, sched.max_in_flight
        n = min(n, cap, max(1, len(offsets)))
        out = []
        for i in range(n):
            idx = arrivals.shard(len(offsets), n, i)
            out.append(replace(base, shard=i, n_shards=n, offsets=offsets[idx], numbers=idx,
                               max_in_flight=arrivals.split_int(cap, n, i)))
        return out, sched.warmup

    async def _run(self, handle: ServerHandle, plans: list[Plan], concurrency: int, window: Window,
                   rule: WarmupRule, sink: RecordSink | None) -> WindowResult:
        probes = self.probes(handle, self.clock) if self.probes else []
        from sweep.drivers.probes import MetricsProbe

        metrics = next((p for p in probes if isinstance(p, MetricsProbe)), None)
        ctx = mp.get_context("spawn")
        # with an early-stop test, the workers track their requests in flight for it (sweep.drivers.running)
        slots = max(p.users if p.offsets is None else p.max_in_flight for p in plans) if self._early else 0
        coord = Coord(rule, slots) if len(plans) == 1 else SharedCoord(ctx, rule, n_shards=len(plans), slots=slots)
        handover = Handover(sink, coord.window_start, window.measure_seconds, coord.stop) if sink else None
        try:
            for p in probes:
                await p.start()
            try:
                if len(plans) == 1:
                    t0 = self.clock()
                    coord.begin(t0)
                    emit = handover.put if handover is not None else None
                    workers = [asyncio.create_task(run_worker(plans[0], coord, t0, self.clock, emit))]
                    results, aborted, snaps = await self._supervise(handle, coord, workers, window, metrics)
                else:
                    assert isinstance(coord, SharedCoord)
                    results, aborted, snaps, t0 = await self._run_procs(handle, plans, ctx, coord, window, metrics,
                                                                        handover)
            finally:
                for p in probes:
                    await p.stop()
            exhausted = next((r.exhausted for r in results if r.exhausted), None)
            if exhausted is not None:
                raise StreamExhausted(exhausted)
            ws = snaps[2] if snaps[2] == snaps[2] else t0  # nan: the warm-up never ended (every user failed first)
            if handover is None:
                records = [r for res in results for r in res.records]
            else:  # the requests still held when the workers ended (cut by the drain, never sent) go the same way
                for res in results:
                    handover.put(res.records)
                records = handover.close(ws)
        finally:
            if handover is not None:
                handover.shut()
        samples: list[Sample] = [s for p in probes for s in p.samples]
        return self._merge(results, records, samples, snaps, ws, concurrency, window, aborted, handle.simulated,
                           coord.opened(), coord.early_end())

    async def _supervise(self, handle: ServerHandle, coord: Coord, workers: Sequence[asyncio.Future[WorkerResult]],
                         window: Window, metrics: MetricsProbe | None) -> tuple[list[WorkerResult], str | None, Snaps]:
        """Snapshot /metrics at the window's start and end, stop dispatch if the server dies, collect results."""
        dead = asyncio.Event()
        watcher = asyncio.create_task(self._watch_alive(handle, dead)) if self.alive is not None else None
        try:
            results, aborted, snaps = await self._supervise_loop(coord, workers, window, metrics, dead)
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
        if aborted is None and self.alive is not None:
            # a server that died in the window's last moments (its requests failed at once, the workers finished
            # before the next periodic check) is a crash, not a window of failed requests judged against the SLA
            alive = self.alive
            if not await asyncio.get_running_loop().run_in_executor(None, alive, handle):
                aborted = SERVER_DIED
        return results, aborted, snaps

    async def _supervise_loop(self, coord: Coord, workers: Sequence[asyncio.Future[WorkerResult]],
                              window: Window, metrics: MetricsProbe | None, dead: asyncio.Event
                              ) -> tuple[list[WorkerResult], str | None, Snaps]:
        start_snap: tuple[str, float] | Literal[False] | None = None  # False: scraped, nothing came
        end_snap: tuple[str, float] | Literal[False] | None = None
        aborted: str | None = None
        ws = None
        resumed: float | None = None  # when this loop last woke from a suspension (see SUSPENDED_S)
        self._suspended = 0.0  # seconds of this process's own suspensions inside the measured window
        while not all(w.done() for w in workers):
            now = self.clock()
            ws = coord.poll(now)
            if aborted is None and dead.is_set():
                aborted = SERVER_DIED
                coord.stop()
            if aborted is None and (hung := self._hung(coord, now, window, resumed)):
                aborted = hung
                coord.stop()
            if ws is not None and now >= ws and start_snap is None:
                start_snap = await self._snapshot(metrics) or False
            if aborted is None and self._decided(coord, now, ws, window):
                end_snap = await self._snapshot(metrics) or False
            if ws is not None and now >= ws + window.measure_seconds and end_snap is None and start_snap is not None:
                end_snap = await self._snapshot(metrics) or False
            nxt = min(0.05, coord.next_edge(now) - now)
            if ws is not None:
                for edge in (ws, ws + window.measure_seconds):
                    if edge > now:
                        nxt = min(nxt, edge - now)
            asked, before = max(0.001, nxt), self.clock()
            await asyncio.wait(workers, timeout=asked)
            if self.clock() - before - asked > SUSPENDED_S:
                resumed = self.clock()
                if ws is not None:  # the part of the pause inside the measured window
                    self._suspended += max(0.0, min(resumed, ws + window.measure_seconds) - max(before + asked, ws))
        if end_snap is None and start_snap:
            end_snap = await self._snapshot(metrics)
        ws = coord.window_start()
        results = []
        for w in workers:
            exc = w.exception()
            if exc is not None:
                raise exc
            results.append(w.result())
        names = metrics.dialect if metrics is not None else None  # the probe's engine's metric names
        start, end = _parsed(start_snap or None, names), _parsed(end_snap or None, names)  # the streams are done
        return results, aborted, (start, end, ws if ws is not None else float("nan"))

    async def _watch_alive(self, handle: ServerHandle, dead: asyncio.Event) -> None:
        """Call alive() every alive_interval_s in a thread of its own; set `dead` at the first False.

        Never on the event loop: the loop reads every stream's chunks, and a check that blocks it (attach
        mode asks the server over HTTP; SGLang's /health even runs a generation) would delay them all.
        One dedicated thread, so the executor that waits on client processes cannot starve it.
        """
        assert self.alive is not None
        alive = self.alive
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-alive")
        try:
            while True:
                if not await loop.run_in_executor(pool, alive, handle):
                    dead.set()
                    return
                await asyncio.sleep(self.alive_interval_s)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a check in flight ends on its own timeout

    async def _run_procs(self, handle: ServerHandle, plans: list[Plan], ctx: SpawnContext, coord: SharedCoord,
                         window: Window, metrics: MetricsProbe | None,
                         handover: Handover | None) -> tuple[list[WorkerResult], str | None, Snaps, float]:
        """Spawn one process per plan, start them all at one t0, supervise, gather their pickled results (and, for
        a streamed window, their batches of ended requests while they run, into `handover`)."""
        pipes, procs = [], []
        for plan in plans:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_child, args=(plan, coord, child), daemon=True)
            proc.start()
            child.close()
            pipes.append(parent)
            procs.append(proc)
        loop = asyncio.get_running_loop()
        try:
            for conn in pipes:  # the start barrier: every child has imported and built its client
                ready = await asyncio.wait_for(loop.run_in_executor(None, conn.recv), timeout=120.0)
                assert ready == "ready", ready
            t0 = self.clock() + START_MARGIN_S
            coord.begin(t0)
            for conn in pipes:
                conn.send(t0)
            put = handover.put if handover is not None else None
            waits = [loop.run_in_executor(None, receive, conn, put, WorkerResult) for conn in pipes]
            results, aborted, snaps = await self._supervise(handle, coord, waits, window, metrics)
        finally:
            for proc in procs:
                proc.join(timeout=5.0)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
            for conn in pipes:
                conn.close()
        for r in results:
            if r.error:
                raise RuntimeError(f"client process failed: {r.error}")
        return results, aborted, snaps, t0

    def _decided(self, coord: Coord, now: float, ws: float | None, window: Window) -> bool:
        """Whether the early-stop test decided the window at now (it then ends there: Coord.end_early)."""
        if self._early is None or self._stopped is not None or ws is None:
            return False
        if not ws <= now < ws + window.measure_seconds or now < self._next_check:
            return False
        self._next_check = now + EARLY_CHECK_S
        verdict = self._early.check(now, ws, _in_flight(coord))
        if verdict is None:
            return False
        self._stopped = verdict.text()
        coord.end_early(now)
        return True

    def _hung(self, coord: Coord, now: float, window: Window, resumed: float | None = None) -> str | None:
        """The no-progress deadline: nothing from the server for stall_timeout_s (at most half the request
        timeout, so a lone request cannot time out first and hide it) while requests are in flight. Only silence
        this process saw counts: after a suspension (`resumed`: a gap in this loop's own ticks) the clock
        restarts, so a worker frozen for longer than the deadline does not take its own pause for a hung server."""
        if self.stall_timeout_s is None:
            return None
        limit = min(self.stall_timeout_s, window.request_timeout_s / 2)
        silent, in_flight = coord.stalled_for(now)
        if resumed is not None:
            silent = min(silent, now - resumed)
        if silent < limit:
            return None
        return f"hung: no response bytes for {silent:.0f} s while {in_flight} request(s) were in flight"

    async def _snapshot(self, metrics: MetricsProbe | None) -> tuple[str, float] | None:
        """The /metrics text and its time, parsed only after the window (a full parse stalls the loop ~50 ms)."""
        if metrics is None:
            return None
        try:
            text, t = await metrics.fetch()
            return str(text), float(t)
        except Exception:  # noqa: BLE001 - a failed scrape leaves counters empty, measure copes
            return None

    def _merge(self, results: list[WorkerResult], records: list[RequestRecord], samples: list[Sample], snaps: Snaps,
               ws: float, concurrency: int, window: Window, aborted: str | None, simulated: bool,
               opened: tuple[str, int, float] | None, early: float | None = None) -> WindowResult:
        from sweep.analysis.server_metrics import histogram_delta, histogram_samples

        start_snap, end_snap, _ = snaps
        we = ws + window.measure_seconds if early is None else min(ws + window.measure_seconds, early)
        records = sorted(records, key=lambda r: r.scheduled_at)
        client = tuple(ClientSamples(r.dispatch_lags, r.cap_waits, r.ticks, r.max_in_flight_seen) for r in results)
        counters_start = dict(start_snap.counters) if start_snap is not None else {}
        counters_end = dict(end_snap.counters) if end_snap is not None else {}
        hist = histogram_delta(start_snap, end_snap, "time_to_first_token_seconds") \
            if start_snap is not None and end_snap is not None else []
        samples = samples + histogram_samples(start_snap, end_snap, we)
        return WindowResult(
            concurrency=concurrency, records=records, samples=samples, window_start=ws, window_end=we,
            warmup_requests=opened[1] if opened else 0, warmup_seconds=opened[2] if opened else 0.0,
            window_opened_by=opened[0] if opened else None, counters_start=counters_start, counters_end=counters_end, ttft_histogram=hist, client=client,
            simulated=simulated, aborted=aborted, suspended_s=self._suspended, stopped_early=self._stopped)


def _in_flight(coord: Coord) -> Iterator[RequestRecord]:
    """The window's requests in flight, read only when iterated: EarlyStop.check reads its ended counts first."""
    yield from coord.running()


def _watched(sink: RecordSink | None, early_stop: EarlyStop) -> RecordSink:
    """`sink` (or none) with every ended request handed to `early_stop` first."""

    def watched(rec: RequestRecord, start: float, end: float) -> None:
        early_stop.ended(rec)
        if sink is not None:
            sink(rec, start, end)

    return watched


def _parsed(raw: tuple[str, float] | None, names: MetricNames | None = None) -> MetricsSnapshot | None:
    """A MetricsSnapshot of a fetched /metrics text (None when there is none or it does not parse)."""
    if raw is None:
        return None
    from sweep.analysis.server_metrics import parse_metrics

    try:
        snap = parse_metrics(raw[0], names)
    except Exception:  # noqa: BLE001 - an unparsable scrape leaves counters empty, measure copes
        return None
    snap.t = raw[1]
    return snap


def _child(plan: Plan, coord: SharedCoord, conn: Connection) -> None:
    """Spawned client process: report ready, wait for t0, run the worker, send back the pickled result (a streamed
    window: its batches of ended requests first, while it runs)."""
    sender = Sender(conn) if plan.batch else None
    try:
        if isinstance(plan.specs, StreamView):  # encode the media pool before the start barrier, not in the window
            warm_media_pool(plan.specs.workload, plan.specs.pool_size)
        conn.send("ready")
        t0 = conn.recv()
        result = run_loop(run_worker(plan, coord, t0, emit=sender.put if sender is not None else None))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never silently lost
        result = WorkerResult([], np.zeros(0), np.zeros(0), np.zeros((0, 3)), error=f"{type(exc).__name__}: {exc}")
    if sender is not None:
        sender.close()
    conn.send(result)
    conn.close()
