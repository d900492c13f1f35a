"""Fresh requests: each request's tokens as sent, and each window's predicted prefix-cache hit rate.

requests.sent_prompt_tokens / sent_output_tokens: what the client sent (text tokens plus estimated media
tokens; max_new_tokens) beside prompt_tokens / output_tokens, which are what the server counted.
runs.cache_hit_rate_predicted: the hit rate the workload's shared prefixes predict (sweep.cache_model).
run_summary is recreated to show the new runs column.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS_0001 = [
    "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps", "output_tps",
    *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server", "retractions",
    "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib",
    "ttft_p99_ci_low", "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", "goodput_ci_low", "goodput_ci_high",
    "steady", "drift", "client_bound", "passes_sla", "sla_failures",
]
_STATS_0002 = [*_STATS_0001, "loop_lag_p99_ms", "loop_lag_max_ms"]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy"]


def _run_summary(stats: list[str]) -> str:
    """CREATE VIEW run_summary over runs with these stat columns (0002's view, column list as given)."""
    return (
        "CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
        "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
        "sc.config_key AS config_key, "
        + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
        + "sc.launcher AS launcher, sc.status AS config_status, "
        + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + stats)
        + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id JOIN sweep_studies s ON s.id = r.study_id"
    )


def upgrade() -> None:
    """Add the columns and recreate run_summary with the new runs column."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("cache_hit_rate_predicted", sa.Float))
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("sent_prompt_tokens", sa.Integer))
        batch.add_column(sa.Column("sent_output_tokens", sa.Integer))
    op.execute(_run_summary([*_STATS_0002, "cache_hit_rate_predicted"]))


def downgrade() -> None:
    """Drop the columns and restore the run_summary of 0002 (0003 kept it)."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("sent_output_tokens")
        batch.drop_column("sent_prompt_tokens")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("cache_hit_rate_predicted")
    op.execute(_run_summary(_STATS_0002))
