"""Probes: the server's /metrics (with name aliases across SGLang versions), GPU via pynvml, host processes via psutil.

Every probe has start()/stop() (one asyncio task), an injected clock and interval_s, and a `.samples`
list of sweep.types.Sample rows. Parsing is pure (parse_metrics, histogram_delta).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from sweep.types import Sample

Clock = Callable[[], float]
Buckets = list[tuple[float, float]]

# Older / blog-post names -> the canonical (SGLang 0.5.x) name our code reads.
ALIASES: dict[str, str] = {
    "num_waiting_reqs": "num_queue_reqs",
    "gpu_cache_usage_perc": "token_usage",
    "gpu_cache_usage_percent": "token_usage",
    "prefix_cache_hit_rate": "cache_hit_rate",
    "gpu_prefix_cache_hit_rate": "cache_hit_rate",
    "total_retracted_reqs": "num_retracted_requests_total",  # 0.4.x gauge, cumulative since start
    "num_prefill_infight_queue_reqs": "num_prefill_inflight_queue_reqs",
    "num_prefill_prealloc_queue_reqs": "num_prefill_bootstrap_queue_reqs",
}
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
# Only the simulated server exports this; real SGLang never does (GPU memory comes from NVML there).
SIM_GPU_GAUGE = "sim_gpu_memory_used_mib"
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
RETRYABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


@dataclass
class Histogram:
    """A Prometheus histogram summed over label sets: cumulative (le, count) buckets, sum and count."""

    buckets: Buckets = field(default_factory=list)
    sum: float = 0.0
    count: float = 0.0


@dataclass
class MetricsSnapshot:
    """One /metrics scrape: scalar values and histograms by canonical name (no `sglang:` prefix)."""

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


def _strip(name: str) -> str:
    return name.split(":", 1)[1] if ":" in name else name


def only_names(text: str, names: frozenset[str]) -> str:
    """The sample lines of `text` whose metric name (without `sglang:`) is one of `names`, comments dropped.

    prometheus_client's parser takes 40-100 ms for a whole real SGLang scrape (mostly histogram buckets'
    labels); a probe that needs a few gauges parses just their lines, and keeps the event loop free.
    """
    keep = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        end = len(line)
        for stop in ("{", " "):
            i = line.find(stop)
            if 0 <= i < end:
                end = i
        if _strip(line[:end]) in names:
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse Prometheus text: sum each name over its label sets, strip `sglang:`, resolve aliases."""
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
    for old, new in ALIASES.items():
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


def histograms_from_samples(samples: list[dict[str, Any]]) -> dict[str, Buckets]:
    """Stored histogram samples (rows with source, name, labels, value) back to {name: [(le, count), ...]}."""
    out: dict[str, Buckets] = defaultdict(list)
    for s in samples:
        if s["source"] == HISTOGRAM_SOURCE and s["labels"].startswith("le="):
            out[s["name"]].append((float(s["labels"][3:]), float(s["value"])))
    return {name: sorted(b) for name, b in out.items()}


class _HasUrl(Protocol):
    url: str | None


async def control_request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One HTTP call; on a dropped keep-alive / refused connection, retry once on a fresh connection."""
    try:
        return await client.request(method, url, **kwargs)
    except RETRYABLE:
        # A real 0.5.17 server dropped idle keep-alive connections; a new client has a new pool.
        async with httpx.AsyncClient(timeout=client.timeout, headers=client.headers) as fresh:
            return await fresh.request(method, url, **kwargs)


class _PeriodicProbe:
    """start()/stop() a task that calls sample_once() every `interval_s` seconds."""

    def __init__(self, interval_s: float, clock: Clock) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.samples: list[Sample] = []
        self.errors = 0
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> list[Sample]:
        raise NotImplementedError

    async def _loop(self) -> None:
        while True:
            try:
                self.samples.extend(await self.sample_once())
            except Exception as exc:  # a probe must never take the window down; errors are counted
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(self.interval_s)

    async def start(self) -> None:
        """Start sampling in the running event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop sampling and wait for the task to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.close()

    async def close(self) -> None:
        """Release resources (subclasses)."""


