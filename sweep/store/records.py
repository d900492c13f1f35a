"""Typed rows the store's reads return (frozen dataclasses, one per table or view), instead of untyped row dicts.

Each record is built in one place from a SQLAlchemy row mapping (`from_row`); a column this version does not
know is ignored, a missing one reads as its default. Where a caller picks a column by a name it is given (`sweep runs
--columns`, `--format json|csv`, `sweep export`), a record offers `get(name)` / `columns()` (`Cell`: a scalar); code
that knows its column reads the field (the report, the views and the terminal do).
Samples come back as sweep.core.types.Sample (t relative to the window start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Self

from sweep.analysis.run_stats import COLUMNS, RunStats
from sweep.core.numbers import as_float, as_int
from sweep.core.types import CUT, JSON, Cell, Flags, Placement, ServerConfig, fixed_flags, flag_json_value

if TYPE_CHECKING:
    from sweep.analysis.ladder_steps import LadderStep  # the knee's inputs: loaded where a step is judged
    from sweep.analysis.tiers import (
        StoredRequest,  # numpy and the profile: imported where a request is judged
    )

STAT_COLUMNS = COLUMNS  # the stat columns of `runs` (lent by sweep.store)
_PLACEMENT = tuple(f.name for f in fields(Placement))


def utcnow() -> datetime:
    """Now as naive UTC, the one timestamp convention of the database."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_utc(when: datetime) -> datetime:
    """A caller's datetime as naive UTC (naive input is taken to be UTC already)."""
    return when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def _opt_int(v: object) -> int | None:
    return None if v is None else as_int(v)


def _opt_float(v: object) -> float | None:
    return None if v is None else as_float(v)


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


def _when(v: object) -> datetime | None:
    return v if isinstance(v, datetime) else None


def placement_of(row: Mapping[str, object]) -> Placement:
    """The placement columns of a runs / server_configs row."""
    return Placement(_opt_int(row.get("worker_id")), _opt_str(row.get("host")), _opt_str(row.get("gpu_name")),
                     _opt_str(row.get("gpu_index")), _opt_float(row.get("gpu_memory_mib")),
                     _opt_str(row.get("gpu_driver")))


def stats_of(row: Mapping[str, object]) -> RunStats | None:
    """A row's window statistics, or None when it stores none (a window still running, or failed before its end)."""
    if all(row.get(c) is None for c in STAT_COLUMNS):
        return None
    return RunStats.from_row(row)


class Record:
    """The one base of the store's records: built from a row mapping by field name (a column this version does not
    know is ignored, a missing one reads as its default), and read back by column name. A record whose columns are
    not its fields one to one (knobs, statistics, placement) overrides `from_row` and `columns`."""

    __dataclass_fields__: ClassVar[dict[str, Field[object]]]  # every record is a dataclass (what fields() reads)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Self:
        """The record of one row."""
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})

    def columns(self) -> dict[str, Cell]:
        """Every column by name, flat."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def get(self, name: str) -> object:
        """One column by name; KeyError for a name that is no column of the record (a misspelt column fails loudly,
        it never reads as an unset value). Code that knows its column reads the field instead."""
        columns = self.columns()
        if name not in columns:
            raise no_column(self, name)
        return columns[name]


def no_column(record: object, name: str) -> KeyError:
    """The error of a column name a record does not have."""
    return KeyError(f"{type(record).__name__} has no column {name!r}")


@dataclass(frozen=True)
class WorkerRecord(Record):
    """One sweep_workers row: a `sweep worker` process that joined a study (id None: the stand-in "this study"
    row of a study stored before workers existed)."""

    id: int | None
    label: str
    status: str  # running | done | lost
    host: str | None = None
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES of its servers
    study_id: int | None = None
    pid: int | None = None
    process_started: float | None = None  # the pid's create time: a reused pid is another process
    sweep_version: str | None = None
    fingerprint: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class StudyRecord(Record):
    """One sweep_studies row: one sweep of one profile."""

    id: int
    name: str
    profile_name: str = ""
    profile_json: str = "{}"  # the profile as it was stored (another version's may no longer validate)
    fingerprint: str = ""
    sampler: str = ""
    simulated: bool = False
    driver: str = ""
    status: str = "running"
    optuna_study_name: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    winner_config_id: int | None = None
    report_path: str | None = None


@dataclass(frozen=True)
class WinnerRecord(Record):
    """One study_winners row: a study's winner in one SLA tier as decided when the study ended (server_config_id
    None: no winner named, `why` says why). Goodput and its interval are output tokens/s inside the SLA."""

    tier: str
    is_primary: bool
    server_config_id: int | None = None
    label: str | None = None
    knobs_json: str | None = None  # the set knobs as a JSON object
    phase: str | None = None  # final, or screen when the winner rests on screening windows
    concurrency: int | None = None
    goodput_tps: float | None = None
    goodput_ci_low: float | None = None
    goodput_ci_high: float | None = None
    why: str | None = None
    study_id: int | None = None
    written_at: datetime | None = None

    def knobs(self) -> dict[str, JSON]:
        """The winner's set knobs ({} when none is named, or for SGLang's defaults)."""
        return dict(json.loads(self.knobs_json)) if self.knobs_json else {}


@dataclass(frozen=True)
class PriorRecord(Record):
    """One study_priors row: a configuration's place in the simulated prior of a study (search.prior: sim)."""

    rank: int
    label: str
    knobs_json: str = "{}"
    sim_goodput_tps: float | None = None  # None: infeasible on the simulator
    dropped: bool = False  # not measured by the real study (more than `margin` below the simulated best)
    margin: float | None = None
    prior_study: str = ""
    study_id: int | None = None
    knee_concurrency: float | None = None  # the simulated knee's load (the prior's predicted knee)
    reason: str | None = None  # why the prior dropped it (None: kept)

    def knobs(self) -> dict[str, JSON]:
        """The configuration's searched knobs (the real study's trial parameters)."""
        return dict(json.loads(self.knobs_json))


