"""What the live page reads (sweep/views/live.py), from a real study's database: SQLite, and PostgreSQL in a
database of its own, read by another process than the one that ran the study."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from sweep.store import Store
from sweep.views.live import read_state

ROOT = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("SWEEP_TEST_PG_URL")


def run_smoke(db: str, cwd: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
                           "--db", db, "--driver", "virtual", "--study", "state", "--out", str(cwd / "rep")],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr


def check_finished(url: str) -> None:
    store = Store(url)
    study = store.get_study_by_name("state")
    assert study is not None
    s = read_state(store, study.id)
    assert (s.status, s.phase, s.planned, s.done, s.running, s.queued, s.failed) == \
        ("completed", "final", 2, 2, 0, 0, 0)
    assert s.windows_done == 6 and len(s.windows) == 6 and {w.phase for w in s.windows} == {"final"}
    assert len(s.curves) == 2 and all(c.concurrency == [2, 4, 8] for c in s.curves)
    assert s.sla == {"ttft_ms": 1000.0, "tpot_ms": 100.0, "ttft_percentile": 95, "tpot_percentile": 95}
    assert all(t is not None for c in s.curves for t in c.ttft_ms)  # the SLA's P95, not a missing column
    w = s.winner
    assert w is not None and w.ci_low is not None and w.ci_high is not None and w.ci_low <= w.goodput_tps <= w.ci_high
    # one worker measured everything; its row names it (host:pid without --label), where it ran and that it ended
    host = socket.gethostname()
    assert [(w.host, w.status, w.now, w.windows_done, w.configs_done) for w in s.workers] == \
        [(host, "done", "done", 6, 2)]
    assert s.workers[0].worker.startswith(f"{host}:")
    assert {(w.worker, w.host) for w in s.windows} == {(s.workers[0].worker, host)}
    assert s.failures == [] and s.eta_s is None
    assert '"study": "state"' in s.as_json()


@pytest.mark.integration
def test_a_finished_sqlite_study(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_smoke(str(db), tmp_path)
    check_finished(f"sqlite:///{db}")


@pytest.fixture
def pg_database() -> Iterator[str]:
    assert PG_URL is not None
    name = f"live_{uuid.uuid4().hex[:10]}"
    admin = create_engine(make_url(PG_URL).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.integration
@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL")
def test_a_postgresql_study_run_by_another_process(pg_database: str, tmp_path: Path) -> None:
    run_smoke(pg_database, tmp_path)
    check_finished(pg_database)


def test_the_eta_counts_the_finals_and_the_soak_still_to_come_at_the_drivers_rate() -> None:
    """Screening: one of two configurations screened (3 windows of 6.5 driver seconds, 13 wall seconds each) and
    the other half-way. Left: half a screen ladder (9.75), the one final ladder screening promotes (3 x 8 s) and
    the soak (10 s) = 43.75 driver seconds at 2 wall seconds each. The ETA once counted only this phase (19.5 s)."""
    from datetime import datetime, timedelta

    from sweep.profile import load_profile
    from sweep.store import RunRecord
    from sweep.views.live import study_eta

    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"search.screening.enabled": True,
                                                              "search.screening.fraction": 0.5, "soak.enabled": True})
    t0 = datetime(2026, 1, 1)
    runs = [RunRecord.from_row({"id": i, "server_config_id": 1, "concurrency": 1, "status": "completed",
                                "phase": "screen", "worker_id": 7, "started_at": t0 + timedelta(seconds=13 * i),
                                "finished_at": t0 + timedelta(seconds=13 * (i + 1))}) for i in range(3)]
    eta = study_eta(prof, "screen", 0, 1, [3], 1.0, runs)
    assert eta is not None and abs(eta - 87.5) < 1e-6, eta
    assert study_eta(prof, "screen", 0, 1, [3], 1.0, []) is None  # nothing finished: no rate yet
    soaking = study_eta(prof, "final", 0, 0, [3], 0.5, runs)  # the soak half run, nothing else left: 5 x 2
    assert soaking is not None and abs(soaking - 10.0) < 1e-6, soaking


def test_an_out_of_memory_launch_is_listed_with_its_reason(tmp_path: Path) -> None:
    """`mem_fraction_static=0.05` on the simulator: the launch is infeasible (counted done, as the orchestrator
    counts it), and the page listed no failure at all; the terminal printed the reason."""
    from sweep.core.types import ServerConfig
    from sweep.profile import load_profile

    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("oom", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-oom")
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=4, mem_fraction_static=0.05), "sim", [], 0)
    why = "oom: Not enough memory. Please try to increase --mem-fraction-static."
    store.update_server_config(cid, status="infeasible", failure_reason=why)
    s = read_state(store, sid)
    assert [(f.config, f.what, f.reason) for f in s.failures] == [("mrr=4 mem=0.05", "launch (infeasible)", why)]
    assert (s.done, s.failed) == (1, 0)


@pytest.mark.integration
def test_the_finals_counts_say_how_many_the_screen_measured(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
                           "--db", str(db), "--driver", "virtual", "--study", "screened", "--out", str(tmp_path / "rep"),
                           "--set", "search.screening.enabled=true", "--set", "search.screening.keep=0.5",
                           "--set", "search.screening.min_keep=1", "--set", "soak.enabled=false"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}")
    study = store.get_study_by_name("screened")
    assert study is not None
    s = read_state(store, study.id)
    # two configurations screened, one promoted: the counts are the finals', the screen's stays in view
    assert (s.phase, s.done, s.planned, s.screened) == ("final", 1, 1, 2)
    assert {w.phase for w in s.windows} == {"screen", "final"}


def test_the_pages_data_carries_no_absolute_path(tmp_path: Path) -> None:
    """A launch failure and a failed window whose reasons name the server log by its absolute path (as the launcher
    writes them): the page's state names the log relative to the study's output folder and no absolute path."""
    from sweep.core.types import ServerConfig
    from sweep.profile import load_profile

    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("paths", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-paths")
    log = tmp_path / "out" / "paths" / "logs" / "gpu0" / "20260101-mrr4.log"
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=4), "sim", [], 0)
    store.update_server_config(cid, status="failed", failure_reason=f"crash: server exited (crash, exit 1): boom "
                               f"| log: {log}", log_path=str(log))
    other = store.create_server_config(sid, ServerConfig(max_running_requests=8), "sim", [], 0)
    run = store.create_run(sid, other, 4, prof.fingerprint(), True, "virtual")
    store.mark_run(run, "failed", f"hung: no response bytes for 41 s; see {tmp_path}/elsewhere/server.log")
    s = read_state(store, sid)
    assert [f.reason for f in s.failures] == ["crash: server exited (crash, exit 1): boom | log: "
                                              "logs/gpu0/20260101-mrr4.log",
                                              "hung: no response bytes for 41 s; see …/server.log"]
    assert str(tmp_path) not in s.as_json() and "/tmp" not in s.as_json()
