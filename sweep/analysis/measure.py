"""Statistics of one measured window: the one place where TTFT, TPOT, ITL, goodput and attainment are defined.

Pure: request records and probe samples in, a frozen RunStats out (sweep.analysis.run_stats: the plain columns of `runs`).

Conventions (README.md, "Definitions", points here):
- A record counts when it is not warm-up and its scheduled_at (send time) is in [window_start, window_end).
  TTFT and E2E are measured from scheduled_at, so client-side queueing in open-loop runs is included.
- How the window opened (the driver's warm-up, sweep.profile.warmup): warmup_requests = the requests *completed*
  (ended, failed included) when the window opened, warmup_s = seconds from the step's start (its first send) to the
  window's start, window_opened_by = the warm-up condition met last ("requests", "seconds", "load") or "bound" (the
  warm-up did not end within its bound and the window opened anyway). Rows stored before issue 28 hold the profile's
  warmup_requests / warmup_seconds in the first two, and no window_opened_by.
- Latency distributions (TTFT, TPOT, ITL, E2E) use successful requests only; errors show up in error_rate
  and as SLA misses.
- A cut request (error_kind CUT, sweep.core.types) was sent in the window and was still running when the drain grace
  ended: the window's edge cut it, the server did not fail it. It is counted apart (n_cut) and never as an error:
  n_errors leaves it out and error_rate = n_errors / (n_started − n_cut), the share of the requests that ended that
  failed, so cuts never count against max_error_rate. It counts in n_started (it was sent in the window) and, like
  any request not seen to meet the SLA, not in goodput (attainment's denominator holds it); it has no end, so no
  latency distribution holds it. The completed requests' latencies include waits up to drain_seconds, so a drain of
  at least the TTFT bound keeps an overloaded window failing on TTFT. A window with more than CUT_SHARE of its
  requests cut is named by its "why" (sweep.analysis.window_edges.drain_note). A request scheduled in the window
  but never sent (open loop: the in-flight cap stayed full to the drain's end; UNSENT) is an error.
- A window stopped early (WindowResult.stopped_early, issue 29: sweep.analysis.early_stop decided that one of its SLA
  bounds cannot pass) ends where it stopped (window_end, so window_s is the seconds it measured); its requests still
  running were cut there (CUT). It never passes: its first failure is "stopped early at N s: <why>", and
  stopped_early_by holds the why.
- TPOT of a request = (last chunk − first token) / (output_tokens − 1), for requests with >= 2 output tokens;
  a request with < 2 output tokens has no TPOT and cannot miss the TPOT bound.
- ITL: every gap between consecutive content chunks; a chunk carrying k tokens counts as k gaps of gap/k
  (what SGLang's bench_serving reports).
- output_tps: output tokens that *arrived* inside [window_start, window_end), per window second, from every
  record (warm-up, errored and drained requests included): a chunk carrying k tokens at time t adds k when t is
  in the window. Counting the tokens of requests *sent* in the window instead reads high when closed-loop
  users are in phase (they all start together): each user's last request is counted whole although it ends
  after the window, by about E2E / (2 x window) (6% for 2.4 s requests in a 20 s window). Records keep every
  chunk's time and token count, so this is exact; a record whose output_tokens exceed its chunks' sum (a final
  usage count larger than what the stream carried) gets the excess at its last chunk (at finished_at when it has
  no chunk).
- goodput_tps: the same arrival count restricted to records that meet the SLA (any send time, so the SLA-meeting
  warm-up requests still streaming when the window opens contribute their in-window tokens, as they do to
  output_tps); goodput_tps <= output_tps always. goodput_rps and attainment count requests sent in the window.
- goodput CI (goodput_rps_ci_low/high, requests/s like goodput_rps): the union of two 95% intervals, so it never collapses to a
  point while the outcome is uncertain: (a) a block bootstrap of SLA-meeting sends over GOODPUT_BLOCKS equal
  time blocks (the rate's own noise; zero width when every block holds the same count, as evenly spaced
  open-loop arrivals give), and (b) the Wilson score interval of attainment (meeting of started) times the
  started rate (the binomial uncertainty of each request's SLA outcome; not zero when all or none meet).
  None without started requests, a window of zero length, or bootstrap=0.
- Ratios with a zero denominator are None (no data), never 0.
- steady: the window's two halves (by send time) are compared on completed-request throughput and TTFT P50;
  drift = the larger relative difference |a − b| / max(a, b); steady = drift <= STEADY_DRIFT (0.2).
- client: the load generator's own figures (ClientStats, sweep.analysis.measure_client: dispatch lag, in-flight cap waits,
  event-loop lag, CPU) from the raw readings the driver recorded; every figure None without a client process
  (the virtual driver).
- client_bound: the load generator, not the server, may have limited the step: client dispatch lag P99
  > 50 ms, or client CPU (client_cpu_frac, the busiest process, fraction of one core) > 0.9, or the
  client's event loop stalled: loop_lag_p99_ms > loop_lag_limit_ms(sla) = min(20 ms, 10% of the SLA's
  TTFT bound). A chunk that arrives while the loop is stalled is timed when the loop wakes, so every
  TTFT / ITL of that window can read up to the stall too high; 20 ms is the cross-check's absolute tolerance.
  Or one stall was long: loop_lag_max_ms > loop_stall_limit_ms(sla) = max(100 ms, 10% of the TTFT bound). A
  single stall of the TTFT bound's share delays every stream of that process by it (a 64-stream client stalled
  1.4 s and 0.66 s on a loaded host with a low P99: issue 23 §17); the 100 ms floor keeps one ordinary
  garbage-collection pause from marking a window. client_bound_reasons says which rule fired, in words.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sweep.analysis.measure_client import client_bound_reasons as client_bound_reasons
from sweep.analysis.measure_client import client_stats, is_client_bound
from sweep.analysis.measure_client import loop_lag_limit_ms as loop_lag_limit_ms
from sweep.analysis.measure_client import loop_stall_limit_ms as loop_stall_limit_ms
from sweep.analysis.run_stats import RunStats
from sweep.analysis.session_time import record_turn, session_times_s
from sweep.core.types import CUT, RequestRecord, Sample, WindowResult
from sweep.profile import SLA
from sweep.profile.window import DEFAULT_MIN_REQUESTS

STEADY_DRIFT = 0.2

_LAT_STATS = ("p50", "p90", "p95", "p99", "mean", "max")

def percentile(values: list[float] | np.ndarray, q: float) -> float | None:
    """The q-th percentile (0..100, linear interpolation); None when there is no data."""
    arr = np.asarray(values, dtype=float)
    return float(np.percentile(arr, q)) if arr.size else None


def latency_summary(values_ms: list[float] | np.ndarray) -> dict[str, float | None]:
    """p50, p90, p95, p99, mean and max of milliseconds (None each when empty). An array given (a streamed
    window's ITL gaps, a file-backed np.memmap) is reordered in place, not copied: its mean is taken first."""
    given = isinstance(values_ms, np.ndarray)
    arr = np.asarray(values_ms, dtype=float)
    if not arr.size:
        return dict.fromkeys(_LAT_STATS)
    mean, top = float(arr.mean()), float(arr.max())
    p50, p90, p95, p99 = (float(x) for x in np.percentile(arr, [50, 90, 95, 99], overwrite_input=given))
    return {"p50": p50, "p90": p90, "p95": p95, "p99": p99, "mean": mean, "max": top}


def ratio(num: float, den: float) -> float | None:
    """num / den, None when den is not positive."""
    return num / den if den > 0 else None


def rel_diff(a: float, b: float) -> float:
    """Symmetric relative difference |a − b| / max(|a|, |b|), 0 when both are 0."""
    top = max(abs(a), abs(b))
    return abs(a - b) / top if top > 0 else 0.0


def in_window(rec: RequestRecord, start: float, end: float) -> bool:
    """Whether a record counts for the window: not warm-up, sent in [start, end)."""
    return not rec.warmup and start <= rec.scheduled_at < end


def is_cut(rec: RequestRecord) -> bool:
    """Still running when the drain ended: cut by the window's edge, counted apart (n_cut), not an error."""
    return rec.error_kind == CUT


def succeeded(rec: RequestRecord) -> bool:
    """Finished without error."""
    return rec.error is None and rec.finished_at is not None


def ttft_ms(rec: RequestRecord) -> float | None:
    """Send → first content token, in ms."""
    return None if rec.first_token_at is None else (rec.first_token_at - rec.scheduled_at) * 1000.0


def e2e_ms(rec: RequestRecord) -> float | None:
    """Send → last byte, in ms."""
    return None if rec.finished_at is None else (rec.finished_at - rec.scheduled_at) * 1000.0


def tpot_ms(rec: RequestRecord) -> float | None:
    """(last chunk − first token) / (output tokens − 1), in ms; None below 2 output tokens."""
    if rec.first_token_at is None or rec.output_tokens < 2:
        return None
    last = rec.chunk_times[-1] if rec.chunk_times else rec.finished_at
    if last is None:
        return None
    return (last - rec.first_token_at) * 1000.0 / (rec.output_tokens - 1)


def itl_gaps_ms(rec: RequestRecord) -> list[float]:
    """Inter-token gaps in ms: a chunk carrying k tokens after a gap g contributes k gaps of g/k."""
    gaps: list[float] = []
    times = rec.chunk_times
    for i in range(1, len(times)):
        k = rec.chunk_tokens[i] if i < len(rec.chunk_tokens) else 1
        k = max(1, k)
        gap = (times[i] - times[i - 1]) * 1000.0
        gaps.extend([gap / k] * k)
    return gaps


def arrived_tokens(rec: RequestRecord, start: float, end: float) -> int:
    """Output tokens of rec that arrived in [start, end); output_tokens beyond its chunks arrive with the last one."""
    n = sum(k for t, k in zip(rec.chunk_times, rec.chunk_tokens, strict=False) if start <= t < end)
    extra = rec.output_tokens - sum(rec.chunk_tokens)
    last = rec.chunk_times[-1] if rec.chunk_times else rec.finished_at
    if extra > 0 and last is not None and start <= last < end:
        n += extra
    return n


def fold_chunks(rec: RequestRecord, start: float, end: float) -> list[float]:
    """Fold a finished record's chunks, in place, to at most three (those before, inside and after [start, end),
    each group at its last chunk's time and carrying its tokens) and return its ITL gaps in ms (itl_gaps_ms).

    Every statistic of compute_stats but ITL reads the same from the folded record for the window [start, end)
    (first_token_at, the last chunk's time, the chunks' token sum and the tokens arriving in the window are kept);
    the ITL gaps it no longer holds are returned, to be handed to compute_stats as WindowResult.itl_ms. A streamed
    window (sweep.ladder.recorder) so keeps a few numbers per request instead of two per token.
    """
    gaps = itl_gaps_ms(rec)
    groups: dict[int, tuple[float, int]] = {}
    for t, k in zip(rec.chunk_times, rec.chunk_tokens, strict=False):
        g = 0 if t < start else 1 if t < end else 2
        groups[g] = (t, groups.get(g, (t, 0))[1] + k)
    rec.chunk_times = [t for t, _ in groups.values()]
    rec.chunk_tokens = [k for _, k in groups.values()]
    return gaps


def meets_sla(rec: RequestRecord, sla: SLA) -> bool:
    """Finished without error with TTFT, TPOT (and E2E if bounded) inside the per-request SLA."""
    if not succeeded(rec):
        return False
    t = ttft_ms(rec)
    if t is None or t > sla.ttft_ms:
        return False
    tp = tpot_ms(rec)
    if tp is not None and tp > sla.tpot_ms:
        return False
    if sla.e2e_ms is not None:
        e = e2e_ms(rec)
        if e is None or e > sla.e2e_ms:
            return False
    return True


def _samples(samples: list[Sample], name: str, source: str, start: float, end: float) -> list[float]:
    return [s.value for s in samples if s.name == name and s.source == source and start <= s.t <= end]


def _counter_delta(result: WindowResult, name: str) -> float | None:
    if name in result.counters_start and name in result.counters_end:
        return result.counters_end[name] - result.counters_start[name]
    return None


GOODPUT_BLOCKS = 10


def _block_counts(times: list[float], start: float, end: float, blocks: int) -> np.ndarray:
    """How many of `times` fall in each of `blocks` equal slices of [start, end)."""
    if end <= start:
        return np.zeros(0)
    idx = np.clip(((np.asarray(times, float) - start) / (end - start) * blocks).astype(int), 0, blocks - 1)
    return np.bincount(idx, minlength=blocks).astype(float)


def _bootstrap_ci(
    values: np.ndarray, stat: Callable[[np.ndarray], float], n: int, rng: np.random.Generator
) -> tuple[float | None, float | None]:
    """95% percentile-bootstrap interval of stat(sample) over n resamples."""
    if n <= 0 or values.size == 0:
        return None, None
    draws = np.array([stat(values[rng.integers(0, values.size, values.size)]) for _ in range(n)])
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


WILSON_Z = 1.959964  # two-sided 95%


def wilson_interval(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (n > 0)."""
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def _half_drift(recs: list[RequestRecord], start: float, end: float) -> float | None:
    """Largest relative difference of completed throughput and TTFT P50 between the window's halves."""
    mid = (start + end) / 2.0
    halves = ([r for r in recs if r.scheduled_at < mid], [r for r in recs if r.scheduled_at >= mid])
    done = [sum(1 for r in h if succeeded(r)) for h in halves]
    p50s = [percentile([t for r in h if succeeded(r) and (t := ttft_ms(r)) is not None], 50) for h in halves]
    if p50s[0] is None or p50s[1] is None:
        return None
    return max(rel_diff(done[0], done[1]), rel_diff(p50s[0], p50s[1]))


def stopped_early_text(window_s: float, why: str) -> str:
    """The verdict phrase of a window stopped early: "stopped early at 212 s: TTFT P95 cannot pass (...)"."""
    return f"stopped early at {window_s:.0f} s: {why}"


def _sla_failures(
    sla: SLA,
    ttfts: list[float],
    tpots: list[float],
    e2es: list[float],
    error_rate: float | None,
    n_completed: int,
    aborted: str | None,
    n_started: int | None = None,
    min_requests: int = DEFAULT_MIN_REQUESTS,
    sessions_s: list[float] | None = None,
) -> list[str]:
    """Which of the step's SLA bounds fail, as short human phrases; a step that sent fewer than min_requests
    requests in its window (n_started) fails too: its percentiles are noise, so no knee is named from it."""
    fails: list[str] = []
    if aborted:
        fails.append(f"aborted: {aborted}")
    if n_completed == 0:
        fails.append("no completed requests")
    elif n_started is not None and n_started < min_requests:
        fails.append(f"too few requests ({n_started} < {min_requests})")
    bounds = [
        ("TTFT", ttfts, sla.ttft_percentile, sla.ttft_ms),
        ("TPOT", tpots, sla.tpot_percentile, sla.tpot_ms),
    ]
    if sla.e2e_ms is not None:
        bounds.append(("E2E", e2es, sla.e2e_percentile, sla.e2e_ms))
    for label, values, q, limit in bounds:
        v = percentile(values, q)
        if v is not None and v > limit:
            fails.append(f"{label} P{q:g} {v:.0f} ms > {limit:g} ms")
    if sla.session_s is not None and sessions_s:
        v = percentile(sessions_s, sla.session_percentile)
        if v is not None and v > sla.session_s:
            fails.append(f"session P{sla.session_percentile:g} {v:.1f} s > {sla.session_s:g} s")
    if error_rate is not None and error_rate > sla.max_error_rate:
        fails.append(f"errors {error_rate:.1%} > {sla.max_error_rate:.1%}")
    return fails


def compute_stats(result: WindowResult, sla: SLA, *, min_requests: int = DEFAULT_MIN_REQUESTS,
                  bootstrap: int = 200, seed: int = 0) -> RunStats:
    """All statistics of one window (the columns of `runs`; cache_hit_rate_predicted is left None); a window that
    sent fewer than min_requests requests (the profile's window.min_requests) does not pass."""
    start, end = result.window_start, result.window_end
    window_s = result.measured_seconds
    recs = [r for r in result.records if in_window(r, start, end)]
    ok = [r for r in recs if succeeded(r)]
    n_started, n_completed = len(recs), len(ok)
    n_cut = sum(1 for r in recs if is_cut(r))
    n_errors = sum(1 for r in recs if r.error is not None) - n_cut
    error_rate = ratio(n_errors, n_started - n_cut)

    ttfts = [t for r in ok if (t := ttft_ms(r)) is not None]
    tpots = [t for r in ok if (t := tpot_ms(r)) is not None]
    e2es = [t for r in ok if (t := e2e_ms(r)) is not None]
    # a streamed window's records are folded (fold_chunks): its ITL gaps come with it, in the records' order
    itls = result.itl_ms if result.itl_ms is not None else [g for r in ok for g in itl_gaps_ms(r)]
    meeting = [r for r in recs if meets_sla(r, sla)]

    out: dict[str, Any] = {
        "n_started": n_started,
        "n_completed": n_completed,
        "n_errors": n_errors,
        "n_cut": n_cut,
        "n_warmup": sum(1 for r in result.records if r.warmup),
        "error_rate": error_rate,
        "throughput_rps": ratio(n_completed, window_s),
        "input_tps": ratio(sum(r.prompt_tokens for r in ok), window_s),
        "output_tps": ratio(sum(arrived_tokens(r, start, end) for r in result.records), window_s),
    }
    for metric, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e", e2es)):
        for stat, v in latency_summary(values).items():
            out[f"{metric}_{stat}_ms"] = v

    out["goodput_rps"] = ratio(len(meeting), window_s)
    out["goodput_tps"] = ratio(
        sum(arrived_tokens(r, start, end) for r in result.records if meets_sla(r, sla)), window_s
    )
    out["attainment"] = ratio(len(meeting), n_started)
    out["cache_hit_rate"] = ratio(sum(r.cached_tokens for r in ok), sum(r.prompt_tokens for r in ok))
    cached_d = _counter_delta(result, "cached_tokens_total")
    prompt_d = _counter_delta(result, "prompt_tokens_total")
    out["cache_hit_rate_server"] = None if cached_d is None or prompt_d is None else ratio(cached_d, prompt_d)
    retracted_d = _counter_delta(result, "num_retracted_requests_total")
    out["retractions"] = int(retracted_d) if retracted_d is not None else sum(r.num_retractions for r in recs)

    queue = _samples(result.samples, "num_queue_reqs", "metrics", start, end)
    kv = _samples(result.samples, "token_usage", "metrics", start, end)
    running = _samples(result.samples, "num_running_reqs", "metrics", start, end)
    gpu_mem = [s.value for s in result.samples if s.name == "gpu_mem_used_mib" and s.source == "gpu"]
    out["queue_len_mean"] = float(np.mean(queue)) if queue else None
    out["queue_len_max"] = max(queue) if queue else None
    out["kv_usage_max"] = max(kv) if kv else None
    out["running_mean"] = float(np.mean(running)) if running else None
    out["peak_gpu_mem_mib"] = max(gpu_mem) if gpu_mem else None

    rng = np.random.default_rng(seed)
    p99 = lambda a: float(np.percentile(a, 99))  # noqa: E731
    out["ttft_p99_ci_low"], out["ttft_p99_ci_high"] = _bootstrap_ci(
        np.asarray(ttfts, float), p99, bootstrap, rng
    )
    out["tpot_p99_ci_low"], out["tpot_p99_ci_high"] = _bootstrap_ci(
        np.asarray(tpots, float), p99, bootstrap, rng
    )
    # Goodput is a rate: resampling requests alone has no spread when every request meets the SLA, so
    # resample time blocks of the window instead (a block bootstrap), which carries the rate's own noise.
    per_block = _block_counts([r.scheduled_at for r in recs if meets_sla(r, sla)], start, end, GOODPUT_BLOCKS)
    rate = lambda a: float(a.sum()) * GOODPUT_BLOCKS / a.size / window_s  # noqa: E731 - called only when window_s > 0
    lo, hi = _bootstrap_ci(per_block, rate, bootstrap if window_s > 0 and recs else 0, rng)
    if lo is not None and hi is not None:
        # each request's SLA outcome is itself uncertain: the attainment's binomial interval at the started rate
        w_lo, w_hi = wilson_interval(len(meeting), n_started)
        lo, hi = min(lo, w_lo * n_started / window_s), max(hi, w_hi * n_started / window_s)
    out["goodput_rps_ci_low"], out["goodput_rps_ci_high"] = lo, hi

    drift = _half_drift(recs, start, end)
    out["drift"] = drift
    out["steady"] = drift is not None and drift <= STEADY_DRIFT
    client = client_stats(result.client, start, end)
    out["client_bound"] = is_client_bound(client, sla)

    sessions_s = session_times_s(record_turn(r) for r in result.records) if sla.session_s is not None else None
    fails = _sla_failures(sla, ttfts, tpots, e2es, error_rate, n_completed, result.aborted, n_started, min_requests,
                          sessions_s)
    if result.stopped_early is not None:  # decided failing before its end: never a pass, whatever its partial figures
        fails.insert(0, stopped_early_text(window_s, result.stopped_early))
    out["stopped_early_by"] = result.stopped_early
    out["passes_sla"] = not fails
    out["sla_failures"] = "; ".join(fails)
    out["window_s"] = window_s
    out["warmup_requests"] = result.warmup_requests
    out["warmup_s"] = result.warmup_seconds
    out["window_opened_by"] = result.window_opened_by
    return RunStats(**out, client=client)


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """Prometheus histogram_quantile: q in 0..1 over cumulative (le, count) buckets; NaN without data."""
    bs = sorted(buckets, key=lambda b: b[0])
    if not bs or bs[-1][1] <= 0 or not 0 <= q <= 1:
        return math.nan
    total = bs[-1][1]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for i, (le, count) in enumerate(bs):
        if count >= rank and count > prev_count:
            if math.isinf(le):
                # Like Prometheus: a quantile in the +Inf bucket reports the highest finite bound.
                return bs[i - 1][0] if i > 0 else math.nan
            if i == 0 and le <= 0:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return bs[-1][0]
