"""Probes: the server's /metrics over time, GPU via pynvml, host processes via psutil.

Every probe has start()/stop() (one asyncio task), an injected clock and interval_s, and a `.samples`
list of sweep.core.types.Sample rows. What the metric names mean and how a /metrics text is parsed is
sweep/analysis/server_metrics.py (pure).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

import httpx
import psutil

from sweep.analysis.server_metrics import SAMPLED, MetricsSnapshot, only_names, parse_metrics
from sweep.core.types import Sample
from sweep.engines import Dialect, default

Clock = Callable[[], float]

RETRYABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class _HasUrl(Protocol):
    url: str | None


class Probe(Protocol):
    """What a driver runs beside a window: start(), stop(), and the samples it took."""

    samples: list[Sample]

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


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
    """Scrapes the server's metrics path (the handle's engine's, else `engine`'s, else the default engine's) and
    records the SAMPLED names as source 'metrics' samples."""

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
        engine: Dialect | None = None,
    ) -> None:
        super().__init__(interval_s, clock)
        base = handle if isinstance(handle, str) else handle.url
        if not base:
            raise ValueError("MetricsProbe needs a server URL")
        if headers is None and hasattr(handle, "headers") and callable(handle.headers):
            headers = handle.headers()
        engine = engine or getattr(handle, "dialect", None) or default()
        self.dialect = engine.metrics
        self.url = base.rstrip("/") + engine.paths.metrics
        self.names = names
        # what sample_once parses: its names, the older names that alias to them, the simulator's GPU gauge
        gauge = () if self.dialect.sim_gpu_gauge is None else (self.dialect.sim_gpu_gauge,)
        self._lines = frozenset({*names, *gauge, *self.dialect.older_names_of(names)})
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
        snap = parse_metrics(text, self.dialect)
        snap.t = t
        self.last = snap
        return snap

    async def sample_once(self) -> list[Sample]:
        text, t = await self.fetch()
        # a few gauges, not the histograms' buckets
        snap = parse_metrics(only_names(text, self._lines, self.dialect), self.dialect)
        snap.t = t
        out = [Sample(snap.t, "metrics", n, snap.values[n]) for n in self.names if n in snap.values]
        gauge = self.dialect.sim_gpu_gauge
        if gauge is not None and gauge in snap.values:
            # The simulated server states the device memory a real host would show; labelled as such.
            out.append(Sample(snap.t, "gpu", "gpu_mem_used_mib", snap.values[gauge], "gpu=0,simulated=1"))
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
        self._nvml: ModuleType | None = None
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
            out.append(Sample(t, "gpu", "gpu_mem_used_mib", self._mem_used(nv, h) / 2**20, f"gpu={i}"))
            # Utilisation is not exposed everywhere (some containers, MIG slices): memory still counts.
            with contextlib.suppress(Exception):
                util = nv.nvmlDeviceGetUtilizationRates(h).gpu
                out.append(Sample(t, "gpu", "gpu_util", float(util), f"gpu={i}"))
        return out

    @staticmethod
    def _mem_used(nv: ModuleType, handle: object) -> float:
        """Bytes in use as nvidia-smi shows them (v2 excludes driver-reserved memory; v1 as a fallback)."""
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
