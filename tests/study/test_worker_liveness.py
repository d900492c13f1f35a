"""Resume with several workers: a live worker's trial and rows are never touched; a dead one's are, once."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import optuna
import psutil
import pytest

from sweep.core.types import Placement, ServerConfig
from sweep.fleet.shared_study import create_study
from sweep.ladder.runner import LadderRunner
from sweep.profile import load_profile
from sweep.store import Store
from sweep.study.orchestrator import Orchestrator
from sweep.study.search import Search

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _running_trial(url: str, name: str, worker: dict[str, object] | None) -> int:
    """A RUNNING trial as a worker mid-ladder leaves it, owned by `worker`."""
    study = optuna.load_study(study_name=name, storage=url)
    trial = study.ask()
    trial.suggest_categorical("max_running_requests", [4, 8])
    if worker is not None:
        trial.set_user_attr("worker", worker)
    return trial.number


def _search(url: str, name: str) -> Search:
    prof = load_profile(SMOKE, {"search.heartbeat_s": 1, "search.grace_s": 2})
    # Other workers may be alive: only liveness decides (no orphan sweep of failed trials).
    return Search(prof, LadderRunner.__new__(LadderRunner), url, name, alone=lambda: False)


def test_resume_leaves_a_live_workers_trial_and_rows_alone(tmp_path: Path, sqlite_url: str) -> None:
    url = sqlite_url
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]}})
    sid = create_study(Orchestrator(prof, url, tmp_path, driver="virtual"), "shared")
    me = psutil.Process()
    store = Store(url)
    wid = store.register_worker(sid, "live", socket.gethostname(), os.getpid(), me.create_time(), None, "v", "fp")
    number = _running_trial(url, "shared", {"host": socket.gethostname(), "pid": os.getpid(),
                                            "started": me.create_time(), "worker_id": wid})
    cid = store.create_server_config(sid, ServerConfig(4), "sim", [], number)
    store.update_server_config(cid, status="running", worker_id=wid)
    rid = store.create_run(sid, cid, 2, "fp", True, "virtual", placement=Placement(worker_id=wid))
    store.close()
    assert _search(url, "shared").requeue_interrupted() == 0
    Orchestrator(prof, url, tmp_path, driver="virtual").open_study("shared", resume=True)
    study = optuna.load_study(study_name="shared", storage=url)
    assert [t.state.name for t in study.get_trials()] == ["RUNNING"]
    with Store(url) as s:
        run = s.get_run(rid)
        assert run is not None and run.run.status == "running"
        assert s.server_configs(sid)[0].status == "running"


def test_a_dead_workers_trial_is_requeued_exactly_once_when_two_workers_look_at_once(tmp_path: Path, sqlite_url: str) -> None:
    url = sqlite_url
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]}})
    create_study(Orchestrator(prof, url, tmp_path, driver="virtual"), "s")
    gone = psutil.Popen(["true"])
    gone.wait()
    number = _running_trial(url, "s", {"host": socket.gethostname(), "pid": gone.pid, "started": 1.0,
                                       "worker_id": None})
    searches = [_search(url, "s") for _ in range(4)]
    counts: list[int] = []
    threads = [threading.Thread(target=lambda s=s: counts.append(s.requeue_interrupted())) for s in searches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(counts) == 1, counts
    trials = optuna.load_study(study_name="s", storage=url).get_trials()
    assert [(t.state.name, t.user_attrs.get("requeued_from")) for t in trials] == [("FAIL", None),
                                                                                     ("WAITING", number)]
    assert trials[1].system_attrs["fixed_params"] == trials[0].params


def test_doctor_fails_when_a_running_worker_runs_other_code_or_another_workload(tmp_path: Path, sqlite_url: str) -> None:
    from sweep.study.doctor import workers_check
    from sweep.study.liveness import sweep_version

    url = sqlite_url
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4]}})
    sid = create_study(Orchestrator(prof, url, tmp_path, driver="virtual"), "d")
    with Store(url) as store:
        store.register_worker(sid, "same", "h1", 1, 1.0, "0", sweep_version(), prof.fingerprint())
        assert workers_check(url).ok is True
        store.register_worker(sid, "old", "h2", 2, 1.0, "1", "0.0.1+deadbeef", prof.fingerprint())
        store.register_worker(sid, "other", "h3", 3, 1.0, "2", sweep_version(), "f" * 16)
    check = workers_check(url)
    assert check.ok is False
    assert "old@h2 of d runs sweep 0.0.1+deadbeef" in check.detail and "other@h3 of d measures workload" in check.detail


@pytest.mark.integration
def test_a_study_measured_on_two_gpu_models_is_ranked_per_hardware_group_unless_told(tmp_path: Path, sqlite_url: str) -> None:
    """Worker A (H200) measures two configurations and is interrupted; worker B (A100) joins and does the rest."""
    from sweep.report.document import write_report
    from sweep.views.context import study_context

    url = sqlite_url
    space = {"max_running_requests": [2, 4, 8, 16]}
    h200 = load_profile(SMOKE, {"search.space": space, "ladder": [2, 4], "server.sim_gpu": "H200"})
    seen: list[object] = []

    def stop_after_two(outcome: object) -> None:
        seen.append(outcome)
        if len(seen) == 2:
            raise KeyboardInterrupt

    import pytest

    with pytest.raises(KeyboardInterrupt):
        Orchestrator(h200, url, tmp_path, driver="virtual").knee("mixed", on_trial=stop_after_two)
    a100 = h200.model_copy(update={"server": h200.server.model_copy(update={"sim_gpu": "A100-80G"})})
    assert a100.fingerprint() == h200.fingerprint()  # the same workload, other hardware
    Orchestrator(a100, url, tmp_path, driver="virtual").join("mixed")
    with Store(url) as store:
        study = store.get_study_by_name("mixed")
        assert study is not None
        sid = study.id
        kept = [c for c in store.server_configs(sid) if c.status in ("completed", "infeasible")]
        assert sorted(c.placement.gpu_name or "" for c in kept) == ["A100-80G (simulated)"] * 2 + ["H200 (simulated)"] * 2
        ctx = study_context(store, sid)
        assert ctx.winner is None and ctx.hardware and ctx.hardware.reason and "2 GPU models" in ctx.hardware.reason
        assert set(ctx.hardware.winners) == {"H200 (simulated), 140 GiB", "A100-80G (simulated), 80 GiB"}
        assert all(w is not None for w in ctx.hardware.winners.values())
        text = write_report(ctx, tmp_path / "rep").markdown.read_text()
        assert "## Hardware groups" in text and "No single winner" in text and "every configuration is infeasible" \
            not in text
        anyway = study_context(store, sid, rank_mixed_hardware=True)
        assert anyway.winner is not None and anyway.hardware is not None and anyway.hardware.ranked_anyway


def test_a_trial_heartbeat_outlives_a_locked_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos night finding 4: another process held the SQLite file's exclusive lock for 30 s; Optuna's heartbeat
    thread died at the first 'database is locked' (a traceback) and the trial never beat again. A beat that cannot be
    written is now said in one line and written at the next beat."""
    import sqlite3

    import optuna

    import sweep.store.engine
    from sweep.study import liveness

    monkeypatch.setattr(liveness, "SQLITE_BUSY_S", 0.2)  # how long a write waits for the lock, here
    monkeypatch.setattr(sweep.store.engine, "SQLITE_BUSY_MS", 200)
    db = tmp_path / "optuna.db"
    storage = liveness.optuna_storage(f"sqlite:///{db}", 1, 3)
    study = optuna.create_study(storage=storage, study_name="beat")
    trial = study.ask()
    lock = sqlite3.connect(db, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        storage.record_heartbeat(trial._trial_id)  # raised OperationalError (database is locked) before
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    storage.record_heartbeat(trial._trial_id)
    with sqlite3.connect(db) as conn:
        beats = conn.execute("SELECT count(*) FROM trial_heartbeats WHERE trial_id = ?", (trial._trial_id,)).fetchone()
    assert beats == (1,)