class MetricsProbe(_PeriodicProbe):
    """Scrapes handle.url + '/metrics' and records the SAMPLED names as source 'metrics' samples."""

    def __init__(
        self,
        handle: _HasUrl | str,
        *,
        interval_s: float = 1.0,
        clock: Clock = time.monotonic,
        client: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        headers: dict[str, str] | None = None,
        names: tuple[str, ...] = SAMPLED,
    ) -> None:
        super().__init__(interval_s, clock)
        base = handle if isinstance(handle, str) else handle.url
        if not base:
            raise ValueError("MetricsProbe needs a server URL")
        if headers is None and hasattr(handle, "headers") and callable(handle.headers):
            headers = handle.headers()
        self.url = base.rstrip("/") + "/metrics"
        self.names = names
        # what sample_once parses: its names, the older names that alias to them, the simulator's GPU gauge
        self._lines = frozenset({*names, SIM_GPU_GAUGE, *(old for old, new in ALIASES.items() if new in names)})
        self._own_client = client is None
        self.client = client or httpx.AsyncClient(timeout=timeout, headers=headers or {})
        self.last: MetricsSnapshot | None = None

    async def fetch(self) -> tuple[str, float]:
        """GET /metrics (one retry on a dropped connection): its text, unparsed, and the clock at the reply."""
        resp = await control_request(self.client, "GET", self.url)
        resp.raise_for_status()
        return resp.text, self.clock()

    async def scrape_once(self) -> MetricsSnapshot:
        """GET /metrics and parse all of it; .t is the clock at the reply."""
        text, t = await self.fetch()
        snap = parse_metrics(text)
        snap.t = t
        self.last = snap
        return snap

    async def sample_once(self) -> list[Sample]:
        text, t = await self.fetch()
        snap = parse_metrics(only_names(text, self._lines))  # a few gauges, not the histograms' buckets
        snap.t = t
        out = [Sample(snap.t, "metrics", n, snap.values[n]) for n in self.names if n in snap.values]
        if SIM_GPU_GAUGE in snap.values:
            # The simulated server states the device memory a real host would show; labelled as such.
            out.append(Sample(snap.t, "gpu", "gpu_mem_used_mib", snap.values[SIM_GPU_GAUGE], "gpu=0,simulated=1"))
        return out

    async def close(self) -> None:
        if self._own_client:
            await self.client.aclose()


class GpuProbe(_PeriodicProbe):
    """Per-GPU memory used (MiB) and utilisation (%) via NVML; a silent no-op where NVML is unavailable."""

    def __init__(
        self, *, interval_s: float = 1.0, clock: Clock = time.monotonic, devices: list[int] | None = None
    ) -> None:
        super().__init__(interval_s, clock)
        self.devices = devices
        self._nvml: Any = None
        self._tried = False
        self.unavailable_reason: str | None = None

    @property
    def available(self) -> bool:
        """Whether NVML initialised (tries once)."""
        self._init()
        return self._nvml is not None

    def _init(self) -> None:
        if self._tried:
            return
        self._tried = True
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception as exc:  # no driver, no library, no GPU: nothing to sample
            self.unavailable_reason = f"{type(exc).__name__}: {exc}"

    def read(self) -> list[Sample]:
        """One reading of every device (empty without NVML)."""
        self._init()
        nv = self._nvml
        if nv is None:
            return []
        t = self.clock()
        devices = self.devices if self.devices is not None else range(nv.nvmlDeviceGetCount())
        out: list[Sample] = []
        for i in devices:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            out.append(Sample(t, "gpu", "gpu_mem_used_mib", self._mem_used(h) / 2**20, f"gpu={i}"))
            # Utilisation is not exposed everywhere (some containers, MIG slices): memory still counts.
            with contextlib.suppress(Exception):
                util = nv.nvmlDeviceGetUtilizationRates(h).gpu
                out.append(Sample(t, "gpu", "gpu_util", float(util), f"gpu={i}"))
        return out

    def _mem_used(self, handle: Any) -> float:
        """Bytes in use as nvidia-smi shows them (v2 excludes driver-reserved memory; v1 as a fallback)."""
        nv = self._nvml
        try:
            return float(nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2).used)
        except Exception:
            return float(nv.nvmlDeviceGetMemoryInfo(handle).used)

    async def sample_once(self) -> list[Sample]:
        return self.read()

    async def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None
            self._tried = False


class ProcessProbe(_PeriodicProbe):
    """RSS (MiB) and CPU (% of one core) of a process and all its descendants (e.g. SGLang's schedulers)."""

    def __init__(self, pid: int, *, interval_s: float = 1.0, clock: Clock = time.monotonic) -> None:
        super().__init__(interval_s, clock)
        self.pid = pid
        self._procs: dict[int, psutil.Process] = {}  # kept so cpu_percent() measures since the last call

    def read(self) -> list[Sample]:
        """One reading of the tree (empty once the root process is gone)."""
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        rss = cpu = 0.0
        alive: dict[int, psutil.Process] = {}
        for p in tree:
            proc = self._procs.get(p.pid, p)
            try:
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    cpu += proc.cpu_percent(None)
            except psutil.Error:
                continue
            alive[p.pid] = proc
        self._procs = alive
        t, labels = self.clock(), f"pid={self.pid}"
        return [
            Sample(t, "process", "rss_mib", rss / 2**20, labels),
            Sample(t, "process", "cpu_percent", cpu, labels),
        ]

    async def sample_once(self) -> list[Sample]:
        return self.read()
