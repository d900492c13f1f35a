"""The report contract (README.md, first paragraph): the fields a study's data must fill before anything may name
its winner. One home, read by the read model's winner decision and by the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sweep.analysis.run_stats import RunStats
from sweep.core.types import JSON
from sweep.store import EnvironmentRecord, RunRecord
from sweep.views.steps import STEP_FIELDS, filled, measured_steps


@dataclass(frozen=True)
class ContractInput:
    """What the contract is judged on: the environment row, the stored profile JSON, the study's runs and the
    ranked winner's configuration id (None: judged over every configuration's steps)."""

    env: EnvironmentRecord
    profile_raw: Mapping[str, JSON]
    runs: Sequence[RunRecord]
    winner_id: int | None


def _all(c: ContractInput, name: str) -> bool:
    """Per-step fields are judged per configuration: over the winner's measured steps (everyone's without one)."""
    runs = [r for r in c.runs if c.winner_id is None or r.server_config_id == c.winner_id]
    steps = measured_steps(runs)
    return bool(steps) and all(filled(r, name) for r in steps)


def _per_step(name: str) -> Callable[[ContractInput], object]:
    return lambda c: _all(c, name)


def _first(c: ContractInput) -> RunStats | None:
    """The statistics of the study's first window (None: no window, or none stored)."""
    return c.runs[0].stats if c.runs else None


CONTRACT: dict[str, Callable[[ContractInput], object]] = {
    "model path": lambda c: c.env.model_path,
    "SGLang version": lambda c: c.env.sglang_version,
    "GPU model": lambda c: c.env.gpu_name,
    "parallel configuration": lambda c: c.env.parallel,
    "input distribution": lambda c: c.profile_raw.get("workload"),
    "arrival pattern": lambda c: c.profile_raw.get("arrival"),
    "concurrency": lambda c: c.runs and [r.concurrency for r in c.runs],
    "warm-up amount": lambda c: (s := _first(c)) is not None and s.warmup_requests is not None,
    "measured duration": lambda c: (s := _first(c)) is not None and s.window_s,
    **{name: _per_step(name) for name in STEP_FIELDS},  # mean throughput, TTFT and TPOT P50/P99, goodput, ...
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
