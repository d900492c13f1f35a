"""Virtual-time driver: closed-loop or open-loop simulated clients against the in-process simulator Engine."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Any

from launchers.base import ServerHandle
from sglang_sim.engine import Engine, SimRequest
from sglang_sim.media import audio_tokens, image_tokens, placeholder_ids, video_tokens
from sweep import interrupt
from sweep.drivers import arrivals
from sweep.probes import buckets_as_samples
from sweep.profile import Window
from sweep.stream import Requests, spec_at
from sweep.types import RequestRecord, RequestSpec, Sample, WindowResult
from sweep.workload import estimated_prompt_tokens

GAUGES = ("num_running_reqs", "num_queue_reqs", "token_usage", "cache_hit_rate", "num_retracted_reqs",
          "gen_throughput", "new_token_ratio")
COUNTERS = ("prompt_tokens_total", "generation_tokens_total", "cached_tokens_total", "num_requests_total",
            "num_retracted_requests_total")


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

    def run_window(self, handle: ServerHandle, specs: Requests, concurrency: int,
                   window: Window, arrival: Any = None) -> WindowResult:
        """One window in simulated time; window_elapsed() follows its clock meanwhile."""
        eng = handle.engine
        self._window = (eng, eng.now) if eng is not None else None
        try:
            return self._run_window(handle, specs, concurrency, window, arrival)
        finally:
            self._window = None

    def _run_window(self, handle: ServerHandle, specs: Requests, concurrency: int,
                    window: Window, arrival: Any = None) -> WindowResult:
        """Closed loop (`concurrency` users) or, for an open-loop arrival, sends at the scheduled times.

        Open loop: the schedule is arrivals.plan(arrival, window, seed, concurrency); a request over
        max_in_flight waits for a slot (scheduled_at stays the scheduled time, sent_at is the real send).
        """
        eng = handle.engine
        if eng is None or not specs:
            raise ValueError("VirtualDriver needs handle.engine and at least one RequestSpec")
        sim_mem = float(eng.cfg.extra.get("sim_gpu_memory_used_mib", 0.0))
        # tokens per streamed chunk: the launched server's --stream-interval unless the driver was given one
        per_chunk = self.stream_interval or int((handle.server_info or {}).get("stream_interval") or 1)
        wid = next(self._windows)
        start = eng.now
        built: dict[int, SimRequest] = {}
        records: list[RequestRecord] = []
        samples: list[Sample] = []
        in_flight: dict[str, tuple[RequestRecord, float]] = {}
        deadlines: list[tuple[float, str]] = []
        k = 0
        ws: float | None = start + window.warmup_seconds if window.warmup_requests == 0 else None
        we = ws + window.measure_seconds if ws is not None else float("inf")
        counters_start: dict[str, float] = {}
        counters_end: dict[str, float] = {}
        hist_start: list[tuple[float, float]] = []
        hist_end: list[tuple[float, float]] = []
        warm_cap = start + window.warmup_seconds + window.request_timeout_s  # warm-up that never ends
        open_loop = arrivals.is_open(arrival)
        sched: list[float] = []  # open loop: absolute scheduled times, in send order
        nxt = 0  # next scheduled request to release
        waiting: deque[float] = deque()  # released but over the in-flight cap: their scheduled times
        cap = arrivals.cap_for(arrival)
        if open_loop:
            offs, ws_off, _ = arrivals.plan(arrival, window, self.seed, concurrency)
            sched = (start + offs).tolist()
            ws, we = start + ws_off, start + ws_off + window.measure_seconds
            warm_cap = float("inf")
        next_sample = start
        steps = 0

        def dispatch(t: float, at: float | None = None) -> None:
            nonlocal k, ws, we
            spec = spec_at(specs, k)  # a dataset without replay that runs out stops the study (StreamExhausted)
            proto = built.get(spec.index)
            if proto is None:
                proto = built[spec.index] = spec_to_request(spec, "")
            if ws is None and k >= window.warmup_requests:
                ws = max(start + window.warmup_seconds, t)
                we = ws + window.measure_seconds
            scheduled = t if at is None else at
            warm = ws is None or scheduled < ws
            rid = f"v{wid}-{k}"
            k += 1
            r = eng.submit(SimRequest(rid, proto.input_ids, proto.max_new_tokens, proto.media_tokens), t)
            rec = RequestRecord(index=spec.index, concurrency=concurrency, scheduled_at=scheduled, sent_at=t,
                                prompt_tokens=r.prompt_len, modality=spec.modality, warmup=warm,
                                sent_prompt_tokens=estimated_prompt_tokens(spec),
                                sent_output_tokens=spec.output_tokens)
            records.append(rec)
            in_flight[rid] = (rec, t)
            heapq.heappush(deadlines, (t + window.request_timeout_s, rid))
            if r.status in ("finished", "aborted"):
                close(rid, t)

        def close(rid: str, t: float, error: str | None = None, kind: str | None = None) -> None:
            rec, _ = in_flight.pop(rid)
            r = eng.reqs[rid]
            times = eng.token_times(r)
            rec.chunk_times, rec.chunk_tokens = chunk_record(times, per_chunk)
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

        def release(now: float) -> None:
            """Open loop: queue every request scheduled by now; send what the in-flight cap allows."""
            nonlocal nxt
            while nxt < len(sched) and sched[nxt] <= now:
                waiting.append(sched[nxt])
                nxt += 1
            while waiting and len(in_flight) < cap:
                dispatch(now, waiting.popleft())

        if not open_loop:
            for _ in range(concurrency):
                dispatch(start)
        while True:
            interrupt.check()  # a Ctrl-C raised inside a weakref callback of this loop's garbage was swallowed
            now = eng.now
            if open_loop:
                release(now)
            if ws is None and now >= warm_cap:
                ws, we = now, now + window.measure_seconds
            if ws is not None and not counters_start and now >= ws:
                counters_start, hist_start = eng.counter_values(), eng.hist["time_to_first_token_seconds"].cumulative()
            if not counters_end and now >= we:
                counters_end, hist_end = eng.counter_values(), eng.hist["time_to_first_token_seconds"].cumulative()
            while next_sample <= now:
                g = eng.gauges
                samples += [Sample(next_sample, "metrics", name, float(g.get(name, 0.0))) for name in GAUGES]
                samples.append(Sample(next_sample, "gpu", "gpu_mem_used_mib", sim_mem, "gpu=0,simulated=1"))
                next_sample += self.sample_interval_s
            while deadlines and (deadlines[0][0] <= now or deadlines[0][1] not in in_flight):
                _, rid = heapq.heappop(deadlines)
                if rid in in_flight:
                    eng.abort(rid)
                    close(rid, now, f"no response within {window.request_timeout_s}s", "timeout")
                    if now < we and not open_loop:
                        dispatch(now)
            if open_loop:
                release(now)
            drain_end = we + window.drain_seconds
            if now >= we and ((not in_flight and not waiting and nxt >= len(sched)) or now >= drain_end):
                break
            horizon = min(next_sample, deadlines[0][0] if deadlines else float("inf"), drain_end,
                          we if now < we else float("inf"), ws if ws is not None and now < ws else float("inf"),
                          sched[nxt] if nxt < len(sched) else float("inf"))
            if not eng.has_work():
                eng.idle_until(horizon)
                continue
            res = eng.step(now, until=horizon)
            steps += res.n_steps
            for rid in res.finished:
                if rid in in_flight:
                    close(rid, res.end)
                    if res.end < we and not open_loop:
                        dispatch(res.end)
            if open_loop:
                release(res.end)
        for rid in list(in_flight):
            eng.abort(rid)
            close(rid, eng.now, f"still running {window.drain_seconds}s after the window", "timeout")
        for at in [*waiting, *sched[nxt:]]:  # scheduled in the window but never sent: they count as misses
            if at < we:
                spec = spec_at(specs, k)
                k += 1
                records.append(RequestRecord(index=spec.index, concurrency=concurrency, scheduled_at=at, sent_at=at,
                                             prompt_tokens=spec.prompt_tokens, modality=spec.modality,
                                             sent_prompt_tokens=estimated_prompt_tokens(spec),
                                             sent_output_tokens=spec.output_tokens,
                                             warmup=ws is None or at < ws, error="never sent: the in-flight cap stayed full",
                                             error_kind="drain_cutoff"))
        assert ws is not None
        if not counters_end:
            counters_end, hist_end = eng.counter_values(), eng.hist["time_to_first_token_seconds"].cumulative()
        hist_delta = [(le, c1 - c0) for (le, c1), (_, c0) in zip(hist_end, hist_start or [(0, 0.0)] * len(hist_end),
                                                                   strict=True)]
        samples = samples + buckets_as_samples("time_to_first_token_seconds", hist_delta, we)
        return WindowResult(
            concurrency=concurrency, records=records, samples=samples, window_start=ws, window_end=we,
            warmup_requests=window.warmup_requests, warmup_seconds=window.warmup_seconds,
            counters_start={k_: counters_start.get(k_, 0.0) for k_ in COUNTERS},
            counters_end={k_: counters_end.get(k_, 0.0) for k_ in COUNTERS},
            ttft_histogram=hist_delta, engine_steps=steps, simulated=True)
