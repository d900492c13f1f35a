"""The steps a conclusion can rest on, and the report contract's per-step fields one configuration cannot fill."""

from __future__ import annotations

from collections.abc import Sequence

from sweep.store import RunRecord

# The per-step fields of the contract, by the runs columns that fill them.
STEP_FIELDS = {"mean throughput": ("output_tps",), "TTFT P50/P99": ("ttft_p50_ms", "ttft_p99_ms"),
               "TPOT P50/P99": ("tpot_p50_ms", "tpot_p99_ms"), "goodput": ("goodput_tps",),
               "cache hit rate": ("cache_hit_rate",), "preemption count": ("retractions",),
               "peak GPU memory": ("peak_gpu_mem_mib",)}


def measured_steps(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The steps a conclusion can rest on: completed, not the soak, with at least one completed request (a
    step whose every request failed has no latency to report: its error rate is its data, not a gap)."""
    return [r for r in runs if r.measured]


def config_missing(runs: Sequence[RunRecord]) -> list[str]:
    """Per-step contract fields that one configuration's measured steps cannot fill."""
    steps = measured_steps(runs)
    return [name for name, cols in STEP_FIELDS.items()
            if not steps or any(r.get(col) is None for r in steps for col in cols)]
