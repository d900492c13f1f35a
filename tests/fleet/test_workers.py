"""Several `sweep worker` processes on one study in a real PostgreSQL: each configuration measured exactly once,
a killed worker's configuration measured again once, a late joiner takes only unclaimed work."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psutil
import pytest
from rich.console import Console
from rich.text import Text
from sqlalchemy import create_engine, text

from sweep.fleet.gpus import FleetProgress
from sweep.fleet.shared_study import create_study
from sweep.profile import load_profile
from sweep.store import Store
from sweep.study.orchestrator import Orchestrator
from sweep.views.live import read_state
from tests.pgdb import fresh_database, needs_pg
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
GRID12 = {"max_running_requests": [2, 4, 8, 16], "mem_fraction_static": [0.8, 0.85, 0.9]}
FAST = {"search.heartbeat_s": 1, "search.grace_s": 3}

pytestmark = [pytest.mark.postgres, needs_pg, pytest.mark.integration]


@pytest.fixture(scope="module")
def pg() -> Iterator[str]:
    with fresh_database("sweep_workers") as url:
        yield url



def _q(url: str, sql: str, **params: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params))
    finally:
        engine.dispose()


def _create(url: str, name: str, tmp: Path, overrides: dict[str, Any]) -> int:
    prof = load_profile(SMOKE, {**FAST, **overrides})
    return create_study(Orchestrator(prof, url, tmp / "reports", driver="virtual"), name)


def _worker(url: str, name: str, tmp: Path, label: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "sweep.cli", "worker", "--study", name, "--db", url, "--out", str(tmp / "reports"),
           "--label", label, "--no-progress", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = open(tmp / f"{label}.log", "w")  # noqa: SIM115 - closed with the process by the caller's wait
    return subprocess.Popen(cmd, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)


def _finish(procs: list[subprocess.Popen[str]], tmp: Path, timeout_s: float = 240) -> None:
    for p in procs:
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for p in procs:
        args = cast(list[str], p.args)
        label = args[args.index("--label") + 1]
        assert p.returncode == 0, (tmp / f"{label}.log").read_text()[-3000:]


def _measured_once(url: str, study_id: int, n: int) -> dict[str, int]:
    """Every configuration completed exactly once (aborted attempts aside); returns config_key -> worker id."""
    rows = _q(url, "SELECT config_key, status, worker_id FROM server_configs WHERE study_id = :s", s=study_id)
    done = Counter(k for k, s, _ in rows if s in ("completed", "infeasible"))
    assert len(done) == n and set(done.values()) == {1}, rows
    assert {s for _, s, _ in rows} <= {"completed", "infeasible", "aborted"}, rows
    runs = _q(url, "SELECT c.config_key, r.concurrency FROM runs r JOIN server_configs c ON c.id = r.server_config_id "
                   "WHERE r.study_id = :s AND r.status = 'completed' AND c.status != 'aborted'", s=study_id)
    assert max(Counter(runs).values()) == 1, runs
    assert not _q(url, "SELECT id FROM runs WHERE study_id = :s AND status = 'running'", s=study_id)
    return {k: w for k, s, w in rows if s in ("completed", "infeasible")}


def _trials(url: str, name: str) -> list[tuple[int, str, dict[str, Any]]]:
    """(number, state, user attrs) of an Optuna study's trials."""
    import optuna

    study = optuna.load_study(study_name=name, storage=url)
    return [(t.number, t.state.name, t.user_attrs) for t in study.get_trials(deepcopy=False)]


def test_three_workers_finish_a_12_configuration_grid_measuring_each_once(pg: str, tmp_path: Path) -> None:
    name = f"grid12-{os.getpid()}-{time.monotonic_ns()}"
    sid = _create(pg, name, tmp_path, {"search.space": GRID12, "ladder": [2, 4]})
    procs = [_worker(pg, name, tmp_path, f"w{i}") for i in range(3)]
    _finish(procs, tmp_path)
    by_worker = _measured_once(pg, sid, 12)
    workers = _q(pg, "SELECT id, label, status, host FROM sweep_workers WHERE study_id = :s", s=sid)
    assert sorted(label for _, label, _, _ in workers) == ["w0", "w1", "w2"]
    assert {st for _, _, st, _ in workers} == {"done"}
    assert len(set(by_worker.values())) >= 2, f"one worker did all the work: {by_worker}"
    # Every run says where it ran.
    placed = _q(pg, "SELECT DISTINCT worker_id IS NOT NULL, host, gpu_name FROM runs WHERE study_id = :s", s=sid)
    assert all(has and host and gpu for has, host, gpu in placed), placed
    real = [t for t in _trials(pg, name) if not t[2].get("surplus")]
    assert Counter(state for _, state, _ in real) == {"COMPLETE": 12}
    listed = subprocess.run([sys.executable, "-m", "sweep.cli", "runs", "--study", name, "--db", pg, "--format",
                             "json"], capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)["runs"]
    stored = _q(pg, "SELECT count(*) FROM runs WHERE study_id = :s", s=sid)[0][0]
    assert len(shown) == stored and len({r["worker_id"] for r in shown}) >= 2  # every worker's steps, one listing
    assert {r["worker"] for r in shown} <= {"w0", "w1", "w2"}  # named as their progress lines name them
    # The live page and a fleet's progress show every worker of the study, also those it did not start.
    with Store(pg) as store:
        live = read_state(store, sid)
        landed, status = FleetProgress(store, sid, [], Console(file=io.StringIO())).lines()
    assert sorted((w.worker, w.status, w.now) for w in live.workers) == [(x, "done", "done") for x in ("w0", "w1", "w2")]
    assert sum(w.windows_done for w in live.workers) == len(live.windows) == 24
    assert {w.worker for w in live.windows} == {r["worker"] for r in shown}
    assert sorted(status) == ["w0", "w1", "w2"] and all(line.endswith("; done") for line in status.values())
    assert len(landed) == 24 and all(re.match(r"\[w[012]\] final ", Text.from_markup(line).plain) for line in landed)


