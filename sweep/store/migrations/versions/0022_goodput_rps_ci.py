"""One unit per name: the per-window goodput interval is runs.goodput_rps_ci_low/high; run_summary shows offered_rps
(issue 33).

Revision ID: 0022
Revises: 0016
Create Date: 2026-12-03

A window's goodput interval has always been in requests/s (sweep.analysis.measure), beside goodput_rps; it was named
goodput_ci_low/high, the names study_winners gives its knee's interval in output tokens/s, so `sweep show` printed
19.79 next to a goodput of 4,986. The columns are renamed (values unchanged: they are requests/s) and run_summary is
recreated with the new names. study_winners.goodput_ci_low/high stay: they are output tokens/s, like goodput_tps.
run_summary also gains runs.offered_rps (the rate an open-loop window was offered: a rate ladder's step, a soak),
which it never showed: `sweep runs` and `sweep show` printed a soak as concurrency 1024 (its in-flight cap) with no
rate while the report said 20.03 req/s.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0016"
branch_labels = None
depends_on = None

_LATENCY = [f"{lat}_{stat}_ms" for lat in ("ttft", "tpot", "itl", "e2e")
            for stat in ("p50", "p90", "p95", "p99", "mean", "max")]


def _stats(low: str, high: str) -> list[str]:
    """0016's run_summary stat columns, the goodput interval named `low`/`high`."""
    return [
        "n_started", "n_completed", "n_errors", "n_warmup", "error_rate", "throughput_rps", "input_tps",
        "output_tps", *_LATENCY, "goodput_rps", "goodput_tps", "attainment", "cache_hit_rate", "cache_hit_rate_server",
        "retractions", "queue_len_mean", "queue_len_max", "kv_usage_max", "running_mean", "peak_gpu_mem_mib",
        "ttft_p99_ci_low", "ttft_p99_ci_high", "tpot_p99_ci_low", "tpot_p99_ci_high", low, high, "steady",
        "drift", "client_bound", "passes_sla", "sla_failures", "loop_lag_p99_ms", "loop_lag_max_ms",
        "dispatch_lag_p99_ms", "dispatch_lag_max_ms", "cap_wait_p99_ms", "cap_waited", "client_cpu_frac",
        "client_cpu_total", "client_procs", "max_in_flight_seen", "cache_hit_rate_predicted", "cache_hit_rate_capped",
        "window_opened_by", "n_cut",
    ]


_PLACEMENT = ["worker_id", "host", "gpu_name", "gpu_index", "gpu_memory_mib", "gpu_driver"]
_RUN_HEAD = ["concurrency", "phase", "status", "reason", "simulated", "driver", "fingerprint", "started_at",
             "finished_at", "window_s", "warmup_requests", "warmup_s"]
_KNOBS = ["max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy", "tp_size"]


def _head(offered: bool) -> list[str]:
    """The run's own columns of the view: runs.offered_rps right after concurrency where `offered`."""
    return [_RUN_HEAD[0], "offered_rps", *_RUN_HEAD[1:]] if offered else _RUN_HEAD


def _summary(stats: list[str], offered: bool) -> str:
    """The run_summary view (0016's), with these stat columns (and runs.offered_rps where `offered`)."""
    return ("CREATE VIEW run_summary AS SELECT r.id AS run_id, s.name AS study_name, s.profile_name AS profile_name, "
            "r.study_id AS study_id, r.server_config_id AS server_config_id, sc.trial_number AS trial_number, "
            "sc.config_key AS config_key, "
            + "".join(f"sc.{k} AS {k}, " for k in _KNOBS)
            + "sc.launcher AS launcher, sc.status AS config_status, "
            + ", ".join(f"r.{c} AS {c}" for c in _head(offered) + stats + _PLACEMENT)
            + " FROM runs r JOIN server_configs sc ON sc.id = r.server_config_id "
              "JOIN sweep_studies s ON s.id = r.study_id")


def _rename(old: str, new: str) -> None:
    # ALTER TABLE ... RENAME COLUMN: SQLite 3.25+ and PostgreSQL alike, no table copy
    op.execute(f"ALTER TABLE runs RENAME COLUMN {old}_low TO {new}_low")
    op.execute(f"ALTER TABLE runs RENAME COLUMN {old}_high TO {new}_high")


def upgrade() -> None:
    """runs.goodput_ci_low/high -> goodput_rps_ci_low/high, run_summary with the new names."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    _rename("goodput_ci", "goodput_rps_ci")
    op.execute(_summary(_stats("goodput_rps_ci_low", "goodput_rps_ci_high"), offered=True))


def downgrade() -> None:
    """Back to 0016's names."""
    op.execute("DROP VIEW IF EXISTS run_summary")
    _rename("goodput_rps_ci", "goodput_ci")
    op.execute(_summary(_stats("goodput_ci_low", "goodput_ci_high"), offered=False))