def config_of_row(row: Mapping[str, object]) -> ServerConfig:
    """The configuration of a server_configs row: its knob columns and its flags_json (the other searched flags)."""
    raw = row.get("flags_json")
    flags = json.loads(str(raw)) if raw else {}
    return replace(ServerConfig.from_mapping(row),
                   flags=Flags({str(k): flag_json_value(v) for k, v in flags.items()} if isinstance(flags, dict) else {}))


def labels_of(configs: Sequence[ConfigRecord]) -> dict[int, str]:
    """Each configuration's label (ServerConfig.label) without the flags set alike in all of them: labels show only
    the flags that vary across the study (its fixed flags are in every launch command, and `sweep show`)."""
    searched = [c.config for c in configs if c.config.knobs()]  # SGLang's defaults (nothing set) aside
    hide = fixed_flags(searched) if len({c.key() for c in searched}) > 1 else frozenset()  # one: its label says all
    return {c.id: c.config.label(hide=hide) for c in configs}


@dataclass(frozen=True)
class ConfigRecord(Record):
    """One server_configs row: a launched (or attempted) configuration, its knobs, where it ran, why its ladder
    stopped and the refined SLA boundary (None: not refined or not bracketed)."""

    id: int
    config: ServerConfig = field(default_factory=ServerConfig)
    status: str = "pending"  # pending | running | completed | failed | infeasible | aborted
    study_id: int | None = None
    trial_number: int | None = None
    config_key: str = ""
    launcher: str = ""
    argv: tuple[str, ...] = ()
    failure_reason: str | None = None
    startup_s: float | None = None
    log_path: str | None = None
    server_info_json: str | None = None
    stop_reason: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    placement: Placement = field(default_factory=Placement)
    boundary_concurrency: float | None = None
    boundary_ci_low: float | None = None
    boundary_ci_high: float | None = None
    boundary_shape: str | None = None  # smooth | cliff
    predicted_pool_tokens: int | None = None  # the launch prediction (sweep.launchers.prediction)
    predicted_starts: bool | None = None
    predicted_startup_s: float | None = None
    pool_tokens: int | None = None  # the server's own max_total_num_tokens

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> ConfigRecord:
        """The record of a server_configs row (knobs, argv_json and placement columns gathered)."""
        argv = json.loads(str(row.get("argv_json") or "[]"))
        return cls(
            id=as_int(row["id"]), config=config_of_row(row), status=str(row.get("status") or "pending"),
            study_id=_opt_int(row.get("study_id")), trial_number=_opt_int(row.get("trial_number")),
            config_key=str(row.get("config_key") or ""), launcher=str(row.get("launcher") or ""),
            argv=tuple(str(a) for a in argv), failure_reason=_opt_str(row.get("failure_reason")),
            startup_s=_opt_float(row.get("startup_s")), log_path=_opt_str(row.get("log_path")),
            server_info_json=_opt_str(row.get("server_info_json")), stop_reason=_opt_str(row.get("stop_reason")),
            created_at=_when(row.get("created_at")), finished_at=_when(row.get("finished_at")),
            placement=placement_of(row), boundary_concurrency=_opt_float(row.get("boundary_concurrency")),
            boundary_ci_low=_opt_float(row.get("boundary_ci_low")),
            boundary_ci_high=_opt_float(row.get("boundary_ci_high")),
            boundary_shape=_opt_str(row.get("boundary_shape")),
            predicted_pool_tokens=_opt_int(row.get("predicted_pool_tokens")),
            predicted_starts=None if row.get("predicted_starts") is None else bool(row.get("predicted_starts")),
            predicted_startup_s=_opt_float(row.get("predicted_startup_s")), pool_tokens=_opt_int(row.get("pool_tokens")))

    def label(self) -> str:
        """The knobs as short text (ServerConfig.label)."""
        return self.config.label()

    def resolved(self) -> ServerConfig:
        """The knobs the server ran with: this configuration's, and each one it left to the server (SGLang's
        defaults: every knob) as the server resolved it (its /server_info, stored at launch); a knob nothing says
        stays None (no launch stored, or a value that does not parse)."""
        try:
            info = json.loads(self.server_info_json or "{}")
            told = ServerConfig.from_mapping(info if isinstance(info, dict) else {})
        except ValueError:  # json.JSONDecodeError too
            return self.config
        return replace(ServerConfig.from_mapping({**told.columns(), **{k: v for k, v in self.config.columns().items()
                                                                         if v is not None}}), flags=self.config.flags)

    def columns(self) -> dict[str, Cell]:
        """Every server_configs column by name, flat (knobs, argv_json and placement in place)."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("config", "argv", "placement")}
        return {**own, **self.config.columns(), "flags_json": self.config.flags_json(),
                "argv_json": json.dumps(list(self.argv)), **self.placement.columns()}


@dataclass(frozen=True)
class RunRecord(Record):
    """One runs row: one measured window (a ladder step, a soak, or a cross-check reference-client row)."""

    id: int
    server_config_id: int
    concurrency: int
    status: str = "completed"  # running | completed | failed | aborted
    phase: str = "final"  # screen | final | refine | soak
    study_id: int | None = None
    reason: str | None = None
    fingerprint: str = ""
    simulated: bool = False
    driver: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reference_for_run_id: int | None = None  # a reference-client row: sweep's own run of the same step
    offered_rps: float | None = None  # an open-loop rate ladder's window: the rate it was offered (its load)
    short_window: bool = False  # a far step's short window (search.far_windows): draws the curve, never decides
    planned_measure_s: float | None = None  # the measured length the window was planned with (driver seconds)
    stats: RunStats | None = None  # None: no statistics stored (still running, or failed before its window ended)
    placement: Placement = field(default_factory=Placement)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> RunRecord:
        """The record of a runs row or a run_summary row (whose id is run_id)."""
        rid = row["id"] if "id" in row else row["run_id"]
        return cls(id=as_int(rid), server_config_id=as_int(row["server_config_id"]),
                   concurrency=as_int(row["concurrency"]), status=str(row.get("status") or "completed"),
                   phase=str(row.get("phase") or "final"), study_id=_opt_int(row.get("study_id")),
                   reason=_opt_str(row.get("reason")), fingerprint=str(row.get("fingerprint") or ""),
                   simulated=bool(row.get("simulated")), driver=str(row.get("driver") or ""),
                   started_at=_when(row.get("started_at")), finished_at=_when(row.get("finished_at")),
                   reference_for_run_id=_opt_int(row.get("reference_for_run_id")),
                   offered_rps=_opt_float(row.get("offered_rps")), short_window=bool(row.get("short_window")),
                   planned_measure_s=_opt_float(row.get("planned_measure_s")), stats=stats_of(row),
                   placement=placement_of(row))

    def get(self, name: str) -> object:
        """One column by name (its own, a stat column or a placement column; None where the run stores no
        statistics); KeyError for a name that is no column of `runs`."""
        if name in STAT_COLUMNS:
            return None if self.stats is None else self.stats.get(name)
        if name in _PLACEMENT:
            return getattr(self.placement, name)
        if name in ("stats", "placement") or name not in _RUN_FIELDS:
            raise no_column(self, name)
        return getattr(self, name)

    def columns(self) -> dict[str, Cell]:
        """Every column of the row, flat, by name (the stats and placement in place)."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("stats", "placement")}
        stats = self.stats.columns() if self.stats is not None else dict.fromkeys(STAT_COLUMNS)
        return {**own, **stats, **self.placement.columns()}

    def step(self) -> LadderStep:
        """This completed window as a ladder step (ValueError when it stores no statistics)."""
        if self.stats is None:
            raise ValueError(f"run {self.id} has no statistics (status {self.status})")
        from sweep.analysis.ladder_steps import LadderStep

        return LadderStep(self.id, self.concurrency, self.phase, self.stats, self.server_config_id, self.offered_rps,
                          self.short_window)

    @property
    def measured(self) -> bool:
        """A step a conclusion can rest on: completed, not the soak, with at least one completed request."""
        return (self.status == "completed" and self.phase != "soak"
                and (self.stats is None or self.stats.n_completed is None or self.stats.n_completed > 0))


