"""kill -9 of sweep at each phase of a configuration, then the same command again (the resume)."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
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
    wait_for,
)

pytestmark = pytest.mark.slow



def _resume_and_check(tmp: Path, study: str, sets: list[str], leftover: list[int], n_configs: int,
                      ladder_len: int, before: list[tuple[int, int, int]]) -> str:
    rc, err = run_sweep(tmp, sweep_argv(tmp, study, sets))
    assert rc == 0, err[-3000:]
    for pid in leftover:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, \
            f"the interrupted launch's server {pid} survived the resume"
    if leftover:
        assert "killed leftover server" in err, err[-2000:]
    assert_measured_once(tmp / "results.db", n_configs, ladder_len)
    after = {r[0] for r in completed_runs(tmp / "results.db")}
    finished = {c for (c,) in q(tmp / "results.db", "SELECT id FROM server_configs WHERE status != 'aborted'")}
    assert {r[0] for r in before if r[1] in finished} <= after, "a completed run was lost"
    assert study_status(tmp / "results.db", study) == "completed"
    assert_nothing_left(tmp)
    return err


def test_kill9_while_the_server_is_starting_then_resume_kills_it(tmp_path: Path) -> None:
    """Item 1: the launch is recorded at spawn, so a resume finds and kills a server that never became ready."""
    slow = overrides(extra=["--sim-slow-start-s", "120"])
    first = Sweep(tmp_path, sweep_argv(tmp_path, "s", slow))
    db = tmp_path / "results.db"
    log = wait_for(lambda: list((tmp_path / "reports").glob("*/logs/*.log")), 60, "the server's log file")
    wait_for(lambda: "Uvicorn running" in log[0].read_text(), 60, "the server to be up but not ready")
    pids = first.server_pids()
    assert len(pids) == 1, pids
    first.kill9()
    # The launch record landed at spawn, long before the (120 s) readiness.
    launch = [json.loads(i or "{}").get("sweep_launch") or {} for (i,) in
              q(db, "SELECT server_info_json FROM server_configs WHERE status = 'running'")]
    assert launch and launch[0].get("pid") == pids[0] and launch[0]["pgid"] == pids[0] and launch[0]["host"], launch
    assert psutil.pid_exists(pids[0]), "the starting server should outlive the killed orchestrator"
    _resume_and_check(tmp_path, "s", overrides(), pids, n_configs=1, ladder_len=1, before=[])


def test_kill9_while_measuring_then_resume(tmp_path: Path) -> None:
    sets = overrides(space=(4, 8), ladder=(2, 4), measure_s=3)
    first = Sweep(tmp_path, sweep_argv(tmp_path, "m", sets))
    db = tmp_path / "results.db"
    wait_for(lambda: q(db, "SELECT id FROM runs WHERE status = 'running'"), 90, "a window to be measured")
    pids = first.server_pids()
    first.kill9()
    _resume_and_check(tmp_path, "m", sets, pids, n_configs=2, ladder_len=2, before=completed_runs(db))


def test_kill9_leaves_the_api_key_in_the_log_and_the_resume_scrubs_it(tmp_path: Path) -> None:
    """Item 16: the server prints its arguments (api_key included) into its log; after a kill -9 of sweep
    nobody scrubbed it. The resume does, found by the key's digest in the launch record."""
    import re

    first = Sweep(tmp_path, sweep_argv(tmp_path, "k", overrides(extra=["--sim-slow-start-s", "120"])))
    log = wait_for(lambda: list((tmp_path / "reports").glob("*/logs/*.log")), 60, "the server's log file")[0]
    key = wait_for(lambda: re.findall(r"api_key='([0-9a-f]{48})'", log.read_text()), 60, "the key in the log")[0]
    wait_for(lambda: q(tmp_path / "results.db", "SELECT id FROM server_configs WHERE server_info_json LIKE "
                                                "'%credential_digest%'"), 30, "the launch record")
    first.kill9()
    assert key in log.read_text()
    _resume_and_check(tmp_path, "k", overrides(), [], n_configs=1, ladder_len=1, before=[])
    assert key not in log.read_text() and "api_key='***'" in log.read_text()
    for other in (tmp_path / "reports").glob("*/logs/*.log"):
        assert not re.search(r"api_key='[0-9a-f]{48}'", other.read_text()), other
    assert key not in (tmp_path / "results.db").read_bytes().decode("latin-1")


def _warming_up(db: Path, tmp: Path) -> bool:
    """A window has begun (its run row exists) and its 3 s warm-up has not ended."""
    return bool(q(db, "SELECT id FROM runs WHERE status = 'running'"))


def _draining(db: Path, tmp: Path) -> bool:
    """The server's log shows the first window's requests still finishing after its measured second."""
    rows = q(db, "SELECT (julianday('now') - julianday(started_at)) * 86400 FROM runs WHERE status = 'running'")
    return bool(rows) and rows[0][0] is not None and rows[0][0] > 1.6  # warm-up 0, measure 1.5 s, drain 2 s


def _between_configurations(db: Path, tmp: Path) -> bool:
    return bool(q(db, "SELECT id FROM server_configs WHERE status = 'completed'"))


PHASES = {
    "warming_up": (_warming_up, {"window.warmup_seconds": 3}, []),
    # 20x slower decode: requests sent late in the window are still streaming through the drain.
    "draining": (_draining, {}, ["--sim-speed", "20"]),
    "between_configurations": (_between_configurations, {}, []),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_kill9_at_each_phase_then_resume(tmp_path: Path, phase: str) -> None:
    cond, more, extra = PHASES[phase]
    db = tmp_path / "results.db"
    sets = overrides(space=(4, 8), ladder=(2,), extra=extra, **more)
    first = Sweep(tmp_path, sweep_argv(tmp_path, phase, sets))
    wait_for(lambda: cond(db, tmp_path), 120, phase, every_s=0.02)
    pids = first.server_pids()
    first.kill9()
    _resume_and_check(tmp_path, phase, sets, pids, n_configs=2, ladder_len=1, before=completed_runs(db))
