"""Histograms with SGLang's bucket boundaries and a Prometheus text exposition of the engine's metrics."""

from __future__ import annotations

import bisect
from typing import Any

# Boundaries read from tests/fixtures/sglang-0.5.17-metrics.txt (a real 0.5.17 scrape).
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
                200.0, 400.0)
E2E_BUCKETS = TTFT_BUCKETS + (600.0, 1200.0, 1800.0, 2400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
               0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)


class Histogram:
    """Non-cumulative bucket counts; observe(v, n) adds n observations of v in O(log buckets)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0.0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0.0

    def observe(self, value: float, n: float = 1.0) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[float, float]]:
        """(le, cumulative count) pairs ending with +Inf, as Prometheus exposes them."""
        out, acc = [], 0.0
        for le, c in zip(self.bounds + (float("inf"),), self.counts, strict=True):
            acc += c
            out.append((le, acc))
        return out


def report_gauges(eng: Any, gap: float) -> dict[str, float]:
    """The scheduler gauges of an Engine at a report point; gap is seconds since the previous report."""
    avail = eng.total - eng.used_private - eng.tree.total_tokens
    used = eng.total - avail - eng.tree.evictable_tokens
    return {
        "num_running_reqs": float(len(eng.running)),
        "num_queue_reqs": float(len(eng.waiting)),
        "num_used_tokens": float(used),
        "token_usage": used / eng.total,
        "cache_hit_rate": eng.last_hit_rate,
        "gen_throughput": eng.decoded_since_report / gap if gap > 0 else 0.0,
        "new_token_ratio": eng.ratio,
        "num_retracted_reqs": float(eng.retracted_since_report),
        "max_total_num_tokens": float(eng.total),
        "context_len": float(eng.cfg.context_len),
        "kv_available_tokens": float(avail),
        "kv_evictable_tokens": float(eng.tree.evictable_tokens),
        "kv_used_tokens": float(used),
        # sim-only: what a GPU probe would read on a real host; never emitted by SGLang itself
        "sim_gpu_memory_used_mib": float(eng.cfg.extra.get("sim_gpu_memory_used_mib", 0.0)),
    }


HELP = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "num_used_tokens": "The number of used tokens.",
    "token_usage": "The token usage.",
    "cache_hit_rate": "The prefix cache hit rate.",
    "gen_throughput": "The generation throughput (token/s).",
    "new_token_ratio": "The new token ratio.",
    "num_retracted_reqs": "The number of retracted requests.",
    "sim_gpu_memory_used_mib": "SIMULATED device memory in use (MiB); sim-only, not an SGLang metric.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "context_len": "The context length.",
    "kv_available_tokens": "Available KV tokens.",
    "kv_evictable_tokens": "Evictable KV tokens.",
    "kv_used_tokens": "Used KV tokens.",
    "prompt_tokens_total": "Number of prefill tokens processed.",
    "generation_tokens_total": "Number of generation tokens processed.",
    "cached_tokens_total": "Number of cached prompt tokens by source (device/host/storage).",
    "num_requests_total": "Number of requests processed.",
    "num_aborted_requests_total": "Number of requests aborted.",
    "num_retracted_requests_total": "Total number of retracted requests.",
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "e2e_request_latency_seconds": "Histogram of End-to-end request latency in seconds",
}


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(d.items())) + "}"


def _num(v: float) -> str:
    return "+Inf" if v == float("inf") else repr(float(v))


def exposition(snap: dict[str, Any], model_name: str) -> str:
    """Render an Engine.metrics() snapshot with sglang: names and SGLang's label sets."""
    sched = {"engine_type": "unified", "model_name": model_name, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
    tok = {"engine_type": "unified", "model_name": model_name}
    lines: list[str] = []

    def head(name: str, kind: str) -> None:
        lines.append(f"# HELP sglang:{name} {HELP.get(name, name)}")
        lines.append(f"# TYPE sglang:{name} {kind}")

    for name, value in snap["gauges"].items():
        head(name, "gauge")
        labels = dict(sched, pid=str(snap.get("pid", 0))) if name == "num_retracted_reqs" else sched
        lines.append(f"sglang:{name}{_labels(labels)} {_num(value)}")
    for name, by_stream in snap["counters_by_stream"].items():
        head(name, "counter")
        if name == "cached_tokens_total":  # labelled by cache source, not by streaming
            lines.append(f"sglang:{name}{_labels(dict(tok, cache_source='device'))} {_num(sum(by_stream.values()))}")
            continue
        for streaming, value in by_stream.items():
            labels = dict(tok, is_streaming="true" if streaming else "false")
            lines.append(f"sglang:{name}{_labels(labels)} {_num(value)}")
    head("num_retracted_requests_total", "counter")
    lines.append(f"sglang:num_retracted_requests_total{_labels(sched)} {_num(snap['counters']['num_retracted_requests_total'])}")
    for name, hist in snap["histograms"].items():
        head(name, "histogram")
        labels = dict(tok, is_streaming="true") if name != "inter_token_latency_seconds" else tok
        for le, c in hist.cumulative():
            lines.append(f"sglang:{name}_bucket{_labels(dict(labels, le=_num(le) if le == float('inf') else str(le)))} {_num(c)}")
        lines.append(f"sglang:{name}_sum{_labels(labels)} {_num(hist.sum)}")
        lines.append(f"sglang:{name}_count{_labels(labels)} {_num(hist.count)}")
    return "\n".join(lines) + "\n"