_RUN_FIELDS = frozenset(f.name for f in fields(RunRecord))
_COUNTS = ("request_count", "warmup_count", "sample_count")


@dataclass(frozen=True)
class RunSummary(Record):
    """One run_summary row (the view `sweep runs` lists): the run, its study and its configuration's knobs;
    `get_run` adds the request and sample counts."""

    run: RunRecord
    study_name: str
    profile_name: str
    config: ServerConfig
    trial_number: int | None = None
    config_key: str = ""
    launcher: str = ""
    config_status: str = ""
    request_count: int | None = None
    warmup_count: int | None = None
    sample_count: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> RunSummary:
        """The record of a run_summary row (plus counts where present)."""
        return cls(RunRecord.from_row(row), str(row.get("study_name") or ""), str(row.get("profile_name") or ""),
                   config_of_row(row), _opt_int(row.get("trial_number")),
                   str(row.get("config_key") or ""), str(row.get("launcher") or ""),
                   str(row.get("config_status") or ""), _opt_int(row.get("request_count")),
                   _opt_int(row.get("warmup_count")), _opt_int(row.get("sample_count")))

    def get(self, name: str) -> object:
        """One column by name (the counts too, None where `get_run` did not add them); KeyError for a name that is
        no column of run_summary."""
        if name in _COUNTS:
            return getattr(self, name)
        return super().get(name)

    def columns(self) -> dict[str, Cell]:
        """Every column by name, flat (run_id and id both the run's id), for tables and JSON output."""
        head: dict[str, Cell] = {"run_id": self.run.id, "study_name": self.study_name,
                                   "profile_name": self.profile_name, "trial_number": self.trial_number,
                                   "config_key": self.config_key, **self.config.columns(),
                                   "flags_json": self.config.flags_json(), **dict(self.config.flags),
                                   "launcher": self.launcher, "config_status": self.config_status}
        counts = {k: v for k, v in (("request_count", self.request_count), ("warmup_count", self.warmup_count),
                                    ("sample_count", self.sample_count)) if v is not None}
        return {**head, **self.run.columns(), **counts}


@dataclass(frozen=True)
class StoredRequestRow(Record):
    """One stored requests row; times in seconds from the window start, latencies in ms."""

    idx: int
    scheduled_at: float
    sent_at: float
    warmup: bool = False
    modality: str = "text"
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    sent_prompt_tokens: int | None = None
    sent_output_tokens: int | None = None
    cached_tokens: int = 0
    num_retractions: int = 0
    error: str | None = None
    error_kind: str | None = None
    id: int | None = None
    run_id: int | None = None
    turn: int | None = None  # sessions (workload.sessions); idx is then the session's number
    branch: int | None = None
    context_tokens: int | None = None
    session_turns: int | None = None

    def latency(self, name: str) -> float | None:
        """ttft_ms, tpot_ms or e2e_ms by name."""
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}[name]

    def judged(self) -> StoredRequest:
        """What an SLA tier and the boundary estimate read of this request."""
        from sweep.analysis.tiers import StoredRequest

        cut = self.error_kind == CUT
        return StoredRequest(self.scheduled_at, self.warmup, self.error is not None and not cut, self.e2e_ms is not None,
                             self.ttft_ms, self.tpot_ms, self.e2e_ms, self.output_tokens,
                             (self.idx, self.turn, self.session_turns), cut)

