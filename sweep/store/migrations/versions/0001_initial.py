"""Initial schema: studies, environments, server configs, runs, requests, samples and the run_summary view.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS: list[tuple[str, type[sa.types.TypeEngine[Any]]]] = [
    ("n_started", sa.Integer), ("n_completed", sa.Integer), ("n_errors", sa.Integer), ("n_warmup", sa.Integer),
    ("error_rate", sa.Float), ("throughput_rps", sa.Float), ("input_tps", sa.Float), ("output_tps", sa.Float),
    *((name, sa.Float) for name in _LATENCY),
    ("goodput_rps", sa.Float), ("goodput_tps", sa.Float), ("attainment", sa.Float),
    ("cache_hit_rate", sa.Float), ("cache_hit_rate_server", sa.Float), ("retractions", sa.Integer),
    ("queue_len_mean", sa.Float), ("queue_len_max", sa.Float), ("kv_usage_max", sa.Float),
    ("running_mean", sa.Float), ("peak_gpu_mem_mib", sa.Float),
    ("ttft_p99_ci_low", sa.Float), ("ttft_p99_ci_high", sa.Float),
    ("tpot_p99_ci_low", sa.Float), ("tpot_p99_ci_high", sa.Float),
    ("goodput_ci_low", sa.Float), ("goodput_ci_high", sa.Float),
    ("steady", sa.Boolean), ("drift", sa.Float), ("client_bound", sa.Boolean), ("passes_sla", sa.Boolean),
    ("sla_failures", sa.Text),
]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy"]

_RUN_SUMMARY = (
    "CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
    "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
    "sc.config_key AS config_key, "
    + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
    + "sc.launcher AS launcher, sc.status AS config_status, "
    + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + [name for name, _ in _STATS])
    + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id JOIN sweep_studies s ON s.id = r.study_id"
)


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    """A cascading foreign key named like the models' naming convention does."""
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}",
                                   ondelete="CASCADE")


def upgrade() -> None:
    """Create every table, index and the run_summary view."""
    op.create_table(
        "sweep_studies",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("profile_name", sa.String(200), nullable=False),
        sa.Column("profile_json", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("sampler", sa.String(50), nullable=False),
        sa.Column("simulated", sa.Boolean, nullable=False),
        sa.Column("driver", sa.String(50), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("optuna_study_name", sa.String(200)),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("winner_config_id", sa.Integer),
        sa.Column("report_path", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_sweep_studies"),
        sa.UniqueConstraint("name", name="uq_sweep_studies_name"),
    )
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("host", sa.String(200)),
        sa.Column("sglang_version", sa.String(50)),
        sa.Column("torch_version", sa.String(50)),
        sa.Column("cuda_version", sa.String(50)),
        sa.Column("gpu_name", sa.String(200)),
        sa.Column("gpu_count", sa.Integer),
        sa.Column("gpu_memory_mib", sa.Float),
        sa.Column("driver_version", sa.String(50)),
        sa.Column("python_version", sa.String(50)),
        sa.Column("model_path", sa.Text),
        sa.Column("simulated", sa.Boolean, nullable=False),
        sa.Column("extra_json", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_environments"),
        _fk("environments", "study_id", "sweep_studies"),
    )
    op.create_index("ix_environments_study_id", "environments", ["study_id"])
    op.create_table(
        "server_configs",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("trial_number", sa.Integer),
        sa.Column("config_key", sa.String(64), nullable=False),
        sa.Column("max_running_requests", sa.Integer),
        sa.Column("mem_fraction_static", sa.Float),
        sa.Column("chunked_prefill_size", sa.Integer),
        sa.Column("schedule_policy", sa.String(50)),
        sa.Column("launcher", sa.String(50), nullable=False),
        sa.Column("argv_json", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("failure_reason", sa.Text),
        sa.Column("startup_s", sa.Float),
        sa.Column("log_path", sa.Text),
        sa.Column("server_info_json", sa.Text),
        sa.Column("stop_reason", sa.Text),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.PrimaryKeyConstraint("id", name="pk_server_configs"),
        _fk("server_configs", "study_id", "sweep_studies"),
        sa.CheckConstraint("status IN ('pending', 'running', 'completed', 'failed', 'infeasible', 'aborted')",
                           name="ck_server_configs_status"),
    )
    op.create_index("ix_server_configs_study_id", "server_configs", ["study_id"])
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("server_config_id", sa.Integer, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("simulated", sa.Boolean, nullable=False),
        sa.Column("driver", sa.String(50), nullable=False),
        sa.Column("phase", sa.String(10), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("window_s", sa.Float),
        sa.Column("warmup_requests", sa.Integer),
        sa.Column("warmup_s", sa.Float),
        *(sa.Column(name, kind) for name, kind in _STATS),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        _fk("runs", "study_id", "sweep_studies"),
        _fk("runs", "server_config_id", "server_configs"),
        sa.CheckConstraint("status IN ('running', 'completed', 'failed', 'aborted')", name="ck_runs_status"),
        sa.CheckConstraint("phase IN ('screen', 'final', 'soak')", name="ck_runs_phase"),
    )
    op.create_index("ix_runs_study_id", "runs", ["study_id"])
    op.create_index("ix_runs_server_config_id", "runs", ["server_config_id"])
    op.create_table(
        "requests",
        sa.Column("id", sa.Integer),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("warmup", sa.Boolean, nullable=False),
        sa.Column("modality", sa.String(10), nullable=False),
        sa.Column("scheduled_at", sa.Float, nullable=False),
        sa.Column("sent_at", sa.Float, nullable=False),
        sa.Column("ttft_ms", sa.Float),
        sa.Column("tpot_ms", sa.Float),
        sa.Column("e2e_ms", sa.Float),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False),
        sa.Column("num_retractions", sa.Integer, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("error_kind", sa.String(20)),
        sa.PrimaryKeyConstraint("id", name="pk_requests"),
        _fk("requests", "run_id", "runs"),
    )
    op.create_index("ix_requests_run_id", "requests", ["run_id"])
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_samples"),
        _fk("samples", "run_id", "runs"),
    )
    op.create_index("ix_samples_run_id_name", "samples", ["run_id", "name"])
    op.execute(_RUN_SUMMARY)


def downgrade() -> None:
    """Drop the view and every table."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    for table in ("samples", "requests", "runs", "server_configs", "environments", "sweep_studies"):
        op.drop_table(table)
