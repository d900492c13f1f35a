"""The steps a conclusion can rest on, and the report contract's per-step fields one configuration cannot fill."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sweep.analysis.run_stats import RunStats
from sweep.store import RunRecord

# The per-step fields of the contract, by the window statistics that fill them (fields, so mypy checks each name).
STEP_FIELDS: dict[str, tuple[Callable[[RunStats], object], ...]] = {
    "mean throughput": (lambda s: s.output_tps,),
    "TTFT P50/P99": (lambda s: s.ttft_p50_ms, lambda s: s.ttft_p99_ms),
    "TPOT P50/P99": (lambda s: s.tpot_p50_ms, lambda s: s.tpot_p99_ms),
    "goodput": (lambda s: s.goodput_tps,),
    "cache hit rate": (lambda s: s.cache_hit_rate,),
    "preemption count": (lambda s: s.retractions,),
    "peak GPU memory": (lambda s: s.peak_gpu_mem_mib,),
}


def measured_steps(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The steps a conclusion can rest on: completed, not the soak, with at least one completed request (a
    step whose every request failed has no latency to report: its error rate is its data, not a gap)."""
    return [r for r in runs if r.measured]


def config_missing(runs: Sequence[RunRecord]) -> list[str]:
    """Per-step contract fields that one configuration's measured steps cannot fill."""
    steps = measured_steps(runs)
    return [name for name in STEP_FIELDS if not steps or not all(filled(r, name) for r in steps)]


def filled(run: RunRecord, name: str) -> bool:
    """Whether `run` stores every statistic of the contract's per-step field `name` (a key of STEP_FIELDS)."""
    return run.stats is not None and all(get(run.stats) is not None for get in STEP_FIELDS[name])
