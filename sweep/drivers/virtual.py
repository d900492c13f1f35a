"""Virtual-time driver: closed-loop or open-loop simulated clients against the in-process simulator Engine."""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from sglang_sim.engine import Engine, SimRequest
from sglang_sim.media import audio_tokens, image_tokens, placeholder_ids, video_tokens
from sweep.analysis.early_stop import EarlyStop
from sweep.analysis.server_metrics import buckets_as_samples
from sweep.core import interrupt
from sweep.core.errors import WorkloadError
from sweep.core.types import CUT, UNSENT, RecordSink, RequestRecord, RequestSpec, Sample, WindowResult
from sweep.drivers.arrivals import step_schedule
from sweep.drivers.coord import Coord
from sweep.drivers.virtual_sessions import SessionUsers
from sweep.launchers.base import ServerHandle
from sweep.profile import ArrivalProcess, Window
from sweep.profile.warmup import WarmupRule
from sweep.workload.requests import estimated_prompt_tokens
from sweep.workload.sessions import SessionStream
from sweep.workload.stream import Requests, spec_at

GAUGES = ("num_running_reqs", "num_queue_reqs", "token_usage", "cache_hit_rate", "num_retracted_reqs",
          "gen_throughput", "new_token_ratio")
COUNTERS = ("prompt_tokens_total", "generation_tokens_total", "cached_tokens_total", "num_requests_total",
            "num_retracted_requests_total")
BUILT_KEPT = 2048  # built requests kept for reuse: a cycling list of specs hits them, a stream's never come back


def spec_to_request(spec: RequestSpec, rid: str, streaming: bool = True) -> SimRequest:
    """The LLM-side view of a spec: text ids followed by media placeholders, and media token counts."""
    ids = list(spec.input_ids)
    media: dict[str, int] = {}
    for item in spec.media:
        key = item.data_urls[0][-256:] if item.data_urls else f"{spec.index}"
        if item.kind == "image":
            n = sum(image_tokens(item.width or 448, item.height or 448) for _ in item.data_urls or ("",))
        elif item.kind == "video":
            n = video_tokens(max(1, len(item.data_urls)), item.width or 336, item.height or 336)
        else:
            n = audio_tokens(item.seconds or 5.0)
        media[item.kind] = media.get(item.kind, 0) + n
        ids += placeholder_ids(n, key)
    return SimRequest(rid, tuple(ids), spec.output_tokens, media, streaming=streaming)


def chunk_record(times: list[float], per_chunk: int) -> tuple[list[float], list[int]]:
    """Token arrival times grouped as a server with --stream-interval per_chunk would send them."""
    if per_chunk <= 1 or len(times) <= 1:
        return times, [1] * len(times)
    ct, tk = [times[0]], [1]  # the first token always travels alone
    for i in range(1, len(times), per_chunk):
        group = times[i:i + per_chunk]
        ct.append(group[-1])
        tk.append(len(group))
    return ct, tk


