"""Faults while a window is measured, over real server processes: a crash mid-window (item 12), a hang
(item 5), malformed SSE, HTTP 5xx bursts, a /metrics endpoint that times out."""

from __future__ import annotations

from pathlib import Path

import pytest
from faultkit import assert_nothing_left, overrides, q, run_sweep, sweep_argv

pytestmark = pytest.mark.slow



def _configs(tmp: Path) -> list[tuple[str, str, str]]:  # NULLs read as ""
    return q(tmp / "results.db",
             "SELECT status, coalesce(failure_reason, ''), coalesce(stop_reason, '') FROM server_configs")


def test_crash_mid_window_stores_exit_status_and_last_log_lines(tmp_path: Path) -> None:
    sets = overrides(ladder=(2, 4), measure_s=6, extra=["--sim-crash-after-s", "2"])
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "crash", sets, resume=False))
    assert rc == 3, err[-3000:]
    (status, reason, _), = _configs(tmp_path)
    assert status == "failed", reason
    assert reason.startswith("crash: server died during the window at concurrency 2"), reason
    assert "exited with code 1" in reason and "simulated crash" in reason and "log:" in reason, reason
    runs = q(tmp_path / "results.db", "SELECT status, reason FROM runs")
    assert runs == [("failed", "server died during the window")], runs
    assert "crash" in err and "exited with code 1" in err
    assert_nothing_left(tmp_path)


def test_hung_server_is_detected_marked_failed_and_its_ladder_stopped(tmp_path: Path) -> None:
    sets = overrides(ladder=(2, 4, 8), measure_s=8, extra=["--sim-hang-after-s", "2"]) + [
        "--set", "server.stall_timeout_s=2", "--set", "window.request_timeout_s=60"]
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "hang", sets, resume=False))
    assert rc == 3, err[-3000:]
    (status, reason, stop), = _configs(tmp_path)
    assert status == "failed" and reason.startswith("hung: no response bytes for "), (status, reason)
    runs = q(tmp_path / "results.db", "SELECT concurrency, status FROM runs")
    assert runs == [(2, "failed")], runs  # the ladder stopped at the hung step
    assert "saturated" not in (stop or "")
    assert_nothing_left(tmp_path)


def test_every_request_failing_stops_the_ladder_and_is_not_called_saturated(tmp_path: Path) -> None:
    sets = overrides(ladder=(2, 4, 8), extra=["--sim-http500-rate", "1.0"])
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "e500", sets, resume=False))
    (status, reason, stop), = _configs(tmp_path)
    assert status == "failed" and reason.startswith("errors: every request at concurrency 2 failed (status "), reason
    assert "saturated" not in stop, stop
    assert q(tmp_path / "results.db", "SELECT concurrency, status, n_completed FROM runs") == [(2, "completed", 0)]
    assert rc == 0, err[-3000:]  # measured (a step completed, every request of it failed): a result, not a crash
    assert_nothing_left(tmp_path)


def test_5xx_bursts_and_malformed_sse_are_counted_per_request(tmp_path: Path) -> None:
    # per SSE event: at 0.005 a 3 s window at c=2 (~40 short replies) drew no malformed event about one run in twenty;
    # at 0.03 the chance of none is below 1e-6 while most replies still arrive whole.
    # per request: 0.1 over a 3 s window drew no 500 on a loaded CI host (~30 requests: 0.9**30 = 4%); 0.2 over 5 s
    # (50-90 requests) leaves 0.8**50 < 2e-5
    sets = overrides(ladder=(2,), measure_s=5, extra=["--sim-http500-rate", "0.2", "--sim-malformed-sse-rate", "0.03"])
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "flaky", sets, resume=False))
    assert rc == 0, err[-3000:]
    kinds = dict(q(tmp_path / "results.db", "SELECT error_kind, count(*) FROM requests WHERE error_kind IS NOT NULL "
                                            "GROUP BY error_kind"))
    assert kinds.get("status", 0) > 0 and kinds.get("malformed", 0) > 0, kinds
    (n_errors, rate, passes), = q(tmp_path / "results.db", "SELECT n_errors, error_rate, passes_sla FROM runs")
    assert n_errors > 0 and 0 < rate < 1 and passes == 0  # 5% error budget in smoke
    assert_nothing_left(tmp_path)


def test_metrics_endpoint_that_times_out_does_not_stall_or_break_the_window(tmp_path: Path) -> None:
    sets = overrides(ladder=(2,), measure_s=2, extra=["--sim-slow-metrics-s", "30"])
    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "metrics", sets, resume=False), timeout_s=200)
    assert rc == 0, err[-3000:]
    (status, n_completed), = q(tmp_path / "results.db", "SELECT status, n_completed FROM runs")
    assert status == "completed" and n_completed > 0
    assert_nothing_left(tmp_path)
