"""Orchestrator failures are retried once on resume, configuration failures never (items 2 and 10).

In-process, on the virtual driver: the failure is raised where the real one would surface (a store write
inside the ladder, the sampler's before_trial), and the resume is a second Orchestrator on the same file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
from faultkit import SMOKE, assert_measured_once, q

from sweep.core.errors import StoreError
from sweep.profile import load_profile
from sweep.store import Store
from sweep.study.orchestrator import Orchestrator
from sweep.study.search import FAILURE_ATTR, ORCHESTRATOR_FAILURE, REQUEUED_ATTR


def _profile(space: dict[str, Any], ladder: list[int]) -> Any:
    return load_profile(SMOKE, {"search.space": space, "ladder": ladder, "window.measure_seconds": 2})


def _trials(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


def test_database_error_mid_configuration_is_measured_again_exactly_once(tmp_path: Path) -> None:
    prof = _profile({"max_running_requests": [2, 4, 8]}, [2, 4])
    url, db = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.db"
    steps: list[int] = []

    def locked_on_third_step(config: Any, concurrency: int, step: object) -> None:
        steps.append(concurrency)
        if len(steps) == 3:
            raise StoreError("cannot store run 3 (sqlite): database is locked")

    with pytest.raises(StoreError, match="locked"):
        Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("db", on_step=locked_on_third_step)
    failed = [t for t in _trials(url, "db") if t.state == optuna.trial.TrialState.FAIL]
    assert len(failed) == 1 and failed[0].user_attrs[FAILURE_ATTR] == ORCHESTRATOR_FAILURE
    assert "database is locked" in failed[0].user_attrs["failure_reason"]
    attempt = q(db, "SELECT status, failure_reason FROM server_configs ORDER BY id DESC LIMIT 1")[0]
    assert attempt[0] == "aborted" and "database is locked" in attempt[1]
    assert q(db, "SELECT status FROM sweep_studies") == [("failed",)]
    # Item 11: the aborted attempt's finished step is listed as aborted, never as an ordinary completed row.
    listed = Store(url).list_runs(study="db")
    aborted_id = q(db, "SELECT id FROM server_configs WHERE status = 'aborted'")[0][0]
    mine = [r for r in listed if r.get("server_config_id") == aborted_id]
    assert mine and {r.get("status") for r in mine} == {"aborted"}, mine

    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("db", resume=True)
    assert run.winner is not None
    assert_measured_once(db, n_configs=3, ladder_len=2)
    trials = _trials(url, "db")
    assert [t.user_attrs.get(REQUEUED_ATTR) for t in trials].count(failed[0].number) == 1
    assert Counter(t.state.name for t in trials) == {"COMPLETE": 3, "FAIL": 1}

    # A second resume has nothing left to redo: no new copy, no new measurement.
    n_runs = len(q(db, "SELECT id FROM runs"))
    Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("db", resume=True)
    assert len(_trials(url, "db")) == len(trials) and len(q(db, "SELECT id FROM runs")) == n_runs


@pytest.mark.parametrize(("skip", "reason"), [(True, "predicted infeasible: "), (False, "oom:")])
def test_a_configuration_that_fails_to_launch_is_a_result_not_retried(tmp_path: Path, skip: bool,
                                                                      reason: str) -> None:
    """Weights that do not fit in 5% of the GPU: skipped as predicted infeasible before launch, or (launched anyway,
    server.skip_infeasible false) OOM at start; either way infeasible, COMPLETE, never measured again."""
    prof = _profile({"max_running_requests": [4], "mem_fraction_static": [0.05, 0.85]}, [2])
    prof = prof.model_copy(update={"server": prof.server.model_copy(update={"skip_infeasible": skip})})
    url, db = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.db"
    Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("oom")
    rows = q(db, "SELECT mem_fraction_static, status, failure_reason FROM server_configs ORDER BY mem_fraction_static")
    assert rows[0][1] == "infeasible" and rows[0][2].startswith(reason), rows
    Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("oom", resume=True)
    assert len(q(db, "SELECT id FROM server_configs")) == 2
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in _trials(url, "oom"))


class _Killed(BaseException):
    """Stands in for SIGKILL inside one process: nothing below the raise gets to clean up."""


def test_kill_between_trial_creation_and_its_parameters_resumes_first_time(tmp_path: Path, monkeypatch: Any) -> None:
    """Item 10: the trial exists (RUNNING) but has neither parameters nor a grid point; the first resume used to
    crash with "All parameters must be specified when using GridSampler with enqueue_trial"."""
    prof = _profile({"max_running_requests": [2, 4]}, [2])
    url, db = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.db"
    real = optuna.samplers.GridSampler.before_trial
    calls: list[int] = []

    def dies_on_second_trial(self: Any, study: Any, trial: Any) -> None:
        calls.append(trial.number)
        if len(calls) == 2:
            raise _Killed()
        real(self, study, trial)

    monkeypatch.setattr(optuna.samplers.GridSampler, "before_trial", dies_on_second_trial)
    with pytest.raises(_Killed):
        Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("g")
    monkeypatch.setattr(optuna.samplers.GridSampler, "before_trial", real)
    running = [t for t in _trials(url, "g") if t.state == optuna.trial.TrialState.RUNNING]
    assert len(running) == 1 and not running[0].params and "grid_id" not in running[0].system_attrs

    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("g", resume=True)
    assert run.winner is not None
    assert_measured_once(db, n_configs=2, ladder_len=1)


def test_database_locked_past_the_busy_timeout_then_resume(tmp_path: Path, monkeypatch: Any) -> None:
    """A real lock: another connection holds the SQLite write lock past the busy timeout (shortened here from
    30 s) while a window's results are stored. Whatever could not be written, the resume redoes it once."""
    import sqlite3

    import sweep.store.engine
    import sweep.study.liveness

    monkeypatch.setattr(sweep.store.engine, "SQLITE_BUSY_MS", 300)
    monkeypatch.setattr(sweep.study.liveness, "SQLITE_BUSY_S", 0.3)
    prof = _profile({"max_running_requests": [2, 4]}, [2, 4])
    url, db = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.db"
    holder = sqlite3.connect(db, timeout=5, isolation_level=None)
    steps: list[int] = []

    def lock_after_second_step(config: Any, concurrency: int, step: object) -> None:
        steps.append(concurrency)
        if len(steps) == 2:
            holder.execute("BEGIN EXCLUSIVE")  # held until the orchestrator has given up

    with pytest.raises(BaseException) as stopped:  # noqa: B017 - whichever write hit the lock first says so
        Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("lock", on_step=lock_after_second_step)
    holder.execute("ROLLBACK")
    holder.close()
    assert "locked" in str(stopped.value), repr(stopped.value)
    monkeypatch.undo()
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("lock", resume=True)
    assert run.winner is not None
    assert_measured_once(db, n_configs=2, ladder_len=2)
