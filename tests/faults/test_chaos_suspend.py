"""Found by the chaos night (docs/chaos.md, fault #9 of seed 23): a worker frozen mid-window (SIGSTOP of its process
group, as Ctrl-Z, a VM pause or a swap storm would) while no other worker came asking for work wakes up unfenced
(nobody failed its trial) and stores the window with its own pause counted as the server's latency: TTFT P95
20,682 ms at concurrency 16, the SLA failed, and the configuration's knee set one step low (here, alone:
TPOT P95 345 ms at c=4, the configuration called infeasible). The window was not
marked client-bound either (loop lag max 1.9 ms): the suspension went unseen.

A window that straddles its own process's suspension must not be judged as the server's: discarded and measured
again, or marked client-bound and set aside. The detection is fixed (the tick that saw the pause woke after the
window's end and was left out; now it counts: the window says client-bound, loop lag 12,003 ms); so is the verdict:
now the HTTP driver counts its own suspension inside the measured window (WindowResult.suspended_s) and the ladder
sets such a window aside (run status aborted, the reason says why) and measures the step again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from faultkit import SMOKE, env, kill_everything_in, q

from sweep.analysis.measure_client import loop_lag_max
from sweep.fleet.shared_study import create_study
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator
from tests.waiting import wait_for

PAUSE_S = 12.0


def test_a_window_straddling_the_workers_own_suspension_is_not_judged_as_the_servers(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [8]}, "ladder": [8],
                                "window.measure_seconds": 10, "window.warmup_requests": 2, "window.drain_seconds": 2, "window.min_requests": 2,
                                "server.extra_args": ["--load-format", "dummy"], "search.heartbeat_s": 1,
                                "search.grace_s": 3})
    create_study(Orchestrator(prof, f"sqlite:///{db}", tmp_path / "reports", driver="http", launcher_kind="sim"),
                 "pause")
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", "pause", "--db", str(db), "--out",
           str(tmp_path / "reports"), "--label", "w", "--no-progress", "--driver", "http", "--launcher", "sim"]
    log = open(tmp_path / "w.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env(),
                              start_new_session=True)
    try:
        # Past the warm-up (two requests): the measured window has requests in flight, as in the chaos night.
        wait_for(lambda: q(db, "SELECT id FROM runs WHERE status = 'running' AND "
                               "julianday('now') - julianday(started_at) > 3 / 86400.0"), 120,
                 "the measured window to be under way")
        os.killpg(worker.pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)  # the fault itself: the worker's whole process group frozen this long
        finally:
            os.killpg(worker.pid, signal.SIGCONT)
        rc = worker.wait(240)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        log.close()
        kill_everything_in(tmp_path)
    assert rc == 0, (tmp_path / "w.log").read_text()[-3000:]
    # Unpaused, this server passes c=8 with TTFT P95 ~40 ms and TPOT P95 ~9 ms (SLA 1000 ms / 100 ms); the pause,
    # counted as the server's, failed it (TPOT P95 345 ms or TTFT P95 20 s) and the configuration got a verdict.
    assert q(db, "SELECT status FROM server_configs WHERE status != 'aborted'") == [("completed",)], \
        q(db, "SELECT status, stop_reason FROM server_configs")
    judged = q(db, "SELECT r.ttft_p95_ms, r.tpot_p95_ms FROM runs r JOIN server_configs c ON c.id = r.server_config_id "
                   "WHERE r.status = 'completed' AND c.status = 'completed' AND NOT r.client_bound")
    assert judged and all(ttft < 1000 and tpot < 100 for ttft, tpot in judged), judged


def test_a_stall_that_began_inside_the_window_counts_though_its_tick_woke_after_the_end() -> None:
    """The detection half, fixed: the tick that measured a 12 s pause begun 3 s into a 10 s window woke at 15 s,
    after the window's end, and was left out (loop lag max 1.9 ms); its late interval [3, 15] overlaps the window."""
    ticks = np.array([[1.0, 0.001, 0.0], [2.0, 0.002, 0.0], [15.0, 12.0, 0.0], [15.5, 0.001, 0.0]])
    assert loop_lag_max(ticks, 0.0, 10.0) == 12.0
    assert loop_lag_max(ticks, 16.0, 20.0) == 0.0  # a window after the stall is not charged with it