def test_kill_9_of_a_worker_mid_window_loses_nothing_and_its_config_is_measured_again_once(
        pg: str, tmp_path: Path) -> None:
    name = f"kill9-{os.getpid()}-{time.monotonic_ns()}"
    over = {"search.space": {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]}, "ladder": [2, 4],
            "window.measure_seconds": 2, "window.drain_seconds": 2}
    sid = _create(pg, name, tmp_path, over)
    victim = _worker(pg, name, tmp_path, "victim", "--driver", "http", "--launcher", "sim")
    vid = wait_for(lambda: _q(pg, "SELECT id FROM sweep_workers WHERE study_id = :s AND pid = :p", s=sid, p=victim.pid),
                90, "the victim to register")[0][0]
    wait_for(lambda: _q(pg, "SELECT id FROM runs WHERE worker_id = :w AND status = 'running'", w=vid), 90,
          "the victim mid-window")
    launches = [json.loads(i or "{}").get("sweep_launch") for (i,) in _q(
        pg, "SELECT server_info_json FROM server_configs WHERE worker_id = :w AND status = 'running'", w=vid)]
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    servers = [psutil.Process(x["pid"]) for x in launches if x and psutil.pid_exists(x["pid"])]
    assert servers, "the killed worker should have left its running server behind"
    survivor = _worker(pg, name, tmp_path, "survivor", "--driver", "http", "--launcher", "sim")
    _finish([survivor], tmp_path, timeout_s=300)
    _measured_once(pg, sid, 4)
    for p in servers:  # the next worker on this host killed the dead worker's server
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, f"leftover server {p.pid} still runs"
    assert _q(pg, "SELECT status FROM sweep_workers WHERE id = :w", w=vid)[0][0] == "lost"
    assert _q(pg, "SELECT count(*) FROM server_configs WHERE worker_id = :w AND status = 'aborted'", w=vid)[0][0] == 1
    trials = _trials(pg, name)
    failed = [n for n, state, _ in trials if state == "FAIL"]
    copies = [a["requeued_from"] for _, _, a in trials if "requeued_from" in a]
    assert len(failed) == 1 and copies == failed, trials
    assert Counter(s for _, s, a in trials if not a.get("surplus"))["COMPLETE"] == 4


def test_a_late_worker_takes_only_unclaimed_work(pg: str, tmp_path: Path) -> None:
    name = f"late-{os.getpid()}-{time.monotonic_ns()}"
    sid = _create(pg, name, tmp_path, {"search.space": {"max_running_requests": [2, 4, 8, 16, 32, 64]},
                                       "ladder": [2, 4, 8]})
    early = _worker(pg, name, tmp_path, "early")
    wait_for(lambda: len(_q(pg, "SELECT id FROM server_configs WHERE study_id = :s AND status IN "
                             "('completed', 'infeasible')", s=sid)) >= 2, 120, "two configurations measured")
    joined = time.time()
    late = _worker(pg, name, tmp_path, "late")
    _finish([early, late], tmp_path)
    by_worker = _measured_once(pg, sid, 6)
    late_id = _q(pg, "SELECT id FROM sweep_workers WHERE study_id = :s AND label = 'late'", s=sid)[0][0]
    import optuna

    study = optuna.load_study(study_name=name, storage=pg)
    for t in study.get_trials(deepcopy=False):
        if (t.user_attrs.get("worker") or {}).get("worker_id") == late_id and not t.user_attrs.get("surplus"):
            assert t.datetime_start is not None and t.datetime_start.timestamp() >= joined - 1, t.number
    late_keys = [k for k, w in by_worker.items() if w == late_id]
    early_keys = [k for k, w in by_worker.items() if w != late_id]
    assert not set(late_keys) & set(early_keys)

