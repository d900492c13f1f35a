"""Tables of results.db as SQLAlchemy 2.0 declarative models; the schema itself is made by the migrations.

Table names are for people who query by hand. The studies table is `sweep_studies` because Optuna's
RDB storage shares the database and owns a table called `studies`. Timestamps are naive UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from sweep.analysis import run_stats
from sweep.core.types import KNOB_NAMES, RUN_STATUSES

CONFIG_STATUSES = ("pending", "running", "completed", "failed", "infeasible", "aborted")
RUN_PHASES = ("screen", "final", "refine", "soak")  # refine: a bisection window of a final ladder

# The per-window statistics, in the order they appear as columns of `runs`: the fields of sweep.analysis.run_stats.RunStats
# (what measure produces), so they are listed exactly once. Python type of each: int, float, bool or str.
STAT_COLUMNS: tuple[str, ...] = run_stats.COLUMNS
STAT_TYPES: dict[str, type] = run_stats.COLUMN_TYPES
# The window facts among them, which run_summary shows right after the run's own head columns.
WINDOW_COLUMNS: tuple[str, ...] = ("window_s", "warmup_requests", "warmup_s")

_SQL_TYPES: dict[type, type[TypeEngine[Any]]] = {int: Integer, bool: Boolean, str: Text, float: Float}


def _in(column: str, values: tuple[str, ...]) -> str:
    """SQL text of a CHECK that column holds one of values."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base with a deterministic constraint-naming convention (so migrations can name them)."""

    metadata = MetaData(naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class Study(Base):
    """One sweep of one profile: its search, its winner and its report."""

    __tablename__ = "sweep_studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    profile_name: Mapped[str] = mapped_column(String(200))
    profile_json: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    sampler: Mapped[str] = mapped_column(String(50))
    simulated: Mapped[bool] = mapped_column(Boolean)
    driver: Mapped[str] = mapped_column(String(50))
    status: Mapped[str] = mapped_column(String(20), default="running")
    optuna_study_name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    # No foreign key: server_configs already points here, and a cycle would complicate table creation.
    winner_config_id: Mapped[int | None] = mapped_column(Integer)
    report_path: Mapped[str | None] = mapped_column(Text)


class Worker(Base):
    """One `sweep worker` process that joined a study: where it runs and what code and workload it runs."""

    __tablename__ = "sweep_workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("sweep_studies.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(200))  # e.g. "gpu0-1": what progress lines call it
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    process_started: Mapped[float] = mapped_column(Float)  # the pid's create time: a reused pid is another process
    gpus: Mapped[str | None] = mapped_column(String(100))  # CUDA_VISIBLE_DEVICES of its servers
    sweep_version: Mapped[str] = mapped_column(String(100))
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20))  # running | done | lost
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)


