"""The tensor-parallel size as a searched knob: a tp_size column on server_configs, shown in run_summary.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

`--tp-size` joins the knobs (sweep.core.types.ServerConfig.tp_size). Rows written before it have NULL there: the
server's default, TP 1 unless server.extra_args said otherwise (as before, the launch's argv_json tells). The
run_summary view (0006's) is recreated with the column after the other knobs; both SQLite and PostgreSQL add a
nullable column by ALTER TABLE, and the view is dropped first so neither refuses the change under it.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS = [
    "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps", "output_tps",
    *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server", "retractions",
    "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib", "ttft_p99_ci_low",
    "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", "goodput_ci_low", "goodput_ci_high", "steady",
    "drift", "client_bound", "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms",
    "dispatch_lag_p99_ms", "dispatch_lag_max_ms", "cap_wait_p99_ms", "cap_waited", "client_cpu_frac",
    "client_cpu_total", "client_procs", "max_in_flight_seen", "cache_hit_rate_predicted",
    "worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver",
]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy"]


def _summary(knobs: list[str]) -> str:
    """The run_summary view (0006's), with these knob columns."""
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in knobs)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + _STATS)
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


def upgrade() -> None:
    """Add server_configs.tp_size and show it in run_summary."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    op.add_column("server_configs", sa.Column("tp_size", sa.Integer))
    op.execute(_summary([*_KNOBS, "tp_size"]))


def downgrade() -> None:
    """Back to 0007: the column goes (its values with it)."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    op.drop_column("server_configs", "tp_size")  # ALTER TABLE DROP COLUMN (SQLite 3.35+): no rebuild, no cascade
    op.execute(_summary(_KNOBS))
