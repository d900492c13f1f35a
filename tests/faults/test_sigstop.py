"""Issue 23 §1 as a deterministic fault: two workers on one SQLite study, one frozen (SIGSTOP of its process group,
as Ctrl-Z, a VM pause or a swap storm would) mid-window for longer than the heartbeat grace, then woken.

The other worker re-queues the frozen worker's configuration and measures it; on waking, the frozen worker is
fenced: it writes nothing more for that attempt (no `failed` window, no configuration row turned back from
`aborted`), tells Optuna nothing, and carries on. Each configuration ends measured exactly once with one verdict.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
from faultkit import SMOKE, assert_measured_once, env, kill_everything_in, q
from waiting import wait_for

from sweep.fleet.shared_study import create_study
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

FAST = {"search.heartbeat_s": 1, "search.grace_s": 3}
SPACE = {"max_running_requests": [4, 8]}


def _worker(db: Path, tmp: Path, label: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", "frozen", "--db", str(db), "--out",
           str(tmp / "reports"), "--label", label, "--no-progress", "--driver", "http", "--launcher", "sim"]
    log = open(tmp / f"{label}.log", "wb")  # noqa: SIM115 - closed when the process has exited
    return subprocess.Popen(cmd, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, env=env(), start_new_session=True)


def test_a_worker_frozen_past_the_grace_writes_nothing_for_its_requeued_trial(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    url = f"sqlite:///{db}"
    prof = load_profile(SMOKE, {**FAST, "search.space": SPACE, "ladder": [2, 4], "window.measure_seconds": 4,
                                "window.drain_seconds": 2, "window.min_requests": 2,
                                "server.extra_args": ["--load-format", "dummy"]})
    sid = create_study(Orchestrator(prof, url, tmp_path / "reports", driver="http", launcher_kind="sim"), "frozen")
    frozen = _worker(db, tmp_path, "frozen")
    other: subprocess.Popen[bytes] | None = None
    stopped = False
    try:
        wid = wait_for(lambda: q(db, "SELECT id FROM sweep_workers WHERE study_id = ? AND pid = ?",
                                 (sid, frozen.pid)), 90, "the worker to register")[0][0]
        cid = wait_for(lambda: q(db, "SELECT server_config_id FROM runs WHERE worker_id = ? AND status = 'running'",
                                 (wid,)), 120, "the worker mid-window")[0][0]
        os.killpg(frozen.pid, signal.SIGSTOP)  # the whole group, as a terminal's Ctrl-Z stops it
        stopped = True
        other = _worker(db, tmp_path, "other")
        wait_for(lambda: q(db, "SELECT id FROM server_configs WHERE id = ? AND status = 'aborted'", (cid,)), 120,
                 "the other worker to take the frozen worker's configuration over")
        left = q(db, "SELECT id, status, reason FROM runs WHERE server_config_id = ? ORDER BY id", (cid,))
        os.killpg(frozen.pid, signal.SIGCONT)
        stopped = False
        rcs = {label: p.wait(240) for label, p in (("frozen", frozen), ("other", other))}
    finally:
        if stopped:
            os.killpg(frozen.pid, signal.SIGCONT)
        for p in (frozen, other):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
        kill_everything_in(tmp_path)
    logs = {label: (tmp_path / f"{label}.log").read_text(errors="replace") for label in ("frozen", "other")}
    assert rcs == {"frozen": 0, "other": 0}, logs
    assert not any("Traceback" in text for text in logs.values()), logs
    assert "fenced" in logs["frozen"], logs["frozen"][-3000:]

    assert_measured_once(db, n_configs=2, ladder_len=2)
    # The frozen worker wrote nothing for the re-queued attempt after it woke: its row stays aborted, its runs
    # as the recovery left them (no window stored `failed` as "hung" by a worker that took its own pause for a hang).
    assert q(db, "SELECT status FROM server_configs WHERE id = ?", (cid,)) == [("aborted",)]
    assert q(db, "SELECT id, status, reason FROM runs WHERE server_config_id = ? ORDER BY id", (cid,)) == left
    verdicts = q(db, "SELECT config_key, status FROM server_configs WHERE status != 'aborted'")
    assert sorted(Counter(k for k, _ in verdicts).values()) == [1, 1], verdicts
    trials = optuna.load_study(study_name="frozen", storage=url).get_trials(deepcopy=False)
    real = [t for t in trials if not t.user_attrs.get("surplus")]
    assert Counter(t.state.name for t in real) == {"COMPLETE": 2, "FAIL": 1}, [(t.number, t.state) for t in trials]
