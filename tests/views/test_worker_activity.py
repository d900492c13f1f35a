"""Every worker's work, as it lands: the fleet's progress, the live page's state and `sweep runs --study` name
the worker, host and GPU that measured each window (sweep/views/workers.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.core.types import ServerConfig
from sweep.store import Store
from sweep.store.records import ConfigRecord, RunRecord, WorkerRecord
from sweep.views.live import read_state
from sweep.views.workers import activity
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _cfg(cid: int, mrr: int, status: str, worker_id: int | None) -> ConfigRecord:
    return ConfigRecord.from_row({"id": cid, "max_running_requests": mrr, "status": status, "worker_id": worker_id})


def _run(rid: int, cid: int, c: int, status: str, worker_id: int | None, phase: str = "final") -> RunRecord:
    return RunRecord.from_row({"id": rid, "server_config_id": cid, "concurrency": c, "status": status,
                               "worker_id": worker_id, "phase": phase})


def test_each_worker_says_what_it_measures_launches_or_whether_it_stopped() -> None:
    workers = [WorkerRecord(1, "gpu0", "running", "a", "0"), WorkerRecord(2, "gpu1", "running", "a", "1"),
               WorkerRecord(3, "b:77", "lost", "b"), WorkerRecord(4, "late", "running", "b")]
    configs = [_cfg(10, 4, "completed", 1), _cfg(11, 8, "running", 1), _cfg(12, 16, "running", 2),
               _cfg(13, 32, "aborted", 3)]
    runs = [_run(1, 10, 2, "completed", 1), _run(2, 10, 4, "completed", 1), _run(3, 11, 2, "running", 1),
            _run(4, 13, 2, "aborted", 3)]
    got = {a.worker: a for a in activity(workers, configs, runs)}
    assert list(got) == ["gpu0", "gpu1", "b:77", "late"]  # every worker that joined, in joining order
    assert got["gpu0"].now == "measuring final mrr=8 c=2"
    assert (got["gpu0"].windows_done, got["gpu0"].configs_done) == (2, 1)
    assert got["gpu1"].now == "launching mrr=16"
    assert got["b:77"].now == "lost" and got["b:77"].windows_done == 0  # an aborted attempt is no work done
    assert got["late"].now == "idle"
    assert got["gpu0"].line() == "on a GPU 0: 2 windows over 1 configuration; measuring final mrr=8 c=2"
    assert got["late"].line() == "on b: 0 windows over 0 configurations; idle"


@pytest.mark.integration
@pytest.mark.slow
def test_a_two_worker_fleet_shows_every_workers_work_as_it_lands(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    space = {"max_running_requests": [4, 8, 16, 32]}
    cmd = [sys.executable, "-m", "sweep.cli", "sweep", "--profile", str(SMOKE), "--db", str(db), "--out",
           str(tmp_path / "reports"), "--launcher", "sim", "--driver", "http", "--study", "pair", "--no-progress",
           "--gpus", "0,1", "--set", f"search.space={json.dumps(space)}", "--set", "ladder=[2,4]",
           "--set", "window.measure_seconds=2", "--set", "window.drain_seconds=2", "--set", "search.heartbeat_s=1"]
    err = tmp_path / "sweep.err"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    measuring: set[str] = set()
    try:
        wait_for(db.exists, 120, "the study's database")
        store = Store(f"sqlite:///{db}", create=False)
        study = wait_for(lambda: store.get_study_by_name("pair"), 120, "the study")

        def both_seen_measuring() -> bool:
            for w in read_state(store, study.get("id")).workers:
                if w.now.startswith("measuring "):
                    measuring.add(w.worker)
            return measuring == {"gpu0", "gpu1"} or proc.poll() is not None

        wait_for(both_seen_measuring, 300, "both workers measuring", every_s=0.2)
        assert proc.wait(timeout=300) == 0, err.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert measuring == {"gpu0", "gpu1"}, "the live state never showed both workers measuring"

    state = read_state(store, study.get("id"))
    host = socket.gethostname()
    rows = {w.worker: w for w in state.workers}
    assert set(rows) == {"gpu0", "gpu1"}
    assert {(w.host, w.gpus, w.status, w.now) for w in rows.values()} == {(host, "0", "done", "done"),
                                                                          (host, "1", "done", "done")}
    assert sum(w.windows_done for w in rows.values()) == len(state.windows) == 8
    assert sum(w.configs_done for w in rows.values()) == 4
    # each window names the worker, host and GPU that measured it
    assert {(w.worker, w.host, w.gpu) for w in state.windows} == {("gpu0", host, "0"), ("gpu1", host, "1")}

    # the fleet's progress: every landed window once, naming its worker, and each worker's closing line
    text = err.read_text()
    landed = re.findall(r"^\s+\[(gpu[01])\] final\s+mrr=(\d+) c=(\d+)\s+goodput", text, re.M)
    assert len(landed) == len(set(landed)) == 8, text[-3000:]
    assert {w for w, _, _ in landed} == {"gpu0", "gpu1"}
    for label, gpu in (("gpu0", "0"), ("gpu1", "1")):
        closing = re.findall(rf"^\s+\[{label}\] on {re.escape(host)} GPU {gpu}: \d+ windows? over \d+ "
                             r"configurations?; done$", text, re.M)
        assert len(closing) == 1, text[-3000:]  # said once, when it changed

    listed = subprocess.run([sys.executable, "-m", "sweep.cli", "runs", "--study", "pair", "--db", str(db),
                             "--format", "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)["runs"]
    assert len(shown) == 8 and {(r.get("worker"), r.get("host"), r.get("gpu_index")) for r in shown} == \
        {("gpu0", host, "0"), ("gpu1", host, "1")}
    table = subprocess.run([sys.executable, "-m", "sweep.cli", "runs", "--study", "pair", "--db", str(db)],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert table.returncode == 0 and "gpu0" in table.stdout and "gpu1" in table.stdout
    seats = subprocess.run([sys.executable, "-m", "sweep.cli", "study", "workers", "--study", "pair", "--db", str(db),
                            "--format", "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert seats.returncode == 0, seats.stderr
    assert sorted((w["worker"], w["host"], w["gpus"], w["status"], w["windows_done"]) for w in json.loads(seats.stdout)["workers"]) \
        == sorted((w.worker, host, w.gpus, "done", w.windows_done) for w in rows.values())


def test_a_failed_launch_names_the_worker_and_host_it_failed_on(tmp_path: Path) -> None:
    from sweep.core.types import Placement
    from sweep.profile import load_profile

    prof = load_profile(SMOKE)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("fails", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "http",
                             "optuna-fails")
    wid = store.register_worker(sid, "gpu3", "host-b", 4242, 1.0, "3", "test", prof.fingerprint())
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=8), "sim", [], 0,
                                     Placement(worker_id=wid, host="host-b", gpu_index="3"))
    store.update_server_config(cid, status="failed", failure_reason="server exited before ready (crash)")
    state = read_state(store, sid)
    assert [(f.config, f.what, f.worker, f.reason) for f in state.failures] == \
        [("mrr=8", "launch", "gpu3 on host-b", "server exited before ready (crash)")]
    assert [(w.worker, w.host, w.gpus, w.now) for w in state.workers] == [("gpu3", "host-b", "3", "idle")]


@pytest.mark.integration
@pytest.mark.slow
def test_a_lone_worker_also_prints_the_windows_other_workers_store(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sets = ["--set", f"search.space={json.dumps({'max_running_requests': [2, 4, 8, 16, 32, 64]})}", "--set",
            "ladder=[2,4]", "--set", "window.measure_seconds=1", "--set", "window.drain_seconds=1"]
    created = subprocess.run([sys.executable, "-m", "sweep.cli", "study", "create", "--profile", str(SMOKE),
                              "--study", "duo", "--db", str(db), "--driver", "http", "--launcher", "sim", *sets],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert created.returncode == 0, created.stderr

    def worker(label: str) -> subprocess.Popen[str]:
        log = open(tmp_path / f"{label}.log", "w")  # noqa: SIM115 - closed when the process exits
        return subprocess.Popen([sys.executable, "-m", "sweep.cli", "worker", "--study", "duo", "--db", str(db),
                                 "--out", str(tmp_path / "reports"), "--label", label, "--launcher", "sim",
                                 "--no-progress", "--set", "search.heartbeat_s=1"],
                                cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)

    first = worker("a")
    store = Store(f"sqlite:///{db}", create=False)
    study = wait_for(lambda: store.get_study_by_name("duo"), 60, "the study")
    wait_for(lambda: store.workers(study.get("id")), 120, "worker a to join")
    second = worker("b")
    for p in (first, second):
        assert p.wait(timeout=400) == 0, (tmp_path / "a.log").read_text()[-2000:] + (tmp_path / "b.log").read_text()[-2000:]
    logs = {label: (tmp_path / f"{label}.log").read_text() for label in ("a", "b")}
    peer = {label: re.findall(r"^\s+\[([ab])\] final\s+mrr=\d+ c=\d+\s+goodput", text, re.M)
            for label, text in logs.items()}
    stamp = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "  # a worker's log: each of its own lines led by the time
    own = {label: re.findall(stamp + r"\[\d+/≤?\d+\] ([ab]) final ", text, re.M) for label, text in logs.items()}
    assert set(own["a"]) == {"a"} and set(own["b"]) == {"b"} and len(own["a"]) + len(own["b"]) == 12
    assert "a" not in peer["a"] and "b" not in peer["b"]  # a worker's own windows are printed once, as its own
    assert peer["a"].count("b") >= 1, logs["a"][-3000:]  # a saw b's windows land while it measured its own
    # each worker's [n/N] counts the study's windows, the other worker's included, never past the study's 12
    counts = {label: [(int(n), int(t)) for n, t in re.findall(stamp + r"\[(\d+)/≤?(\d+)\] [ab] final ", text, re.M)]
              for label, text in logs.items()}
    for label, seen in counts.items():
        assert all(n <= t <= 12 for n, t in seen), (label, seen)
        assert [n for n, _ in seen] == sorted(n for n, _ in seen), (label, seen)
    assert any(seen[-1][0] > len(seen) for seen in counts.values()), counts  # not only its own windows
