"""A study's environment as the store reads it back: one frozen record with the environments table's columns and
the launcher facts its extra_json keeps (sweep.core.environment.Environment is what goes in; this is what comes out).

Readers (the report's setup and contract, `sweep history`, the launch prediction) read its fields, so a misspelt
fact is a type error, never a silent "unknown". An empty record (`EnvironmentRecord()`) stands for a study whose
environment was never recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from sweep.core.numbers import as_float, as_int
from sweep.core.types import JSON


def _text(v: object) -> str | None:
    return None if v is None or v == "" else str(v)


def _number(v: JSON) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _count(v: JSON) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class DatasetFit:
    """The dataset fitted to the server's context (workload.dataset.overlong; sweep.workload.overlong.input_facts):
    entries in the dataset, how many were clipped or dropped to fit, the context and the policy."""

    entries: int | None = None
    clipped: int = 0
    dropped: int = 0
    context_len: int | None = None
    policy: str | None = None

    @classmethod
    def of(cls, stored: dict[str, JSON]) -> DatasetFit:
        """The stored JSON object back (a key missing or of another type: its default)."""
        return cls(_count(stored.get("entries")), _count(stored.get("clipped")) or 0,
                   _count(stored.get("dropped")) or 0, _count(stored.get("context_len")), _text(stored.get("policy")))


@dataclass(frozen=True)
class TraceTiming:
    """A replayed trace's own timing (sweep.profile.trace.burstiness from dataset.start_s): its sends over its span,
    the recorded rate, the gaps' CV (1 = Poisson) and the peak rate over the mean."""

    sends: int | None = None
    span_s: float | None = None
    gap_cv: float | None = None
    peak_ratio: float | None = None
    recorded_rps: float | None = None
    start_s: float | None = None

    @classmethod
    def of(cls, stored: dict[str, JSON]) -> TraceTiming:
        """The stored JSON object back (a key missing or not a number: None)."""
        return cls(_count(stored.get("sends")), _number(stored.get("span_s")), _number(stored.get("gap_cv")),
                   _number(stored.get("peak_ratio")), _number(stored.get("recorded_rps")),
                   _number(stored.get("start_s")))


@dataclass(frozen=True)
class EnvironmentRecord:
    """One environments row (the latest of a study), its extra_json read back into the fields below."""

    id: int | None = None
    study_id: int | None = None
    host: str | None = None
    sglang_version: str | None = None  # the engine's version (the server's own, from /server_info, where it said)
    torch_version: str | None = None
    cuda_version: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_memory_mib: float | None = None
    driver_version: str | None = None
    python_version: str | None = None
    model_path: str | None = None
    simulated: bool = False
    # kept in extra_json
    parallel: str | None = None  # "TP 2, DP 1"
    sim_unmodelled_flags: tuple[str, ...] = ()  # flags the simulator accepted and ignored
    # the study's dataset (sweep.workload.overlong.input_facts): entries fitted to the context, a trace's timing
    dataset_fit: DatasetFit | None = None
    trace: TraceTiming | None = None
    extra: dict[str, JSON] = field(default_factory=dict)  # every other launcher fact (kind, engine, url, versions...)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> EnvironmentRecord:
        """The record of an environments row (its columns by name, extra_json among them)."""
        raw = row.get("extra_json")
        loaded = json.loads(str(raw)) if raw else {}
        extra: dict[str, JSON] = dict(loaded) if isinstance(loaded, dict) else {}
        fit, trace, flags = extra.pop("dataset_fit", None), extra.pop("trace", None), extra.pop("sim_unmodelled_flags", [])
        parallel = extra.pop("parallel", None)
        for name in _COLUMN_NAMES:  # a column wins over an extra key of the same name
            extra.pop(name, None)
        get = row.get
        count, mib = get("gpu_count"), get("gpu_memory_mib")
        return cls(id=_int(get("id")), study_id=_int(get("study_id")), host=_text(get("host")),
                   sglang_version=_text(get("sglang_version")), torch_version=_text(get("torch_version")),
                   cuda_version=_text(get("cuda_version")), gpu_name=_text(get("gpu_name")),
                   gpu_count=_int(count), gpu_memory_mib=None if mib is None else as_float(mib),
                   driver_version=_text(get("driver_version")), python_version=_text(get("python_version")),
                   model_path=_text(get("model_path")), simulated=bool(get("simulated")),
                   parallel=_text(parallel),
                   sim_unmodelled_flags=tuple(str(f) for f in flags) if isinstance(flags, list) else (),
                   dataset_fit=DatasetFit.of(fit) if isinstance(fit, dict) else None,
                   trace=TraceTiming.of(trace) if isinstance(trace, dict) else None,
                   extra=extra)


def _int(v: object) -> int | None:
    return None if v is None else as_int(v)


_COLUMN_NAMES = frozenset(f.name for f in fields(EnvironmentRecord)) - {"parallel", "sim_unmodelled_flags",
                                                                         "dataset_fit", "trace", "extra"}
