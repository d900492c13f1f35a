"""Fencing: a worker whose lease on a configuration attempt lapsed (suspended past the heartbeat grace while another
worker re-queued and measured the configuration) writes nothing more for it, learns so, and carries on."""

from __future__ import annotations

import io
import os
import socket
from collections import Counter
from pathlib import Path

import optuna
import psutil
import pytest
from rich.console import Console

from sweep.core.errors import Fenced
from sweep.core.types import Placement, ServerConfig
from sweep.fleet.shared_study import create_study
from sweep.ladder.runner import LadderStep, StepStart
from sweep.profile import load_profile
from sweep.store import Store
from sweep.study import liveness
from sweep.study.orchestrator import Orchestrator
from sweep.study.recovery import on_requeued

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
VERDICTS = ("completed", "infeasible", "failed")


def test_a_lapsed_attempt_writes_nothing(sqlite_url: str) -> None:
    """Once the recovery path aborted an attempt (its worker lost), every write of that attempt is refused with
    Fenced in its own transaction and the rows stay as the recovery left them; the recovery's own writes go on."""
    store = Store(sqlite_url)
    sid = store.create_study("s", "smoke", "{}", "fp", "grid", True, "virtual", None)
    wid = store.register_worker(sid, "a", socket.gethostname(), os.getpid(), psutil.Process().create_time(), None,
                                "v", "fp")
    cid = store.create_server_config(sid, ServerConfig(4), "sim", [], 0, placement=Placement(worker_id=wid))
    store.update_attempt(cid, status="running")
    done = store.create_run(sid, cid, 2, "fp", True, "virtual", placement=Placement(worker_id=wid))
    store.finish_run(done, {"n_started": 1}, [], [], 0.0)
    window = store.create_run(sid, cid, 4, "fp", True, "virtual", placement=Placement(worker_id=wid))
    assert store.abort_running(sid, [wid]) == 3  # the other worker's recovery: the config and both runs

    for write in (lambda: store.finish_run(window, {"n_started": 1}, [], [], 0.0, status="failed", reason="hung"),
                  lambda: store.mark_run(window, "failed", "hung: no response bytes for 41 s"),
                  lambda: store.update_attempt(cid, status="failed", failure_reason="hung"),
                  lambda: store.create_run(sid, cid, 8, "fp", True, "virtual"),
                  lambda: store.abort_config(cid, "orchestrator: Fenced")):
        with pytest.raises(Fenced, match=f"configuration {cid} was re-queued to another worker"):
            write()
    config = store.server_configs(sid)[0]
    assert (config.status, config.failure_reason) == ("aborted", "orchestrator stopped before this finished")
    assert [(r.status, r.reason) for r in store.study_runs(sid)] == [
        ("aborted", "attempt aborted: orchestrator stopped before this finished"),
        ("aborted", "orchestrator stopped before this finished")]
    store.update_server_config(cid, stop_reason="a reader's note")  # not an attempt's write: never fenced
    store.close()


