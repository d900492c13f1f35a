"""Study workers: the sweep_workers table; runs and server configs record the worker, host and GPU.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Several workers (GPU groups, hosts) share one study; each measurement says where it ran so reports can
group by hardware and a resume can tell a dead worker's leftovers from a live worker's.
Self-contained on purpose (no import of models).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_PLACEMENT: list[tuple[str, Any]] = [("worker_id", sa.Integer), ("host", sa.String(200)), ("gpu_name", sa.String(200)),
              ("gpu_index", sa.String(50)), ("gpu_memory_mib", sa.Float), ("gpu_driver", sa.String(50))]
_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS = ["n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps",
          "output_tps", *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate",
          "cache_hit_rate_server", "retractions", "queue_len_mean", "queue_len_max", "kv_usage_max",
          "running_mean", "peak_gpu_mem_mib", "ttft_p99_ci_low", "ttft_p99_ci_high", "tpot_p99_ci_low",
          "tpot_p99_ci_high", "goodput_ci_low", "goodput_ci_high", "steady", "drift", "client_bound",
          "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms", "cache_hit_rate_predicted"]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy"]


def _summary(placement: bool) -> str:
    """The run_summary view, with the placement columns after the stats when `placement`."""
    extra = "".join(f", r.{c} AS {c}" for c, _ in _PLACEMENT) if placement else ""
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + _STATS) + extra
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


def upgrade() -> None:
    """Add sweep_workers, the placement columns of runs and server_configs, and show them in run_summary."""
    op.create_table(
        "sweep_workers",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("process_started", sa.Float, nullable=False),
        sa.Column("gpus", sa.String(100)),
        sa.Column("sweep_version", sa.String(100), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.PrimaryKeyConstraint("id", name="pk_sweep_workers"),
        sa.ForeignKeyConstraint(["study_id"], ["sweep_studies.id"], name="fk_sweep_workers_study_id_sweep_studies",
                                ondelete="CASCADE"),
    )
    op.create_index("ix_sweep_workers_study_id", "sweep_workers", ["study_id"])
    op.execute("DROP VIEW IF EXISTS run_summary")
    for table in ("runs", "server_configs"):
        for name, kind in _PLACEMENT:
            op.add_column(table, sa.Column(name, kind))
    op.execute(_summary(placement=True))


def downgrade() -> None:
    """Back to 0004: the placement columns and sweep_workers go."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    for table in ("runs", "server_configs"):
        with op.batch_alter_table(table) as batch:
            for name, _ in _PLACEMENT:
                batch.drop_column(name)
    op.drop_index("ix_sweep_workers_study_id", "sweep_workers")
    op.drop_table("sweep_workers")
    op.execute(_summary(placement=False))
