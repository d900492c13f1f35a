"""The report contract (README.md, first paragraph): the fields a study's data must fill before anything may name
its winner. One home, read by the read model's winner decision and by the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sweep.store import RunRecord
from sweep.views.steps import measured_steps


@dataclass(frozen=True)
class ContractInput:
    """What the contract is judged on: the environment row, the stored profile JSON, the study's runs and the
    ranked winner's configuration id (None: judged over every configuration's steps)."""

    env: Mapping[str, object]
    profile_raw: Mapping[str, object]
    runs: Sequence[RunRecord]
    winner_id: int | None


def _all(c: ContractInput, col: str) -> bool:
    """Per-step fields are judged per configuration: over the winner's measured steps (everyone's without one)."""
    runs = [r for r in c.runs if c.winner_id is None or r.server_config_id == c.winner_id]
    steps = measured_steps(runs)
    return bool(steps) and all(r.get(col) is not None for r in steps)


CONTRACT: dict[str, Callable[[ContractInput], object]] = {
    "model path": lambda c: c.env.get("model_path"),
    "SGLang version": lambda c: c.env.get("sglang_version"),
    "GPU model": lambda c: c.env.get("gpu_name"),
    "parallel configuration": lambda c: c.env.get("parallel"),
    "input distribution": lambda c: c.profile_raw.get("workload"),
    "arrival pattern": lambda c: c.profile_raw.get("arrival"),
    "concurrency": lambda c: c.runs and [r.concurrency for r in c.runs],
    "warm-up amount": lambda c: c.runs and c.runs[0].get("warmup_requests") is not None,
    "measured duration": lambda c: c.runs and c.runs[0].get("window_s"),
    "mean throughput": lambda c: _all(c, "output_tps"),
    "TTFT P50/P99": lambda c: _all(c, "ttft_p50_ms") and _all(c, "ttft_p99_ms"),
    "TPOT P50/P99": lambda c: _all(c, "tpot_p50_ms") and _all(c, "tpot_p99_ms"),
    "goodput": lambda c: _all(c, "goodput_tps"),
    "cache hit rate": lambda c: _all(c, "cache_hit_rate"),
    "preemption count": lambda c: _all(c, "retractions"),
    "peak GPU memory": lambda c: _all(c, "peak_gpu_mem_mib"),
}


def missing_fields(data: ContractInput) -> list[str]:
    """Contract fields the data cannot fill; a study with any may not name a winner."""
    missing = []
    for name, probe in CONTRACT.items():
        try:
            ok = probe(data)
        except (KeyError, TypeError, IndexError):
            ok = None
        if ok in (None, False, "", []):
            missing.append(name)
    return missing