class VirtualDriver:
    """Runs a ladder step in simulated time; computes no statistics, only records what clients saw."""

    simulated = True

    def __init__(self, sample_interval_s: float = 1.0, stream_interval: int | None = None, seed: int = 0):
        self.sample_interval_s = sample_interval_s
        self.stream_interval = stream_interval
        self.seed = seed
        self._windows = itertools.count()
        self._window: tuple[Engine, float] | None = None  # the running window's engine and its start

    def window_elapsed(self) -> float | None:
        """Simulated seconds into the current window (None between windows): progress runs on this clock."""
        current = self._window
        return None if current is None else current[0].now - current[1]

    def flush_cache(self, handle: ServerHandle) -> str | None:
        """Empty the engine's radix cache, as POST /flush_cache does; None when done, else why not."""
        eng: Engine | None = handle.engine
        if eng is None:
            return "no engine"
        return None if eng.flush_cache() else "the engine still holds requests"

    streams = True  # run_window takes a sink (sweep.ladder.recorder): each ended request is handed over at once

    def run_window(self, handle: ServerHandle, specs: Requests, concurrency: int,
                   window: Window, arrival: ArrivalProcess | None = None,
                   sink: RecordSink | None = None, early_stop: EarlyStop | None = None) -> WindowResult:
        """Closed loop (`concurrency` users) or, for an open-loop arrival, sends at the scheduled times.

        With `sink`, every request that ended is handed to it with the measured window's [start, end) as soon as
        both are known (a session's requests once the session ended: its end labels its turns).

        Open loop: the schedule is arrival.schedule(window, seed, concurrency); a request over
        max_in_flight waits for a slot (scheduled_at stays the scheduled time, sent_at is the real send).
        window_elapsed() follows the window's simulated clock meanwhile.

        With `early_stop`, every ended request goes to it, and the window's requests still running are checked with it
        at every turn of the loop (at least every sample_interval_s): once it decides, the window ends there and what
        still runs is cut.
        """
        eng = handle.engine
        if eng is None or not specs:
            raise ValueError("VirtualDriver needs handle.engine and at least one RequestSpec")
        # tokens per streamed chunk: the launched server's --stream-interval unless the driver was given one
        interval = handle.server_info.get("stream_interval")
        per_chunk = self.stream_interval or (int(interval) if isinstance(interval, int | float | str) and interval else 1)
        run = _WindowRun(eng, specs, concurrency, window, arrival, per_chunk, wid=next(self._windows),
                         seed=self.seed, sample_interval_s=self.sample_interval_s)
        run.sink = sink
        run.early_stop = early_stop
        self._window = (eng, run.start)
        try:
            return run.run()
        finally:
            self._window = None


