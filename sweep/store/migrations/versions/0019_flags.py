"""Every other SGLang flag a knob (issue 30): server_configs.flags_json, and run_summary shows it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03

A configuration's searched flags beyond the five knob columns (kv_cache_dtype, cuda_graph_max_bs, ...: any flag of
the engine version's table) as one JSON object, flag name -> value (booleans for store_true switches); NULL where a
configuration sets none (every row written before). The run_summary view is dropped and recreated with
sc.flags_json at its end, so `sweep runs --columns kv_cache_dtype` reads it. Nullable: ALTER TABLE on both backends.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS_HEAD = [
    "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps", "output_tps",
    *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server", "retractions",
    "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib", "ttft_p99_ci_low",
    "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", "goodput_ci_low", "goodput_ci_high", "steady",
    "drift", "client_bound", "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms",
    "dispatch_lag_p99_ms", "dispatch_lag_max_ms", "cap_wait_p99_ms", "cap_waited", "client_cpu_frac",
    "client_cpu_total", "client_procs", "max_in_flight_seen", "cache_hit_rate_predicted", "cache_hit_rate_capped",
]
_PLACEMENT = ["worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver"]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy", "tp_size"]


def _summary(stats: list[str], flags: bool) -> str:
    """The run_summary view (0016's), with these stat columns and, with flags, server_configs.flags_json at its end."""
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + stats + _PLACEMENT)
            + (", sc.flags_json AS flags_json" if flags else "")
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


_STATS = [*_STATS_HEAD, "window_opened_by", "n_cut", "stopped_early_by"]  # 0018's (0017 added stopped_early_by)


def upgrade() -> None:
    """Add server_configs.flags_json and show it in run_summary."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    op.add_column("server_configs", sa.Column("flags_json", sa.Text))
    op.execute(_summary(_STATS, flags=True))


def downgrade() -> None:
    """Back to 0016: the column goes (its values with it)."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    op.drop_column("server_configs", "flags_json")
    op.execute(_summary(_STATS, flags=False))
