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
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
from faultkit import SMOKE, env, kill_everything_in

from sweep.fleet.shared_study import create_study
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator
from tests.waiting import wait_for

FAST = {"search.heartbeat_s": 1, "search.grace_s": 3}
SPACE = {"max_running_requests": [4, 8]}


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not os.environ.get("SWEEP_TEST_PG_URL"), reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL"))]


class Rows:
    """Read-only queries on the study's database, SQLite or PostgreSQL ([] while a table does not exist yet)."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url, poolclass=sa.pool.NullPool)

    def __call__(self, sql: str, **args: Any) -> list[tuple[Any, ...]]:
        try:
            with self.engine.connect() as conn:
                return [tuple(r) for r in conn.execute(sa.text(sql), args)]
        except sa.exc.SQLAlchemyError:
            return []


def _measured_once(rows: Rows, sid: int, n_configs: int, ladder_len: int) -> None:
    """faultkit.assert_measured_once for one study of a database that may hold others (PostgreSQL is shared)."""
    configs = rows("SELECT id, config_key, status FROM server_configs WHERE study_id = :s", s=sid)
    finished = Counter(k for _, k, st in configs if st in ("completed", "infeasible", "failed"))
    assert len(finished) == n_configs and set(finished.values()) == {1}, configs
    runs = rows("SELECT c.config_key, r.concurrency, r.phase FROM runs r JOIN server_configs c ON c.id = "
                "r.server_config_id WHERE r.status = 'completed' AND c.status != 'aborted' AND c.study_id = :s", s=sid)
    assert not [k for k, n in Counter(runs).items() if n > 1], runs
    assert len(runs) == n_configs * ladder_len, runs
    assert not rows("SELECT id FROM runs WHERE status = 'running' AND study_id = :s", s=sid)


def _worker(db: str, tmp: Path, label: str, study: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", study, "--db", db, "--out",
           str(tmp / "reports"), "--label", label, "--no-progress", "--driver", "http", "--launcher", "sim"]
    log = open(tmp / f"{label}.log", "wb")  # noqa: SIM115 - closed when the process has exited
    return subprocess.Popen(cmd, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, env=env(), start_new_session=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_frozen_past_the_grace_writes_nothing_for_its_requeued_trial(tmp_path: Path, backend: str) -> None:
    """On PostgreSQL the fence is a row lock (SELECT ... FOR UPDATE of the configuration in every write of the
    attempt), on SQLite the database's one writer: both must leave one verdict per configuration."""
    url = os.environ["SWEEP_TEST_PG_URL"] if backend == "postgresql" else f"sqlite:///{tmp_path / 'results.db'}"
    study = f"frozen-{uuid.uuid4().hex[:8]}"  # PostgreSQL's database is shared by the suite
    q = Rows(url)
    prof = load_profile(SMOKE, {**FAST, "search.space": SPACE, "ladder": [2, 4], "window.measure_seconds": 4,
                                "window.drain_seconds": 2, "window.min_requests": 2,
                                "server.extra_args": ["--load-format", "dummy"]})
    sid = create_study(Orchestrator(prof, url, tmp_path / "reports", driver="http", launcher_kind="sim"), study)
    frozen = _worker(url, tmp_path, "frozen", study)
    other: subprocess.Popen[bytes] | None = None
    stopped = False
    try:
        wid = wait_for(lambda: q("SELECT id FROM sweep_workers WHERE study_id = :s AND pid = :p",
                                 s=sid, p=frozen.pid), 90, "the worker to register")[0][0]
        cid = wait_for(lambda: q("SELECT server_config_id FROM runs WHERE worker_id = :w AND status = 'running'",
                                 w=wid), 120, "the worker mid-window")[0][0]
        os.killpg(frozen.pid, signal.SIGSTOP)  # the whole group, as a terminal's Ctrl-Z stops it
        stopped = True
        other = _worker(url, tmp_path, "other", study)
        wait_for(lambda: q("SELECT id FROM server_configs WHERE id = :c AND status = 'aborted'", c=cid), 120,
                 "the other worker to take the frozen worker's configuration over")
        left = q("SELECT id, status, reason FROM runs WHERE server_config_id = :c ORDER BY id", c=cid)
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

    _measured_once(q, sid, n_configs=2, ladder_len=2)
    # The frozen worker wrote nothing for the re-queued attempt after it woke: its row stays aborted, its runs
    # as the recovery left them (no window stored `failed` as "hung" by a worker that took its own pause for a hang).
    assert q("SELECT status FROM server_configs WHERE id = :c", c=cid) == [("aborted",)]
    assert q("SELECT id, status, reason FROM runs WHERE server_config_id = :c ORDER BY id", c=cid) == left
    verdicts = q("SELECT config_key, status FROM server_configs WHERE status != 'aborted' AND study_id = :s", s=sid)
    assert sorted(Counter(k for k, _ in verdicts).values()) == [1, 1], verdicts
    trials = optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)
    real = [t for t in trials if not t.user_attrs.get("surplus")]
    assert Counter(t.state.name for t in real) == {"COMPLETE": 2, "FAIL": 1}, [(t.number, t.state) for t in trials]
