"""What a server's /metrics says, as sweep reads it: canonical names, parsing, histogram deltas.

The one home of the canonical metric names sweep samples and counts (SGLang 0.5.x's names, without a prefix) and
of the pure functions over a /metrics text: parse_metrics, histogram_delta, and the stored form of a window's
histograms (samples with source "histogram"). How an engine's own names map onto them (prefix, aliases across
versions) is the engine's dialect (sweep.engines: Dialect.metrics).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from sweep.core.types import Sample
from sweep.engines import MetricNames, default

Buckets = list[tuple[float, float]]

# Canonical names that are fractions 0..1; an alias reporting > 1 is taken as a percentage.
FRACTIONS = {"token_usage", "cache_hit_rate"}
# What MetricsProbe samples over time by default (gauges plus the retraction counter for storms).
SAMPLED: tuple[str, ...] = (
    "num_running_reqs",
    "num_queue_reqs",
    "token_usage",
    "cache_hit_rate",
    "gen_throughput",
    "num_retracted_reqs",
    "num_used_tokens",
    "new_token_ratio",
    "num_retracted_requests_total",
)
# Counters a window reads at its start and end (WindowResult.counters_start / counters_end).
COUNTERS: tuple[str, ...] = (
    "prompt_tokens_total",
    "generation_tokens_total",
    "cached_tokens_total",
    "num_requests_total",
    "num_retracted_requests_total",
    "num_aborted_requests_total",
    "realtime_tokens_total",
)


@dataclass
class Histogram:
    """A Prometheus histogram summed over label sets: cumulative (le, count) buckets, sum and count."""

    buckets: Buckets = field(default_factory=list)
    sum: float = 0.0
    count: float = 0.0


@dataclass
class MetricsSnapshot:
    """One /metrics scrape: scalar values and histograms by canonical name (no engine prefix)."""

    values: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    t: float = 0.0

    def get(self, name: str, default: float | None = None) -> float | None:
        """A scalar by canonical name."""
        return self.values.get(name, default)

    @property
    def counters(self) -> dict[str, float]:
        """The COUNTERS this server exports (for WindowResult.counters_start / counters_end)."""
        return {n: self.values[n] for n in COUNTERS if n in self.values}


def only_names(text: str, names: frozenset[str], dialect: MetricNames | None = None) -> str:
    """The sample lines of `text` whose metric name (without the engine's prefix) is one of `names`, comments
    dropped.

    prometheus_client's parser takes 40-100 ms for a whole real SGLang scrape (mostly histogram buckets'
    labels); a probe that needs a few gauges parses just their lines, and keeps the event loop free.
    """
    strip = (dialect or default().metrics).strip
    keep = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        end = len(line)
        for stop in ("{", " "):
            i = line.find(stop)
            if 0 <= i < end:
                end = i
        if strip(line[:end]) in names:
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse_metrics(text: str, dialect: MetricNames | None = None) -> MetricsSnapshot:
    """Parse Prometheus text: sum each name over its label sets, strip the engine's prefix, resolve its aliases
    (the default engine's where `dialect` is None)."""
    names = dialect or default().metrics
    _strip = names.strip
    values: dict[str, float] = defaultdict(float)
    # cached_tokens_total carries cache_source=device|host|storage|total: count "total" alone when present.
    by_source: dict[str, float] = defaultdict(float)
    hist_buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    hist_sum: dict[str, float] = defaultdict(float)
    hist_count: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        base = _strip(family.name)
        is_hist = family.type in ("histogram", "gaugehistogram")
        for s in family.samples:
            name = _strip(s.name)  # sample names keep `_total`, unlike the parser's family names
            if name.endswith("_created") or math.isnan(s.value):
                continue
            if is_hist:
                if name == base + "_bucket":
                    hist_buckets[base][float(s.labels["le"])] += s.value
                elif name == base + "_sum":
                    hist_sum[base] += s.value
                elif name == base + "_count":
                    hist_count[base] += s.value
                continue
            if name == "cached_tokens_total" and "cache_source" in s.labels:
                by_source[s.labels["cache_source"]] += s.value
                continue
            values[name] += s.value
    if by_source:
        values["cached_tokens_total"] = (
            by_source["total"] if "total" in by_source else sum(by_source.values())
        )
    resolved = dict(values)
    for old, new in names.aliases.items():
        if old in values and new not in values:
            v = values[old]
            resolved[new] = v / 100.0 if new in FRACTIONS and v > 1.0 else v
    histograms = {
        name: Histogram(sorted(b.items()), hist_sum.get(name, 0.0), hist_count.get(name, 0.0))
        for name, b in hist_buckets.items()
    }
    return MetricsSnapshot(resolved, histograms)


def histogram_delta(start: MetricsSnapshot | None, end: MetricsSnapshot, name: str) -> Buckets:
    """Cumulative (le, count) buckets of `name` observed between two scrapes ([] if absent)."""
    h_end = end.histograms.get(name)
    if h_end is None:
        return []
    h_start = start.histograms.get(name) if start is not None else None
    before = dict(h_start.buckets) if h_start is not None else {}
    delta = [(le, c - before.get(le, 0.0)) for le, c in h_end.buckets]
    if any(c < 0 for _, c in delta):
        return list(h_end.buckets)  # counters reset: the server restarted between the scrapes
    return delta


# Latency histograms whose window delta is stored with every run (source HISTOGRAM_SOURCE samples, one per bucket).
WINDOW_HISTOGRAMS: tuple[str, ...] = (
    "time_to_first_token_seconds",
    "time_per_output_token_seconds",  # older SGLang only
    "inter_token_latency_seconds",
    "e2e_request_latency_seconds",
)
HISTOGRAM_SOURCE = "histogram"


def buckets_as_samples(name: str, buckets: Buckets, t: float) -> list[Sample]:
    """One histogram's cumulative (le, count) buckets as samples: value = count, labels le=X."""
    return [Sample(t, HISTOGRAM_SOURCE, name, count, f"le={le!r}") for le, count in buckets]


def histogram_samples(start: MetricsSnapshot | None, end: MetricsSnapshot | None, t: float) -> list[Sample]:
    """The window's delta of each WINDOW_HISTOGRAMS histogram as samples (buckets_as_samples)."""
    if start is None or end is None:
        return []
    return [s for name in WINDOW_HISTOGRAMS for s in buckets_as_samples(name, histogram_delta(start, end, name), t)]


def histograms_from_samples(samples: Iterable[Sample]) -> dict[str, Buckets]:
    """Stored histogram samples back to {name: [(le, count), ...]}."""
    out: dict[str, Buckets] = defaultdict(list)
    for s in samples:
        if s.source == HISTOGRAM_SOURCE and s.labels.startswith("le="):
            out[s.name].append((float(s.labels[3:]), s.value))
    return {name: sorted(b) for name, b in out.items()}
