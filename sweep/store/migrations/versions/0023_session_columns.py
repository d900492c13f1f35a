"""A window's session figures as columns of runs (issue 31 §4): sessions_completed, turns_per_session,
session_p50_s, session_p90_s, cache_hit_turn1, cache_hit_later, later_prompt_tokens.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03

sweep.analysis.sessions.session_columns defines them (a window of multi-turn sessions; NULL for single requests and
for rows written before), so the cross-check can judge a reference client's session replay against sweep's. The
run_summary view is dropped and recreated (0022's, with runs.offered_rps and goodput_rps_ci_low/high) with them at
the end of its stat columns; SQLite and PostgreSQL add the nullable columns by ALTER TABLE. (Written as 0021, it
was renumbered 0023 at merge: it follows 0022.)

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]
_STATS_HEAD = [  # 0022's run_summary stat columns
    "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps", "output_tps",
    *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server", "retractions",
    "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib", "ttft_p99_ci_low",
    "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", "goodput_rps_ci_low", "goodput_rps_ci_high", "steady",
    "drift", "client_bound", "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms",
    "dispatch_lag_p99_ms", "dispatch_lag_max_ms", "cap_wait_p99_ms", "cap_waited", "client_cpu_frac",
    "client_cpu_total", "client_procs", "max_in_flight_seen", "cache_hit_rate_predicted", "cache_hit_rate_capped",
    "window_opened_by", "n_cut", "stopped_early_by",
]
_NEW = [("sessions_completed", sa.Integer), ("turns_per_session", sa.Float), ("session_p50_s", sa.Float),
        ("session_p90_s", sa.Float), ("cache_hit_turn1", sa.Float), ("cache_hit_later", sa.Float),
        ("later_prompt_tokens", sa.Float)]
_PLACEMENT = ["worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver"]
_RUN_HEAD = ["concurrency", "offered_rps", "phase", "status", "reason", "simulated", "driver", "fingerprint",
             "started_at", "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy", "tp_size"]


def _summary(stats: list[str]) -> str:
    """The run_summary view (0022's), with these stat columns."""
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _RUN_HEAD + stats + _PLACEMENT)
            + ", sc.flags_json AS flags_json"  # 0019's
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


def upgrade() -> None:
    """Add the session columns to runs and show them in run_summary."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    for name, kind in _NEW:
        op.add_column("runs", sa.Column(name, kind))
    op.execute(_summary([*_STATS_HEAD, *(name for name, _ in _NEW)]))


def downgrade() -> None:
    """Back to 0022: the columns go (their values with them)."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    for name, _ in reversed(_NEW):
        op.drop_column("runs", name)
    op.execute(_summary(_STATS_HEAD))
