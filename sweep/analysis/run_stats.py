"""The statistics of one measured window as a frozen record: what sweep.analysis.measure computes and `runs` stores.

Each field is a plain column of `runs` with the same name (sweep.store.models builds the table from these
fields); the definitions are in sweep.analysis.measure's docstring. ClientStats holds the load generator's self-check
figures (nested in RunStats, flat in `runs`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LatencyMetric = Literal["ttft", "tpot", "itl", "e2e"]
StatValue = float | int | bool | str | None  # one stat column's value (the fields' types below)
STORED_PERCENTILES = (50, 90, 95, 99)  # the percentiles `runs` keeps of each latency (its *_p50_ms ... *_p99_ms)


@dataclass(frozen=True)
class ClientStats:
    """The load generator's own figures over the window (sweep.analysis.measure_client defines them); None where no client
    process ran (the virtual driver). CPU is in cores: client_cpu_frac the busiest process, client_cpu_total all."""

    loop_lag_p99_ms: float | None = None  # how late a 20 ms sleep woke (busiest process); client_bound judges it
    loop_lag_max_ms: float | None = None
    dispatch_lag_p99_ms: float | None = None
    dispatch_lag_max_ms: float | None = None
    cap_wait_p99_ms: float | None = None  # open loop: how long a due request waited for an in-flight slot
    cap_waited: int | None = None
    client_cpu_frac: float | None = None
    client_cpu_total: float | None = None
    client_procs: int | None = None
    max_in_flight_seen: int | None = None


@dataclass(frozen=True)
class RunStats:
    """All statistics of one window (sweep.analysis.measure.compute_stats); see sweep.analysis.measure for the definitions."""

    n_started: int
    n_completed: int
    n_errors: int
    n_warmup: int
    error_rate: float | None
    throughput_rps: float | None
    input_tps: float | None
    output_tps: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    ttft_mean_ms: float | None
    ttft_max_ms: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p95_ms: float | None
    tpot_p99_ms: float | None
    tpot_mean_ms: float | None
    tpot_max_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None
    itl_mean_ms: float | None
    itl_max_ms: float | None
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    e2e_mean_ms: float | None
    e2e_max_ms: float | None
    goodput_rps: float | None
    goodput_tps: float | None
    attainment: float | None
    cache_hit_rate: float | None
    cache_hit_rate_server: float | None
    retractions: int
    queue_len_mean: float | None
    queue_len_max: float | None
    kv_usage_max: float | None
    running_mean: float | None
    peak_gpu_mem_mib: float | None
    ttft_p99_ci_low: float | None
    ttft_p99_ci_high: float | None
    tpot_p99_ci_low: float | None
    tpot_p99_ci_high: float | None
    goodput_rps_ci_low: float | None
    goodput_rps_ci_high: float | None
    steady: bool
    drift: float | None
    client_bound: bool
    passes_sla: bool
    sla_failures: str
    client: ClientStats  # its fields are columns of their own, here in the column order
    window_s: float
    warmup_requests: int  # requests completed when the window opened (before issue 28: the profile's warm-up count)
    warmup_s: float  # seconds from the step's start to the window's opening (before: the profile's warmup_seconds)
    # the hit rate a perfect prefix cache gets on what the window sent, unbounded and capped at the configuration's
    # KV pool (sweep.ladder.step_inputs, sweep.workload.prefix_cache): filled by the ladder, not by measure
    cache_hit_rate_predicted: float | None = None
    cache_hit_rate_capped: float | None = None
    # How the measured window opened (issue 28 §1): which warm-up condition was met last -- "requests" (the warm-up
    # requests completed), "seconds" (warmup_seconds passed) or "load" (every user had a request in flight / the
    # arrivals ran one mean gap per user) -- or "bound" (the warm-up did not end within its bound, sweep.profile.warmup,
    # and the window opened anyway); None for rows written before
    window_opened_by: str | None = None
    # Requests still running when the drain ended (issue 28 §5): cut by the window's edge, not server errors
    n_cut: int | None = None
    # Why the window stopped before its end (issue 29, sweep.analysis.early_stop): "TTFT P95 cannot pass (e-value ...)";
    # None when it ran its full length (window_s is the seconds it measured either way)
    stopped_early_by: str | None = None
    # A window of sessions (workload.sessions; sweep.analysis.sessions.session_columns defines them, issue 31 §4),
    # None for single requests: filled by the ladder and the cross-check's reference, not by measure
    sessions_completed: int | None = None
    turns_per_session: float | None = None
    session_p50_s: float | None = None
    session_p90_s: float | None = None
    cache_hit_turn1: float | None = None
    cache_hit_later: float | None = None
    later_prompt_tokens: float | None = None

    def columns(self) -> dict[str, StatValue]:
        """The `runs` columns of this window, in COLUMNS order (the client's figures flattened in place)."""
        out: dict[str, StatValue] = {}
        for f in dataclasses.fields(self):
            if f.name == "client":
                out.update(dataclasses.asdict(self.client))
            else:
                out[f.name] = getattr(self, f.name)
        return out

    def percentile_ms(self, metric: LatencyMetric, q: float) -> float | None:
        """`metric`'s P`q` in ms where the runs table keeps that percentile (STORED_PERCENTILES), else None."""
        by_q = {"ttft": (self.ttft_p50_ms, self.ttft_p90_ms, self.ttft_p95_ms, self.ttft_p99_ms),
                "tpot": (self.tpot_p50_ms, self.tpot_p90_ms, self.tpot_p95_ms, self.tpot_p99_ms),
                "itl": (self.itl_p50_ms, self.itl_p90_ms, self.itl_p95_ms, self.itl_p99_ms),
                "e2e": (self.e2e_p50_ms, self.e2e_p90_ms, self.e2e_p95_ms, self.e2e_p99_ms)}[metric]
        return by_q[STORED_PERCENTILES.index(q)] if q in STORED_PERCENTILES else None

    def get(self, name: str) -> StatValue:
        """One `runs` stat column by name (a client figure too); None for a name that is no stat column."""
        if name in _CLIENT_FIELDS:
            figure: float | int | None = getattr(self.client, name)
            return figure
        return getattr(self, name, None) if name in COLUMN_TYPES else None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunStats:
        """A stored `runs` row (or any mapping with these columns) back as RunStats; a missing column reads None.
        The row's values are the database driver's (Any): the table's column types (models.py, from these fields)
        are what types them."""
        figures: dict[str, Any] = {f.name: row.get(f.name) for f in dataclasses.fields(ClientStats)}
        own: dict[str, Any] = {f.name: row.get(f.name) for f in dataclasses.fields(cls) if f.name != "client"}
        client = ClientStats(**figures)
        return cls(**own, client=client)


def _column_types() -> dict[str, type]:
    """Each column's Python type (int, float, bool or str) from the fields' annotations, in column order."""
    client = typing.get_type_hints(ClientStats)
    out: dict[str, type] = {}
    for name, hint in typing.get_type_hints(RunStats).items():
        for col, h in (client.items() if name == "client" else [(name, hint)]):
            out[col] = next((a for a in typing.get_args(h) if a is not type(None)), h)
    return out


# Every stat column of `runs`, in order, and its Python type: derived from the fields above, listed nowhere else.
COLUMN_TYPES: dict[str, type] = _column_types()
COLUMNS: tuple[str, ...] = tuple(COLUMN_TYPES)
_CLIENT_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(ClientStats))