class StudyWinnerRow(Base):
    """The winner of a study in one SLA tier, as the read model decided it when the study ended (one row per tier;
    no configuration and a `why` when none is named): the one stored fact the report, the page and `sweep show`
    name."""

    __tablename__ = "study_winners"
    __table_args__ = (UniqueConstraint("study_id", "tier"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("sweep_studies.id", ondelete="CASCADE"))
    tier: Mapped[str] = mapped_column(String(100))  # the tier's name; a single-`sla` profile's is "default"
    is_primary: Mapped[bool] = mapped_column(Boolean)  # the tier that steered the search
    server_config_id: Mapped[int | None] = mapped_column(Integer)  # None: no winner named (see why)
    label: Mapped[str | None] = mapped_column(Text)  # the knobs, e.g. "mrr=64 mem=0.85"
    knobs_json: Mapped[str | None] = mapped_column(Text)  # the set knobs as a JSON object
    phase: Mapped[str | None] = mapped_column(String(20))  # the knee's ladder: final, or screen (screen only)
    concurrency: Mapped[int | None] = mapped_column(Integer)  # the knee's client concurrency
    goodput_tps: Mapped[float | None] = mapped_column(Float)  # the knee's goodput, output tokens/s inside the SLA
    goodput_ci_low: Mapped[float | None] = mapped_column(Float)  # its 95% interval, output tokens/s
    goodput_ci_high: Mapped[float | None] = mapped_column(Float)
    why: Mapped[str | None] = mapped_column(Text)  # the binding constraint, or why no winner is named
    written_at: Mapped[datetime] = mapped_column(DateTime)


class StudyPriorRow(Base):
    """One configuration of a study's simulated prior (search.prior: sim): its rank in the simulator's study, the
    simulated knee goodput, and whether the real study measures it (dropped: more than the margin below the
    simulated best). Ranks 1..n are the order of the real study's first trials."""

    __tablename__ = "study_priors"
    __table_args__ = (UniqueConstraint("study_id", "rank"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("sweep_studies.id", ondelete="CASCADE"))  # the real study
    prior_study: Mapped[str] = mapped_column(String(200))  # the simulated study's name (same database)
    rank: Mapped[int] = mapped_column(Integer)  # 1 = the simulator's best
    label: Mapped[str] = mapped_column(Text)  # the knobs, e.g. "mrr=64 mem=0.85"
    knobs_json: Mapped[str] = mapped_column(Text)  # the searched knobs as a JSON object (the trial's parameters)
    sim_goodput_tps: Mapped[float | None] = mapped_column(Float)  # simulated knee goodput; None: infeasible there
    dropped: Mapped[bool] = mapped_column(Boolean)  # not measured by the real study (prior_margin)
    margin: Mapped[float | None] = mapped_column(Float)  # search.prior_margin when the ranking was made
    knee_concurrency: Mapped[float | None] = mapped_column(Float)  # the simulated knee's load (0018)
    reason: Mapped[str | None] = mapped_column(Text)  # why the prior dropped it (None: kept) (0018)


class Environment(Base):
    """The host, software and GPU a study ran on (one row per worker host)."""

    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("sweep_studies.id", ondelete="CASCADE"), index=True)
    host: Mapped[str | None] = mapped_column(String(200))
    sglang_version: Mapped[str | None] = mapped_column(String(50))
    torch_version: Mapped[str | None] = mapped_column(String(50))
    cuda_version: Mapped[str | None] = mapped_column(String(50))
    gpu_name: Mapped[str | None] = mapped_column(String(200))
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    gpu_memory_mib: Mapped[float | None] = mapped_column(Float)
    driver_version: Mapped[str | None] = mapped_column(String(50))
    python_version: Mapped[str | None] = mapped_column(String(50))
    model_path: Mapped[str | None] = mapped_column(Text)
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    extra_json: Mapped[str | None] = mapped_column(Text)


class ServerConfigRow(Base):
    """One launched (or attempted) server configuration and why its ladder stopped."""

    __tablename__ = "server_configs"
    __table_args__ = (CheckConstraint(_in("status", CONFIG_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("sweep_studies.id", ondelete="CASCADE"), index=True)
    trial_number: Mapped[int | None] = mapped_column(Integer)
    config_key: Mapped[str] = mapped_column(String(64))
    max_running_requests: Mapped[int | None] = mapped_column(Integer)
    mem_fraction_static: Mapped[float | None] = mapped_column(Float)
    chunked_prefill_size: Mapped[int | None] = mapped_column(Integer)
    schedule_policy: Mapped[str | None] = mapped_column(String(50))
    tp_size: Mapped[int | None] = mapped_column(Integer)  # added by 0008, after the other knobs
    launcher: Mapped[str] = mapped_column(String(50))
    argv_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    failure_reason: Mapped[str | None] = mapped_column(Text)
    startup_s: Mapped[float | None] = mapped_column(Float)
    log_path: Mapped[str | None] = mapped_column(Text)
    server_info_json: Mapped[str | None] = mapped_column(Text)
    stop_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    # Where it was launched (see PLACEMENT_COLUMNS); no foreign key to sweep_workers (added by ALTER on SQLite).
    worker_id: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str | None] = mapped_column(String(200))
    gpu_name: Mapped[str | None] = mapped_column(String(200))
    gpu_index: Mapped[str | None] = mapped_column(String(50))
    gpu_memory_mib: Mapped[float | None] = mapped_column(Float)
    gpu_driver: Mapped[str | None] = mapped_column(String(50))
    # The refined ladder's SLA boundary (sweep.analysis.boundary): the concurrency where the SLA percentile
    # crosses its bound (for an open-loop rate ladder, arrival.rates, the offered rate in req/s), its 95% bootstrap
    # interval and its shape (smooth | cliff); None when not refined or not bracketed.
    boundary_concurrency: Mapped[float | None] = mapped_column(Float)
    boundary_ci_low: Mapped[float | None] = mapped_column(Float)
    boundary_ci_high: Mapped[float | None] = mapped_column(Float)
    boundary_shape: Mapped[str | None] = mapped_column(String(10))
    # The launch prediction (sweep.launchers.prediction, added by 0012) beside the server's own pool
    # (max_total_num_tokens from /server_info); None when nothing was predicted or the server never came up.
    predicted_pool_tokens: Mapped[int | None] = mapped_column(Integer)
    predicted_starts: Mapped[bool | None] = mapped_column(Boolean)
    predicted_startup_s: Mapped[float | None] = mapped_column(Float)
    pool_tokens: Mapped[int | None] = mapped_column(Integer)
    # Every other searched flag (issue 30, added by 0019): a JSON object flag name -> value; NULL: none set.
    flags_json: Mapped[str | None] = mapped_column(Text)


# runs is built from STAT_COLUMNS so the statistics are listed exactly once.
runs_table = Table(
    "runs",
    Base.metadata,
    Column("id", Integer, primary_key=True),
    Column("study_id", ForeignKey("sweep_studies.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("server_config_id", ForeignKey("server_configs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("concurrency", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("reason", Text),
    Column("fingerprint", String(64), nullable=False),
    Column("simulated", Boolean, nullable=False),
    Column("driver", String(50), nullable=False),
    Column("phase", String(10), nullable=False),
    Column("started_at", DateTime, nullable=False),
    Column("finished_at", DateTime),
    # a cross-check's reference-client row points at sweep's own row of the same step (None: a ladder step)
    Column("reference_for_run_id", Integer, index=True),
    # an open-loop rate ladder's window (arrival.rates): the rate it was offered, req/s, its load (None: otherwise)
    Column("offered_rps", Float),
    # a final step far from the prior's predicted knee ran a short window (search.far_windows; 0018)
    Column("short_window", Boolean),
    Column("planned_measure_s", Float),  # the measured length the window was planned with, driver seconds (0018)
    *(Column(name, _SQL_TYPES[STAT_TYPES[name]]) for name in STAT_COLUMNS),
    Column("worker_id", Integer),
    Column("host", String(200)),
    Column("gpu_name", String(200)),
    Column("gpu_index", String(50)),
    Column("gpu_memory_mib", Float),
    Column("gpu_driver", String(50)),
    CheckConstraint(_in("status", RUN_STATUSES), name="status"),
    CheckConstraint(_in("phase", RUN_PHASES), name="phase"),
)


class Run(Base):
    """One measured window: one configuration at one client concurrency, with its statistics as columns."""

    __table__ = runs_table


class RequestRow(Base):
    """One request the client sent; times in seconds relative to the window start."""

    __tablename__ = "requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean)
    modality: Mapped[str] = mapped_column(String(10))
    scheduled_at: Mapped[float] = mapped_column(Float)
    sent_at: Mapped[float] = mapped_column(Float)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    e2e_ms: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    sent_prompt_tokens: Mapped[int | None] = mapped_column(Integer)  # as sent; prompt_tokens is the server's count
    sent_output_tokens: Mapped[int | None] = mapped_column(Integer)  # max_new_tokens as sent
    cached_tokens: Mapped[int] = mapped_column(Integer)
    num_retractions: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    error_kind: Mapped[str | None] = mapped_column(String(20))
    # sessions (workload.sessions): idx is the session's number; NULL for single-turn workloads (migration 0010)
    turn: Mapped[int | None] = mapped_column(Integer)
    branch: Mapped[int | None] = mapped_column(Integer)
    context_tokens: Mapped[int | None] = mapped_column(Integer)
    session_turns: Mapped[int | None] = mapped_column(Integer)


class SampleRow(Base):
    """One probe reading taken during a run; t in seconds relative to the window start."""

    __tablename__ = "samples"
    __table_args__ = (Index(None, "run_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    t: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float] = mapped_column(Float)
    labels: Mapped[str] = mapped_column(Text, default="")


# Knob columns of server_configs, shown beside each run in the run_summary view.
# Where a run or launch happened (sweep.core.types.Placement), on runs and server_configs and in run_summary.
PLACEMENT_COLUMNS: tuple[str, ...] = ("worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver")
KNOB_COLUMNS: tuple[str, ...] = KNOB_NAMES  # server_configs has one typed column per ServerConfig knob
