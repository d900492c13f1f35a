"""SIGINT, SIGTERM and SIGHUP to a real `sweep` mid-window: server stopped, attempt aborted, exit 128+signal,
and the resume measures the interrupted configuration exactly once (items 2 and 3)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from faultkit import (
    Sweep,
    assert_measured_once,
    assert_nothing_left,
    completed_runs,
    overrides,
    q,
    run_sweep,
    study_status,
    sweep_argv,
    trial_states,
    wait_for,
)

pytestmark = pytest.mark.slow



@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_mid_window_stops_the_server_and_the_resume_redoes_the_configuration(
        tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "results.db"
    sets = overrides(space=(4, 8), ladder=(2, 4), measure_s=4)
    first = Sweep(tmp_path, sweep_argv(tmp_path, "sig", sets))
    wait_for(lambda: q(db, "SELECT id FROM runs WHERE status = 'running'"), 90, "a window to be measured")
    first.signal(sig)
    rc = first.wait(60)
    err = first.stderr
    assert rc == 128 + sig, f"exit {rc}; stderr:\n{err[-3000:]}"
    assert f"interrupted by {sig.name}" in err and "Traceback" not in err, err[-3000:]
    assert_nothing_left(tmp_path)  # the server went down with the orchestrator, no resume needed for that
    attempts = q(db, "SELECT status, failure_reason FROM server_configs")
    assert attempts and attempts[-1][0] == "aborted" and sig.name in (attempts[-1][1] or ""), attempts
    assert not q(db, "SELECT id FROM runs WHERE status = 'running'")
    assert study_status(db, "sig") == "interrupted"
    if sig != signal.SIGTERM:
        return  # the resume after a signal is the same for all three: run once (CI time)
    # Completed steps of the aborted attempt are redone; those of finished configurations must survive.
    before = [r for r in completed_runs(db) if r[1] not in {c for (c,) in
              q(db, "SELECT id FROM server_configs WHERE status = 'aborted'")}]

    rc, err = run_sweep(tmp_path, sweep_argv(tmp_path, "sig", sets))
    assert rc == 0, err[-3000:]
    assert_measured_once(db, n_configs=2, ladder_len=2)
    assert {r[0] for r in before} <= {r[0] for r in completed_runs(db)}, "a completed run was lost"
    assert trial_states(db)["COMPLETE"] == 2
    assert study_status(db, "sig") == "completed"
    assert_nothing_left(tmp_path)
