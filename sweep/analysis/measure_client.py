"""The load generator's own figures of one window, from the raw self-check readings the HTTP driver records.

Pure: ClientSamples (one per client process) and the measured window's bounds in, a ClientStats out.

- dispatch_lag_p99_ms / dispatch_lag_max_ms: how late the client sent what it meant to send, over the dispatches
  scheduled in the window, all processes pooled.
- cap_wait_p99_ms / cap_waited: open loop, how long a due request waited for an in-flight slot, and how many did.
- loop_lag_p99_ms / loop_lag_max_ms: how late a TICK_S sleep woke, over the ticks inside the window; the busiest
  process's (a stall in any one process delays that process's streams).
- client_cpu_frac: process CPU seconds per wall second between the first and last tick inside the window (all
  ticks when fewer than two fall inside), of the busiest process; client_cpu_total: the same summed over processes.
- client_procs: how many client processes ran; max_in_flight_seen: their peaks summed.
Without any client process (the virtual driver) every figure is None.
- is_client_bound / client_bound_reasons: whether those figures say the client may have limited the window, the
  rules of sweep.analysis.measure's docstring (client_bound).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sweep.analysis.run_stats import ClientStats
from sweep.core.types import ClientSamples
from sweep.profile import SLA

DISPATCH_LAG_LIMIT_MS = 50.0
CLIENT_CPU_LIMIT = 0.9
LOOP_LAG_LIMIT_MS = 20.0
LOOP_LAG_TTFT_FRACTION = 0.1
LOOP_STALL_FLOOR_MS = 100.0
LOOP_STALL_TTFT_FRACTION = 0.1


def cpu_fraction(ticks: np.ndarray, start: float, end: float) -> float:
    """Process CPU seconds per wall second between the ticks nearest the window's bounds (0 without ticks)."""
    if ticks.size == 0:
        return 0.0
    inside = ticks[(ticks[:, 0] >= start) & (ticks[:, 0] <= end)]
    if len(inside) < 2:
        inside = ticks
    if len(inside) < 2 or inside[-1, 0] <= inside[0, 0]:
        return 0.0
    return float((inside[-1, 2] - inside[0, 2]) / (inside[-1, 0] - inside[0, 0]))


def _lags_inside(ticks: np.ndarray, start: float, end: float) -> np.ndarray:
    """Lags of the ticks whose late interval [t - lag, t] overlaps the window: a stall that began inside it counts
    even when the tick that measured it woke after its end (a process suspended mid-window past its end)."""
    if ticks.size == 0:
        return np.zeros(0)
    lags: np.ndarray = ticks[(ticks[:, 0] >= start) & (ticks[:, 0] - ticks[:, 1] <= end), 1]
    return lags


def loop_lag_max(ticks: np.ndarray, start: float, end: float) -> float:
    """Largest event-loop lag (seconds) seen by ticks inside the window."""
    inside = _lags_inside(ticks, start, end)
    return float(inside.max()) if inside.size else 0.0


def loop_lag_p99(ticks: np.ndarray, start: float, end: float) -> float:
    """P99 of the event-loop lag (seconds) over the ticks inside the window."""
    inside = _lags_inside(ticks, start, end)
    return float(np.percentile(inside, 99)) if inside.size else 0.0


def _ms_p99(values: np.ndarray) -> float:
    return float(np.percentile(values, 99)) * 1000.0 if values.size else 0.0


def client_stats(samples: Sequence[ClientSamples], start: float, end: float) -> ClientStats:
    """The window's client figures (module docstring); all None without a client process."""
    if not samples:
        return ClientStats()
    lags = np.concatenate([s.dispatch_lags for s in samples])
    waits = np.concatenate([s.cap_waits for s in samples])
    cpus = [cpu_fraction(s.ticks, start, end) for s in samples]
    return ClientStats(
        dispatch_lag_p99_ms=_ms_p99(lags),
        dispatch_lag_max_ms=float(lags.max()) * 1000.0 if lags.size else 0.0,
        cap_wait_p99_ms=_ms_p99(waits),
        cap_waited=int(waits.size),
        loop_lag_p99_ms=max(loop_lag_p99(s.ticks, start, end) for s in samples) * 1000.0,
        loop_lag_max_ms=max(loop_lag_max(s.ticks, start, end) for s in samples) * 1000.0,
        client_cpu_frac=max(cpus),
        client_cpu_total=float(sum(cpus)),
        client_procs=len(samples),
        max_in_flight_seen=sum(s.max_in_flight_seen for s in samples),
    )


def is_client_bound(client: ClientStats, sla: SLA) -> bool:
    """Whether the load generator, not the server, may have limited the window (measure's client_bound)."""
    return bool(client_bound_reasons(client, sla))


def client_bound_reasons(client: ClientStats, sla: SLA) -> tuple[str, ...]:
    """Each client_bound rule the window's client figures break, in words; () when the client kept up."""
    out = []
    if (client.dispatch_lag_p99_ms or 0.0) > DISPATCH_LAG_LIMIT_MS:
        out.append(f"dispatch lag P99 {client.dispatch_lag_p99_ms:,.0f} ms > {DISPATCH_LAG_LIMIT_MS:.0f} ms")
    if (client.client_cpu_frac or 0.0) > CLIENT_CPU_LIMIT:
        out.append(f"client CPU {client.client_cpu_frac:.2f} cores > {CLIENT_CPU_LIMIT:g}")
    if client.loop_lag_p99_ms is not None and client.loop_lag_p99_ms > loop_lag_limit_ms(sla):
        out.append(f"event-loop lag P99 {client.loop_lag_p99_ms:,.0f} ms > {loop_lag_limit_ms(sla):.0f} ms")
    if client.loop_lag_max_ms is not None and client.loop_lag_max_ms > loop_stall_limit_ms(sla):
        out.append(f"event-loop stall {client.loop_lag_max_ms:,.0f} ms > {loop_stall_limit_ms(sla):.0f} ms")
    return tuple(out)


def loop_lag_limit_ms(sla: SLA) -> float:
    """The client event-loop lag P99 above which a window is client-bound: min(20 ms, 10% of the TTFT bound)."""
    return min(LOOP_LAG_LIMIT_MS, LOOP_LAG_TTFT_FRACTION * sla.ttft_ms)


def loop_stall_limit_ms(sla: SLA) -> float:
    """The longest single event-loop stall a window may hold and not be client-bound: max(100 ms, 10% of TTFT)."""
    return max(LOOP_STALL_FLOOR_MS, LOOP_STALL_TTFT_FRACTION * sla.ttft_ms)
