"""The load generator's self-check figures per window: dispatch lag, in-flight cap waits, CPU, processes, peak.

The HTTP driver recorded them but they lived only in memory (and only the loop lag reached `runs`, in 0002);
sweep.measure_client now computes them and each is a column of runs, shown in run_summary after the loop lag.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_NEW: list[tuple[str, Any]] = [
    ("dispatch_lag_p99_ms", sa.Float), ("dispatch_lag_max_ms", sa.Float), ("cap_wait_p99_ms", sa.Float),
    ("cap_waited", sa.Integer), ("client_cpu_frac", sa.Float), ("client_cpu_total", sa.Float),
    ("client_procs", sa.Integer), ("max_in_flight_seen", sa.Integer),
]
_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS_TO_LOOP_LAG = [
    "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps", "output_tps",
    *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server", "retractions",
    "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib", "ttft_p99_ci_low",
    "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", "goodput_ci_low", "goodput_ci_high", "steady",
    "drift", "client_bound", "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms",
]
_PLACEMENT = ["worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver"]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy"]


def _summary(client: list[str]) -> str:
    """The run_summary view (0005's), with these client columns after the loop lag."""
    stats = [*_STATS_TO_LOOP_LAG, *client, "cache_hit_rate_predicted", *_PLACEMENT]
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + stats)
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


def upgrade() -> None:
    """Add the client columns to runs and show them in run_summary."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    for name, kind in _NEW:
        op.add_column("runs", sa.Column(name, kind))
    op.execute(_summary([name for name, _ in _NEW]))


def downgrade() -> None:
    """Back to 0005: the client columns go."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    with op.batch_alter_table("runs") as batch:
        for name, _ in reversed(_NEW):
            batch.drop_column(name)
    op.execute(_summary([]))
