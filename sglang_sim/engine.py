"""Continuous-batching engine modelled on SGLang's scheduler; pure Python, the caller supplies the clock."""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from typing import Any

from sglang_sim.cost import CostModel
from sglang_sim.drift import SpeedDrift
from sglang_sim.metrics import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS, Histogram, report_gauges
from sglang_sim.params import EngineKnobs, SimParams, resolve, with_knob_model
from sglang_sim.radix import RadixCache
from sglang_sim.request import Req, SimRequest, StepResult
from sglang_sim.schedule_policy import retract_decode, schedule_prefill

__all__ = ["Engine", "Req", "SimRequest", "StepResult"]

DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
REPORT_EVERY = 40  # --decode-log-interval: gauges refresh every 40 decode steps and on each prefill
COUNTERS = ("prompt_tokens_total", "generation_tokens_total", "cached_tokens_total", "num_requests_total")


class Engine:
    """SGLang-style scheduler: admission with new_token_ratio, chunked prefill, radix cache, retraction."""

    def __init__(self, params: SimParams, knobs: EngineKnobs | None = None, log: Callable[[str], None] | None = None,
                 seed: int = 0):
        self.knobs = knobs or EngineKnobs()
        self.params = params = with_knob_model(params, self.knobs)  # --tp-size, --kv-cache-dtype
        self.cfg = resolve(params, self.knobs)  # raises SimOOM like a server that cannot allocate its pool
        self.cost = CostModel(params, self.cfg.cuda_graph_max_bs)
        self.log = log or (lambda _msg: None)
        self.rng = random.Random(seed)
        self.drift = SpeedDrift(params.speed_drift_cv, params.speed_drift_period_s, seed)  # off unless asked for
        self.total = self.cfg.max_total_num_tokens
        self.tree = RadixCache(params.page_size, disabled=self.knobs.disable_radix_cache)
        self.init_ratio = min(0.7 * self.knobs.schedule_conservativeness, 1.0)
        self.min_ratio = self.init_ratio * 0.14
        self.decay = (self.init_ratio - self.min_ratio) / DECAY_STEPS
        self.ratio_anchor, self.anchor_step = self.init_ratio, 0  # ratio decays linearly from an anchor
        self.now = 0.0
        self.reqs: dict[str, Req] = {}
        self.waiting: list[Req] = []
        self.pending: list[tuple[float, int, Req]] = []  # submitted, still in the host stage (heap by ready_at)
        self.chunked: Req | None = None
        self.running: dict[str, Req] = {}
        self.dec_times: list[float] = []  # end time of every decode forward (the shared token timeline)
        self.fin_heap: list[tuple[int, int, int, Req]] = []
        self._seq = itertools.count()
        self.used_private = 0  # KV tokens held outside the tree (uncached suffixes, outputs)
        self.dec_ctx = 0  # sum of context lengths of decoding requests
        self.batch_is_full = False
        self.last_dec_end = 0.0
        self.joined: list[Req] = []  # joined decode since the last decode forward (ITL from first token)
        self.counters = {"num_retracted_requests_total": 0.0, "num_aborted_requests_total": 0.0}
        self.by_stream: dict[str, dict[bool, float]] = {k: {True: 0.0, False: 0.0} for k in COUNTERS}
        self.hist = {"time_to_first_token_seconds": Histogram(TTFT_BUCKETS),
                     "inter_token_latency_seconds": Histogram(ITL_BUCKETS),
                     "e2e_request_latency_seconds": Histogram(E2E_BUCKETS)}
        self.last_hit_rate = 0.0
        self.retracted_since_report = 0
        self.decoded_since_report = 0
        self.steps_since_report = 0
        self.report_t = 0.0
        self.gauges: dict[str, float] = {}
        self._report(0.0)

    # ---- client side -------------------------------------------------------------------------
    def submit(self, sr: SimRequest, now: float) -> Req:
        """Accept a request that arrived at `now`.

        The HTTP front runs the engine one step ahead of the wall clock (a step's tokens are computed, then
        slept for), so `now` can lie inside the step in progress. The arrival stays `now`: as in SGLang, the
        host stage (HTTP, tokenizer) overlaps the forward pass, and the scheduler takes the request at the
        first step boundary after it is ready. Clamping the arrival to the step's end would charge HTTP-mode
        requests up to one extra step that virtual mode, whose arrivals fall on step boundaries, never pays.
        """
        if sr.rid in self.reqs:
            raise ValueError(f"duplicate rid {sr.rid}")
        enc = sr.encoder_flops if sr.encoder_flops is not None else self.cost.encoder_flops(sr.media_tokens)
        r = Req(sr, now, enc, self.tree.pages(sr.input_ids))
        self.reqs[r.rid] = r
        max_req_len = min(self.cfg.context_len - 1, self.total - 1)
        if r.prompt_len >= max_req_len:
            self._close(r, r.arrival, {"type": "abort", "message": f"input length {r.prompt_len} exceeds limits"})
            return r
        r.max_new = min(r.max_new, max_req_len - r.prompt_len - 1) or 1  # SGLang clips max_new_tokens to fit
        media = sum(sr.media_tokens.values())
        host = self.cost.host_s + media * self.cost.media_host_s
        if self.cost.host_s_per_inflight:
            host += self.cost.host_s_per_inflight * self.inflight()
        r.ready_at = r.arrival + host
        if r.ready_at > r.arrival:
            heapq.heappush(self.pending, (r.ready_at, next(self._seq), r))
        else:
            self.waiting.append(r)
        return r

    def abort(self, rid: str) -> None:
        r = self.reqs.get(rid)
        if r is None or r.status in ("finished", "aborted"):
            return
        if r.status == "waiting":
            if r in self.waiting:
                self.waiting.remove(r)
            else:
                self.pending = [e for e in self.pending if e[2] is not r]
                heapq.heapify(self.pending)
        else:
            self.release(r, self.now)
            if self.chunked is r:
                self.chunked = None
        self.counters["num_aborted_requests_total"] += 1
        self._close(r, self.now, {"type": "abort", "message": "aborted by client"})

    def forget(self, rid: str) -> None:
        """Drop a closed request's bookkeeping (callers do this once they have read it)."""
        r = self.reqs.get(rid)
        if r is not None and r.status in ("finished", "aborted"):
            del self.reqs[rid]

    def inflight(self) -> int:
        """Requests submitted and not yet closed (host stage, queue, chunked prefill, decoding)."""
        return len(self.pending) + len(self.waiting) + len(self.running) + (self.chunked is not None)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked or self.pending)

    def _admit_ready(self, t: float) -> float:
        """Move requests whose host stage is over into the scheduler queue; return the next ready time."""
        p = self.pending
        while p and p[0][0] <= t:
            self.waiting.append(heapq.heappop(p)[2])
        return p[0][0] if p else float("inf")

    def output_len(self, r: Req) -> int:
        if r.status == "running":
            return r.out_base + len(self.dec_times) - r.seg_start
        return r.out_base

    def token_times(self, r: Req) -> list[float]:
        """Arrival time of every output token so far (first token first)."""
        times = list(r.extra_times)
        for a, b in r.segments + ([(r.seg_start, len(self.dec_times))] if r.status == "running" else []):
            times += self.dec_times[a:b]
        times.sort()
        return times

    # ---- the scheduler -----------------------------------------------------------------------
    def step(self, now: float, until: float = float("inf"), max_steps: int = 1 << 30) -> StepResult:
        """Run one prefill forward, or decode forwards until a finish, memory limit, `until` or max_steps."""
        t = max(now, self.now)
        res = StepResult(start=t)
        next_ready = self._admit_ready(t)
        batch = schedule_prefill(self, t) if (self.waiting or self.chunked) else None
        if batch:
            self._prefill(batch, t, res)
        elif self.running:
            # the real scheduler polls for new requests every step: stop the run at the step a request arrives
            self._decode(t, min(until, next_ready), max_steps, res)
        elif next_ready < float("inf"):
            res.duration = max(0.0, min(next_ready, until) - t)  # idle GPU while the host stage finishes
        else:
            self.set_ratio(self.init_ratio)  # idle: the tracker resets
            if self.gauges.get("num_running_reqs") or self.gauges.get("gen_throughput"):
                self._report(t)
        self.now = t + res.duration
        return res

    def idle_until(self, t: float) -> None:
        """Let simulated time pass with nothing to run."""
        if not self.has_work() and t > self.now:
            self.step(t)

    @property
    def ratio(self) -> float:
        """new_token_ratio, computed from decode steps since its anchor so skipped steps decay it exactly."""
        return max(self.ratio_anchor - self.decay * (len(self.dec_times) - self.anchor_step), self.min_ratio)

    def set_ratio(self, value: float) -> None:
        self.ratio_anchor, self.anchor_step = value, len(self.dec_times)

    def avail(self) -> int:
        """KV tokens a new request could use: free plus evictable cached ones."""
        return self.total - self.used_private - self.tree.total_tokens + self.tree.evictable_tokens

    def _alloc(self, n: int) -> None:
        free = self.total - self.used_private - self.tree.total_tokens
        if free < n:
            self.tree.evict(n - free)
        self.used_private += n

    def _prefill(self, batch: list[tuple[Req, int]], t: float, res: StepResult) -> None:
        ext_total = attn = touched = enc = 0.0
        cached = new = 0
        for r, take in batch:
            if r.done == r.prefix:  # first chunk of this round: report its cache hit
                cached += r.prefix
                new += r.seq_len - r.prefix
            ext_total += take
            attn += take * (r.done + take / 2)
            touched += r.done + take
            if r.enc_pending:
                enc += r.enc_flops
                r.enc_pending = False
            self._alloc(take)
            r.private += take
            r.done += take
        mixed = self.knobs.enable_mixed_chunk and self.running
        n = len(self.running) if mixed else 0
        dur = self.cost.prefill(int(ext_total), attn, touched, len(batch), enc, n, self.dec_ctx if mixed else 0.0)
        dur *= self.drift.factor(t)
        res.kind, res.duration, res.n_steps = "prefill", dur, 1
        end = t + dur
        if mixed:
            self._advance_decode(end, dur, res)
            self._pop_finished(end, res)
        self.last_hit_rate = cached / (cached + new) if cached + new else 0.0
        for r, _ in batch:
            if r.done == r.seq_len:
                self._complete_prefill(r, end, res)
        self._report(end)

    def _complete_prefill(self, r: Req, end: float, res: StepResult) -> None:
        """Cache the prompt in the tree, emit the next token, join the decode batch."""
        path, _created = self.tree.insert(r.path, r.pages, end)  # locks only the newly added nodes
        moved = (len(path) - len(r.path)) * self.tree.page if not self.tree.disabled else 0
        r.path = path
        r.private -= moved
        self.used_private -= moved
        r.out_base += 1
        r.last_token_at = end
        r.extra_times.append(end)
        if r.first_token_at is None:
            r.first_token_at = end
            self.hist["time_to_first_token_seconds"].observe(end - r.arrival)
            res.first_token.append(r.rid)
        if r.out_base >= r.max_new:
            self.release(r, end)
            self._finish(r, end, res)
            return
        r.status = "running"
        r.seg_start = len(self.dec_times)
        self.running[r.rid] = r
        self.dec_ctx += r.seq_len
        self.joined.append(r)
        heapq.heappush(self.fin_heap, (r.seg_start + r.max_new - r.out_base, next(self._seq), r.version, r))

    def _decode(self, t: float, until: float, max_steps: int, res: StepResult) -> None:
        n = len(self.running)
        if self.avail() < n:
            retract_decode(self, t, res)
            n = len(self.running)
            if self.avail() < n:  # one request left and it still does not fit: SGLang aborts it
                last = next(iter(self.running.values()))
                self.release(last, t)
                self._close(last, t, {"type": "abort", "message": "retract_decode: aborted last request due to OOM"})
                res.finished.append(last.rid)
                return
        heap = self.fin_heap
        while heap and (heap[0][3].version != heap[0][2] or heap[0][3].status != "running"):
            heapq.heappop(heap)
        d0 = len(self.dec_times)
        k = min(heap[0][0] - d0 if heap else 1 << 30, max(1, self.avail() // n), max_steps)
        mem0, mem_c, comp0, comp_c = self.cost.decode_terms(n)
        fixed, speed = self.cost.decode_fixed(n), self.cost.decode_speed_at(n) * self.drift.factor(t)
        ctx, end, times = float(self.dec_ctx), t, self.dec_times
        for _ in range(k):
            ctx += n
            m, c = mem0 + ctx * mem_c, comp0 + ctx * comp_c
            end += ((m if m > c else c) + fixed) * speed
            times.append(end)
            if end >= until:
                break
        steps = len(times) - d0
        res.kind, res.duration, res.n_steps = "decode", end - t, steps
        self._alloc(steps * n)
        self.dec_ctx += steps * n
        self._advance_decode(end, end - t, res, steps, first_gap_end=times[d0])
        self._pop_finished(end, res)

    def _pop_finished(self, end: float, res: StepResult) -> None:
        heap, d = self.fin_heap, len(self.dec_times)
        while heap and heap[0][0] <= d:
            _, _, ver, r = heapq.heappop(heap)
            if ver == r.version and r.status == "running":
                self.release(r, end)
                self._finish(r, end, res)

    def _advance_decode(self, end: float, dur: float, res: StepResult, steps: int = 0,
                        first_gap_end: float | None = None) -> None:
        """Bookkeeping shared by decode runs and mixed chunks: ratio decay, ITL histogram, report cadence."""
        n = len(self.running)
        if steps == 0:  # a mixed prefill step decoded every running request once
            self.dec_times.append(end)
            self._alloc(n)
            self.dec_ctx += n
            steps, first_gap_end = 1, end
        assert first_gap_end is not None
        itl = self.hist["inter_token_latency_seconds"]
        fresh = [r for r in self.joined if r.status == "running"]
        for r in fresh:
            itl.observe(first_gap_end - r.last_token_at)
        if n - len(fresh) > 0:
            itl.observe(first_gap_end - self.last_dec_end, n - len(fresh))
        if steps > 1:
            itl.observe((end - first_gap_end) / (steps - 1), n * (steps - 1))
        self.joined = []
        self.last_dec_end = end
        self.decoded_since_report += n * steps
        self.steps_since_report += steps
        if self.steps_since_report >= REPORT_EVERY:
            self._report(end)

    def release(self, r: Req, t: float) -> None:
        """Free a request's private KV and unlock its cached path (retraction, finish or abort)."""
        if r.status == "running":
            steps = len(self.dec_times) - r.seg_start
            self.dec_ctx -= r.done + steps  # done == sequence length when it joined the decode batch
            r.out_base += steps
            r.private += steps
            r.segments.append((r.seg_start, len(self.dec_times)))
            del self.running[r.rid]
            self.batch_is_full = False
        self.used_private -= r.private
        r.private = 0
        self.tree.unlock(r.path, t)
        r.path = []
        r.version += 1

    def _cache_finished(self, r: Req, end: float) -> None:
        """Put a finished request's prompt and output (all but the last token, which has no KV yet) in the tree."""
        if r.output_ids is None or self.tree.disabled or r.out_base < 2:
            return
        pages = self.tree.pages(tuple(r.ids) + tuple(r.output_ids(r.out_base - 1)))
        path = self.tree.match(pages, end)
        self.tree.lock(path)
        path, _created = self.tree.insert(path, pages, end)
        over = self.used_private + self.tree.total_tokens - self.total
        self.tree.unlock(path, end)
        if over > 0:
            self.tree.evict(over)

    def _finish(self, r: Req, end: float, res: StepResult) -> None:
        self._cache_finished(r, end)
        s = r.streaming
        self.by_stream["prompt_tokens_total"][s] += r.prompt_len
        self.by_stream["generation_tokens_total"][s] += r.out_base
        self.by_stream["cached_tokens_total"][s] += r.cached_tokens
        self.by_stream["num_requests_total"][s] += 1
        self.hist["e2e_request_latency_seconds"].observe(end - r.arrival)
        self.batch_is_full = False
        self._close(r, end, {"type": "length", "length": r.out_base})
        res.finished.append(r.rid)

    def _close(self, r: Req, t: float, reason: dict[str, Any]) -> None:
        r.status = "finished" if reason["type"] == "length" else "aborted"
        r.finished_at, r.finish_reason = t, reason

    # ---- metrics -----------------------------------------------------------------------------
    def _report(self, t: float) -> None:
        """Refresh the gauges, as SGLang does on each prefill batch and every 40 decode steps."""
        self.gauges = report_gauges(self, t - self.report_t)
        self.report_t, self.decoded_since_report, self.steps_since_report = t, 0, 0
        self.retracted_since_report = 0

    def counter_values(self) -> dict[str, float]:
        """Live counters summed over the is_streaming label."""
        out = {k: v[True] + v[False] for k, v in self.by_stream.items()}
        out.update(self.counters)
        return out

    def metrics(self) -> dict[str, Any]:
        return {"gauges": dict(self.gauges), "counters": self.counter_values(),
                "counters_by_stream": self.by_stream, "histograms": self.hist}

    def flush_cache(self) -> bool:
        """/flush_cache: only when nothing is in flight."""
        return not self.has_work() and self.tree.reset()