@pytest.mark.integration
@pytest.mark.parametrize("when", ["after its first step", "during its second window"])
def test_a_worker_taken_over_mid_ladder_is_fenced_and_goes_on(tmp_path: Path, sqlite_url: str, when: str) -> None:
    """Worker A measures its first step; then (as if A were frozen past the grace) its trial is failed and queued
    again by the recovery path, and worker B joins and measures the whole study. When A goes on (its next Optuna
    report, or the store of the window it was in), it is fenced: it stores nothing more, tells Optuna nothing, says
    one line and ends normally; every configuration has exactly one verdict."""
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]}, "ladder": [2, 4]})
    out = io.StringIO()
    a = Orchestrator(prof, sqlite_url, tmp_path, driver="virtual", console=Console(file=out, width=300))
    sid = create_study(a, "fence")
    steps: list[int] = []
    took_over: list[int] = []

    def lapse() -> None:
        storage = optuna.storages.RDBStorage(sqlite_url)
        study = optuna.load_study(study_name="fence", storage=storage)
        mine = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))[0]
        with Store(sqlite_url) as store:
            assert liveness.fail_and_requeue(storage, study, mine, on_requeued(store, sid, lambda _: None))
            took_over.append(next(c.id for c in store.server_configs(sid) if c.status == "aborted"))
        Orchestrator(prof, sqlite_url, tmp_path / "b", driver="virtual").join("fence")  # B does the whole study

    def after_step(config: ServerConfig, concurrency: int, step: LadderStep) -> None:
        if when == "after its first step" and not took_over:
            lapse()

    def window_starts(start: StepStart) -> None:
        steps.append(start.concurrency)
        if when == "during its second window" and len(steps) == 2:
            lapse()

    run = a.join("fence", on_step=after_step, on_step_start=window_starts)

    with Store(sqlite_url) as store:
        configs = store.server_configs(sid)
        runs = store.study_runs(sid)
        workers = store.workers(sid)
    fenced = next(c for c in configs if c.id == took_over[0])
    assert fenced.status == "aborted"
    mine = [r.status for r in runs if r.server_config_id == fenced.id]
    assert mine == (["aborted"] if when == "after its first step" else ["aborted", "aborted"])  # nothing after
    verdicts = Counter(c.config_key for c in configs if c.status in VERDICTS)
    assert sorted(verdicts.values()) == [1, 1], [(c.id, c.config_key, c.status) for c in configs]
    assert [w.status for w in workers] == ["done", "done"]
    assert f"fenced: configuration {fenced.id} " in out.getvalue()
    assert "was re-queued to another worker while this one was suspended" in out.getvalue()
    assert run.measured
    study = optuna.load_study(study_name="fence", storage=sqlite_url)
    assert Counter(t.state.name for t in study.get_trials()) == {"COMPLETE": 2, "FAIL": 1}


@pytest.mark.integration
def test_a_worker_frozen_between_its_verdict_and_optuna_tell_is_fenced(tmp_path: Path, sqlite_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker A stores its configuration's verdict; then, before Optuna is told (a freeze of milliseconds that
    outlasts the grace), its trial is failed and queued again and worker B runs the study: B reuses the stored
    verdict (the configuration is not measured twice), and A's tell, refused by Optuna ("Cannot tell a FAIL
    trial"), is a fence said in one line, not a traceback and an exit 1."""
    from sweep.study.trial_guard import TrialGuard

    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]}, "ladder": [2, 4]})
    out = io.StringIO()
    a = Orchestrator(prof, sqlite_url, tmp_path, driver="virtual", console=Console(file=out, width=300))
    sid = create_study(a, "late")
    frozen: list[int] = []
    guarded = TrialGuard.guarded

    def freeze_before_tell(self: TrialGuard, study: optuna.Study, measure):  # type: ignore[no-untyped-def]
        inner = guarded(self, study, measure)

        def objective(trial: optuna.Trial) -> float:
            value = inner(trial)  # the verdict is stored
            if not frozen:
                frozen.append(trial.number)
                storage = optuna.storages.RDBStorage(sqlite_url)
                shared = optuna.load_study(study_name="late", storage=storage)
                with Store(sqlite_url) as store:
                    assert liveness.fail_and_requeue(storage, shared, liveness.stored_trial(
                        storage, shared, trial.number), on_requeued(store, sid, lambda _: None))
                Orchestrator(prof, sqlite_url, tmp_path / "b", driver="virtual").join("late")
            return value

        return objective

    monkeypatch.setattr(TrialGuard, "guarded", freeze_before_tell)
    run = a.join("late")

    with Store(sqlite_url) as store:
        configs = store.server_configs(sid)
        runs = store.study_runs(sid)
    assert sorted(Counter(c.config_key for c in configs if c.status in VERDICTS).values()) == [1, 1], configs
    completed = Counter((r.server_config_id, r.concurrency) for r in runs if r.status == "completed")
    assert set(completed.values()) == {1} and len(completed) == 4, runs  # 2 configurations x 2 steps, once each
    assert f"fenced: trial {frozen[0]} " in out.getvalue(), out.getvalue()[-2000:]
    assert "Traceback" not in out.getvalue()
    assert run.measured
    study = optuna.load_study(study_name="late", storage=sqlite_url)
    assert Counter(t.state.name for t in study.get_trials()) == {"COMPLETE": 2, "FAIL": 1}