class _WindowRun:
    """One window's simulated clients: who is in flight, what is scheduled, and the window's marks."""

    def __init__(self, eng: Engine, specs: Requests, concurrency: int, window: Window, arrival: ArrivalProcess | None,
                 per_chunk: int, wid: int, seed: int, sample_interval_s: float):
        self.eng, self.specs, self.concurrency, self.window = eng, specs, concurrency, window
        self.per_chunk, self.wid, self.sample_interval_s = per_chunk, wid, sample_interval_s
        self.sim_mem = float(eng.cfg.extra.get("sim_gpu_memory_used_mib", 0.0))
        self.start = start = eng.now
        self.built: dict[int, SimRequest] = {}  # recently built requests by spec index (a list of specs cycles)
        self.records: list[RequestRecord] = []
        self.samples: list[Sample] = []
        self.in_flight: dict[str, tuple[RequestRecord, float]] = {}
        self.deadlines: list[tuple[float, str]] = []
        self.k = 0  # requests taken from the stream so far
        self.counters_start: dict[str, float] = {}
        self.counters_end: dict[str, float] = {}
        self.hist_start: list[tuple[float, float]] = []
        self.hist_end: list[tuple[float, float]] = []
        sched = step_schedule(arrival, window, seed, concurrency, specs) if arrival is not None else None
        self.open_loop = sched is not None
        self.sched: list[float] = []  # open loop: absolute scheduled times, in send order
        self.nxt = 0  # next scheduled request to release
        self.waiting: deque[float] = deque()  # released but over the in-flight cap: their scheduled times
        self.cap = sched.max_in_flight if sched is not None else 1 << 30
        if sched is not None:
            self.sched = (start + sched.offsets).tolist()
        # the measured window [ws, we) opens when the warm-up ends (sweep.profile.warmup); the closed loop's users all
        # send their first request at the start, so its load is reached there
        self.coord = Coord(sched.warmup if sched is not None else WarmupRule.closed(window, concurrency, 0))
        self.coord.begin(start)
        self.next_sample = start
        self.steps = 0
        self.users: SessionUsers | None = None
        if isinstance(specs, SessionStream):
            if self.open_loop:
                raise WorkloadError("sessions under an open-loop arrival run on the HTTP driver only "
                                    "(--driver http); the virtual driver runs them closed-loop")
            self.users = SessionUsers(self, spec_to_request)
        self.sink: RecordSink | None = None
        self.ended: list[RequestRecord] = []  # ended before the window's start was known: handed over once it is
        self.early_stop: EarlyStop | None = None
        self.stopped: tuple[float, str] | None = None  # (when, why) the window stopped early

    @property
    def ws(self) -> float | None:
        return self.coord.window_start()

    @property
    def we(self) -> float:
        if self.stopped is not None:
            return self.stopped[0]
        ws = self.coord.window_start()
        return float("inf") if ws is None else ws + self.window.measure_seconds

    # ---- clients
    def dispatch(self, t: float, at: float | None = None) -> None:
        """Send the stream's next request at t (scheduled at `at` in open loop)."""
        # a dataset without replay that runs out stops the study (StreamExhausted)
        spec = spec_at(self.specs, self.k)
        proto = self.built.get(spec.index)
        if proto is None:
            proto = self.built[spec.index] = spec_to_request(spec, "")
            if len(self.built) > BUILT_KEPT:  # a stream's indexes never come back: keep the window's memory flat
                del self.built[next(iter(self.built))]
        rid = self.next_rid(t)
        self.submit(SimRequest(rid, proto.input_ids, proto.max_new_tokens, proto.media_tokens), spec, t,
                    t if at is None else at)
        self.settle(rid, t)

    def next_rid(self, t: float) -> str:
        """A fresh request id for a send at t."""
        rid = f"v{self.wid}-{self.k}"
        self.k += 1
        return rid

    def submit(self, sr: SimRequest, spec: RequestSpec, t: float, scheduled: float) -> RequestRecord:
        """Submit one request to the engine at t and record it (in flight until close)."""
        r = self.eng.submit(sr, t)
        rec = RequestRecord(index=spec.index, concurrency=self.concurrency, scheduled_at=scheduled, sent_at=t,
                            prompt_tokens=r.prompt_len, modality=spec.modality, warmup=self.coord.claim(scheduled),
                            sent_prompt_tokens=estimated_prompt_tokens(spec), sent_output_tokens=spec.output_tokens)
        self.records.append(rec)
        self.in_flight[sr.rid] = (rec, t)
        heapq.heappush(self.deadlines, (t + self.window.request_timeout_s, sr.rid))
        return rec

    def settle(self, rid: str, t: float) -> None:
        """A request the engine refused at once (too long) is closed at once; its session hears of it."""
        r = self.eng.reqs.get(rid)
        if r is not None and rid in self.in_flight and r.status in ("finished", "aborted"):
            self.close(rid, t)
            if self.users is not None:
                self.users.ended(rid, t)

    def close(self, rid: str, t: float, error: str | None = None, kind: str | None = None) -> None:
        """Record what the client saw of a request that ended (finished, aborted or given up on)."""
        eng = self.eng
        rec, _ = self.in_flight.pop(rid)
        self.coord.done(0, t)  # one more completion: it may end the warm-up
        r = eng.reqs[rid]
        times = eng.token_times(r)
        rec.chunk_times, rec.chunk_tokens = chunk_record(times, self.per_chunk)
        rec.first_token_at = times[0] if times else None
        rec.output_tokens = len(times)
        rec.cached_tokens = r.cached_tokens
        rec.num_retractions = r.num_retractions
        if error is None and r.status == "aborted":
            error, kind = str((r.finish_reason or {}).get("message", "aborted")), "server_error"
        if error is None:
            rec.finished_at = r.finished_at
        rec.error, rec.error_kind = error, kind
        eng.forget(rid)
        if self.early_stop is not None:
            self.early_stop.ended(rec)
        if self.users is None:  # a session's requests are handed over when the session ends (SessionUsers)
            self.hand_over(rec)

    def hand_over(self, rec: RequestRecord | None = None) -> None:
        """Give the sink an ended record (and those that waited for the window's start) once [ws, we) is known."""
        if self.sink is None:
            return
        if rec is not None:
            self.ended.append(rec)
        if self.ws is not None:
            for r in self.ended:
                self.sink(r, self.ws, self.we)
            self.ended.clear()

    def release(self, now: float) -> None:
        """Open loop: queue every request scheduled by now; send what the in-flight cap allows."""
        while self.nxt < len(self.sched) and self.sched[self.nxt] <= now and self.sched[self.nxt] < self.we:
            self.waiting.append(self.sched[self.nxt])
            self.nxt += 1
        while self.waiting and len(self.in_flight) < self.cap:
            self.dispatch(now, self.waiting.popleft())

    def replace_user(self, t: float, rid: str) -> None:
        """Closed loop: a user whose request ended sends the next one while the window lasts (a session's user
        goes on with its session: sweep.drivers.virtual_sessions)."""
        if self.users is not None:
            self.users.ended(rid, t)
        elif t < self.we and not self.open_loop:
            self.dispatch(t)

    # ---- the window's marks and probes
    def _snapshot(self) -> tuple[dict[str, float], list[tuple[float, float]]]:
        return self.eng.counter_values(), self.eng.hist["time_to_first_token_seconds"].cumulative()

    def mark(self, now: float) -> None:
        """Open the window when its warm-up's time has come (sweep.profile.warmup: a completion opens it in close);
        read the counters at the window's start and end. A closed loop's warm-up ends by its count however long that
        takes (every request ends by its timeout, and its user sends the next)."""
        self.coord.poll(now)
        if self.ws is None and not self.open_loop and not self.in_flight:
            # every user's request was refused at once (none replaces it): no warm-up is coming
            self.coord.open_now(now)
        if self.ws is not None and not self.counters_start and now >= self.ws:
            self.counters_start, self.hist_start = self._snapshot()
        if not self.counters_end and now >= self.we:
            self.counters_end, self.hist_end = self._snapshot()

    def sample(self, now: float) -> None:
        """The gauges (and the simulated GPU memory) every sample_interval_s of simulated time."""
        while self.next_sample <= now:
            g, t = self.eng.gauges, self.next_sample
            self.samples += [Sample(t, "metrics", name, float(g.get(name, 0.0))) for name in GAUGES]
            self.samples.append(Sample(t, "gpu", "gpu_mem_used_mib", self.sim_mem, "gpu=0,simulated=1"))
            self.next_sample += self.sample_interval_s

    def expire(self, now: float) -> None:
        """Abort every request past its timeout (a closed-loop user then sends its next one)."""
        deadlines = self.deadlines
        while deadlines and (deadlines[0][0] <= now or deadlines[0][1] not in self.in_flight):
            _, rid = heapq.heappop(deadlines)
            if rid in self.in_flight:
                self.eng.abort(rid)
                self.close(rid, now, f"no response within {self.window.request_timeout_s}s", "timeout")
                self.replace_user(now, rid)

    def horizon(self, now: float) -> float:
        """The next simulated time something happens outside the engine: sample, deadline, mark or send."""
        inf = float("inf")
        ws, we = self.ws, self.we
        deadline = self.deadlines[0][0] if self.deadlines else inf
        send = self.sched[self.nxt] if self.nxt < len(self.sched) and self.sched[self.nxt] < we else inf
        think = self.users.next_timer() if self.users is not None else inf
        return min(self.next_sample, deadline, we + self.window.drain_seconds, we if now < we else inf,
                   ws if ws is not None and now < ws else inf, send, think, self.coord.next_edge(now))

    def running(self, now: float) -> list[RequestRecord]:
        """The window's requests still in flight at now, each with its first token's time where the engine already
        sent it (a record gets its token times only when it ends: without this, a request still decoding would look
        as if it had no first token yet, and count over the TTFT bound once older than it)."""
        out = []
        for rid, (rec, _) in self.in_flight.items():
            r = self.eng.reqs.get(rid)
            if rec.first_token_at is None and r is not None and r.first_token_at is not None \
                    and r.first_token_at <= now:
                rec.first_token_at = r.first_token_at
            out.append(rec)
        return out

    def decide(self, now: float) -> None:
        """Stop the window at now when its early-stop test decides that the step cannot pass."""
        ws = self.ws
        if self.early_stop is None or self.stopped is not None or ws is None or not ws <= now < self.we:
            return
        verdict = self.early_stop.check(now, ws, self.running(now))
        if verdict is not None:
            self.stopped = (now, verdict.text())

    def over(self, now: float) -> bool:
        """Past the window, with nothing left to wait for or the drain grace spent (a window stopped early: at once)."""
        if self.stopped is not None:
            return True
        idle = not self.in_flight and not self.waiting and (self.nxt >= len(self.sched) or self.sched[self.nxt] >= self.we)
        return now >= self.we and (idle or now >= self.we + self.window.drain_seconds)

    # ---- the loop
    def run(self) -> WindowResult:
        eng = self.eng
        if not self.open_loop:
            for _ in range(self.concurrency):
                self.users.start(self.start) if self.users is not None else self.dispatch(self.start)
        while True:
            # a Ctrl-C raised inside a weakref callback of this loop's garbage was swallowed: raise it here
            interrupt.check()
            now = eng.now
            if self.open_loop:
                self.release(now)
            if self.users is not None:
                self.users.fire(now)
            self.mark(now)
            self.sample(now)
            self.expire(now)
            self.decide(now)
            if self.open_loop and self.stopped is None:
                self.release(now)
            if self.over(now):
                break
            until = self.horizon(now)
            if not eng.has_work():
                eng.idle_until(until)
                continue
            res = eng.step(now, until=until)
            self.steps += res.n_steps
            for rid in res.finished:
                if rid in self.in_flight:
                    self.close(rid, res.end)
                    self.replace_user(res.end, rid)
            if self.open_loop:
                self.release(res.end)
        self.give_up()
        return self.result()

    def give_up(self) -> None:
        """After the drain: abort what still runs (cut by the window's edge, not a server error); one scheduled in
        the window but never sent is a miss (an error)."""
        for rid in list(self.in_flight):
            self.eng.abort(rid)
            why = ("still running when the window stopped early" if self.stopped is not None else
                   f"still running {self.window.drain_seconds}s after the window")
            self.close(rid, self.eng.now, why, CUT)
        for at in [*self.waiting, *self.sched[self.nxt:]]:
            if at < self.we:
                spec = spec_at(self.specs, self.k)
                self.k += 1
                missed = RequestRecord(
                    index=spec.index, concurrency=self.concurrency, scheduled_at=at, sent_at=at,
                    prompt_tokens=spec.prompt_tokens, modality=spec.modality,
                    sent_prompt_tokens=estimated_prompt_tokens(spec), sent_output_tokens=spec.output_tokens,
                    warmup=self.coord.claim(at), error="never sent: the in-flight cap stayed full",
                    error_kind=UNSENT)
                if self.stopped is not None:  # the window's early stop cut it, not the cap
                    missed.error, missed.error_kind = "not sent: the window stopped early", CUT
                self.records.append(missed)
                self.hand_over(missed)

    def result(self) -> WindowResult:
        ws, we = self.ws, self.we
        assert ws is not None
        if self.users is not None:
            self.users.end_all()
        self.hand_over()
        if not self.counters_end:
            self.counters_end, self.hist_end = self._snapshot()
        hist_delta = [(le, c1 - c0) for (le, c1), (_, c0) in
                      zip(self.hist_end, self.hist_start or [(0, 0.0)] * len(self.hist_end), strict=True)]
        samples = self.samples + buckets_as_samples("time_to_first_token_seconds", hist_delta, we)
        opened = self.coord.opened()
        assert opened is not None
        return WindowResult(
            concurrency=self.concurrency, records=self.records, samples=samples, window_start=ws,
            window_end=we, warmup_requests=opened[1], warmup_seconds=opened[2], window_opened_by=opened[0],
            counters_start={k: self.counters_start.get(k, 0.0) for k in COUNTERS},
            counters_end={k: self.counters_end.get(k, 0.0) for k in COUNTERS},
            ttft_histogram=hist_delta, engine_steps=self.steps, simulated=True,
            stopped_early=self.stopped[1] if self.stopped is not None else None)
