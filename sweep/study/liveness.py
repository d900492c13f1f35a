"""Which study worker holds which trial, and what happens to a trial whose worker died.

Several `sweep worker` processes share one Optuna study. Every trial records the worker that runs it (user
attr `worker`: its sweep_workers id, host, pid and the pid's start time). Two ways a worker is found dead:

- Optuna's trial heartbeat (RDBStorage `heartbeat_interval` / `grace_period`): a RUNNING trial whose worker
  stopped beating is failed by the next worker that starts a trial, wherever it runs. Optuna fails a stale
  trial with one row-locked update and calls the stale-trial callback only in the process whose update took
  effect, so the callback below queues the configuration again exactly once.
- On the worker's own host a resume need not wait for the grace period: a recorded pid that is gone (or now
  belongs to a process started at another time) is certainly dead, and its trial is failed and queued at once.

A trial whose worker is alive is never touched: not on this host (its process runs), not on another (its
heartbeat is fresh).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import psutil
import sqlalchemy.exc

from sweep.store import serialize_sqlite

log = logging.getLogger(__name__)

WORKER_ATTR = "worker"
REQUEUED_FROM = "requeued_from"  # on a re-queued copy: the number of the FAIL trial it redoes
FAILURE_ATTR = "failure"  # why a FAIL trial failed; ORCHESTRATOR_FAILURE is retried (sweep.study.search)
ORCHESTRATOR_FAILURE = "orchestrator"
SURPLUS_ATTR = "surplus"  # a trial created after the work ran out (two workers raced for the last item)
GRID_ATTRS = ("grid_id", "search_space")

_PG_OPTUNA_LOCK = 0x5357_4546  # one process at a time creates Optuna's tables ("SWEF")
_ROOT = Path(__file__).resolve().parents[2]
Requeued = Callable[[optuna.trial.FrozenTrial], None]


@dataclass(frozen=True)
class WorkerIdentity:
    """One study worker process: its sweep_workers id (None before it registered), host, pid and start time."""

    host: str
    pid: int
    started: float
    worker_id: int | None = None

    @classmethod
    def this_process(cls, worker_id: int | None = None) -> WorkerIdentity:
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time(), worker_id)

    def attr(self) -> dict[str, Any]:
        """The trial user attribute that names this worker."""
        return asdict(self)

SQLITE_BUSY_S = 30.0  # Optuna storage on SQLite: how long a write waits for another writer's lock


def sweep_version() -> str:
    """This sweep's package version and a hash of its code: workers of one study must run the same sweep."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        base = version("sweep")
    except PackageNotFoundError:
        base = "0"
    digest = hashlib.sha256()
    for sub in ("sweep", "launchers"):
        for p in sorted((_ROOT / sub).rglob("*.py")):
            digest.update(p.read_bytes())
    return f"{base}+{digest.hexdigest()[:10]}"


def process_is_gone(pid: int, started: float) -> bool:
    """True when no process with this pid and start time runs here (a zombie counts as gone)."""
    try:
        proc = psutil.Process(int(pid))
        if abs(proc.create_time() - float(started)) > 0.01:
            return True  # the pid was reused by another process
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False  # it exists but is not ours to inspect: alive as far as we can tell


def dead_on_this_host(worker: Mapping[str, Any] | None, host: str | None = None) -> bool:
    """Whether a recorded worker ran on this host and its process is certainly gone."""
    if not worker or worker.get("host") != (host or socket.gethostname()):
        return False
    return process_is_gone(int(worker["pid"]), float(worker["started"]))


class HeartbeatStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose trial heartbeat outlives a database that is locked or unreachable for a while.

    Optuna beats from a thread of its own that dies at the first exception (chaos night finding 4: a 30 s exclusive
    lock killed it with a traceback, and the worker then measured on with a trial that no longer beat, for another
    worker to take over after the grace). A beat that cannot be written is said in one line and tried again at the
    next interval; a lease that lapsed meanwhile is fenced as any other (sweep.core.errors.Fenced)."""

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
            cause = exc.__cause__ or exc  # Optuna wraps the database's error
            log.warning("trial %d: heartbeat not written (%s); trying again at the next beat", trial_id,
                        str(cause).splitlines()[0][:200])


def optuna_storage(url: str, heartbeat_s: float, grace_s: float | None,
                   on_requeued: Requeued | None = None) -> HeartbeatStorage:
    """Optuna's RDB storage with trial heartbeats; a stale trial is failed and its configuration queued again."""

    def stale(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        requeue(study, trial)
        if on_requeued is not None:
            on_requeued(trial)

    sqlite = url.startswith("sqlite")
    with warnings.catch_warnings(), _one_at_a_time(url):
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats: experimental since 2.9
        storage = HeartbeatStorage(
            url, engine_kwargs={"connect_args": {"timeout": SQLITE_BUSY_S}} if sqlite else {"pool_pre_ping": True},
            heartbeat_interval=max(1, round(heartbeat_s)), grace_period=max(2, round(grace_s or 4 * heartbeat_s)),
            heartbeat_stale_trial_callback=stale)
    if sqlite:  # several workers on one host: Optuna reads a row and then updates it in one transaction
        serialize_sqlite(storage.engine, every_transaction=True)
    return storage


@contextlib.contextmanager
def _one_at_a_time(url: str) -> Iterator[None]:
    """On PostgreSQL, hold an advisory lock while Optuna creates its tables: workers starting together on a
    fresh database would otherwise race to CREATE TYPE and all but one fail."""
    if not url.startswith("postgresql"):
        yield
        return
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_OPTUNA_LOCK})")
            try:
                yield
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_OPTUNA_LOCK})")
    finally:
        engine.dispose()


def _claimed_nothing(trial: optuna.trial.FrozenTrial) -> bool:
    """A trial that died before any parameter or grid point was chosen: the sampler picks that point again."""
    return not trial.params and "grid_id" not in trial.system_attrs


def requeue(study: optuna.Study, failed: optuna.trial.FrozenTrial) -> bool:
    """Queue the failed trial's configuration again, on its grid point, in one insert; False when there was
    nothing to queue (no parameters chosen yet) or a copy exists already.

    The copy carries the failed trial's grid point (GridSampler counts a FAIL as visited and would otherwise
    never revisit it, nor know which point the copy covers) and `requeued_from`, which makes the failed trial
    count as handed over rather than as lost work.
    """
    if _claimed_nothing(failed):
        return False
    if any(t.user_attrs.get(REQUEUED_FROM) == failed.number for t in study.get_trials(deepcopy=False)):
        return False
    system: dict[str, Any] = {"fixed_params": dict(failed.params)}
    system.update({a: failed.system_attrs[a] for a in GRID_ATTRS if a in failed.system_attrs})
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.WAITING, system_attrs=system,
                                              user_attrs={REQUEUED_FROM: failed.number}))
    return True


def requeue_orchestrator_failures(study: optuna.Study) -> int:
    """FAIL trials of an orchestrator failure (FAILURE_ATTR, or none: a kill leaves none) that have no copy
    yet (the failing worker could not write one) get one; returns how many."""
    n = 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        if t.user_attrs.get(FAILURE_ATTR, ORCHESTRATOR_FAILURE) == ORCHESTRATOR_FAILURE and requeue(study, t):
            n += 1
    return n


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of a study's trial `number`, through BaseStorage's public lookups (Optuna keeps the
    id of a Trial and a FrozenTrial private)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)


def stored_trial(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> optuna.trial.FrozenTrial:
    """A study's trial `number` as stored now (system attributes included, which a live Trial does not show)."""
    return storage.get_trial(trial_id(storage, study, number))


def fail_and_requeue(storage: optuna.storages.BaseStorage, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                     on_requeued: Requeued | None) -> bool:
    """Fail a RUNNING trial and queue its configuration once; False when another process got there first.

    `storage` is the study's own (the one it was created or loaded with)."""
    tid = trial_id(storage, study, trial.number)
    try:
        storage.set_trial_user_attr(tid, FAILURE_ATTR, ORCHESTRATOR_FAILURE)
        if not storage.set_trial_state_values(tid, optuna.trial.TrialState.FAIL):
            return False
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    requeue(study, storage.get_trial(tid))
    if on_requeued is not None:
        on_requeued(trial)
    return True


def requeue_dead(storage: optuna.storages.BaseStorage, study: optuna.Study, grace_s: float, on_requeued: Requeued | None = None,
                 ended: Callable[[int], bool] | None = None, alone: Callable[[], bool] | None = None) -> int:
    """Fail and queue again the RUNNING trials whose worker is certainly dead; returns how many.

    Certainly dead: a worker of this host whose process is gone; a worker that `ended` says has ended (its
    sweep_workers row is no longer running: it left the trial behind when it stopped); a trial that names no
    worker and started more than the grace period ago, or at all when `alone` says no other worker of the
    study can be alive (an orchestrator of a sweep before workers, or one killed before its trial began).
    Other hosts' trials are otherwise left to the heartbeat (fail_stale).
    """
    host = socket.gethostname()
    cutoff = datetime.now() - timedelta(seconds=grace_s)
    n = 0
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    nobody_else = alone is not None and any(WORKER_ATTR not in t.user_attrs for t in running) and alone()
    for t in running:
        worker = t.user_attrs.get(WORKER_ATTR)
        unowned = worker is None and (nobody_else or (t.datetime_start is not None and t.datetime_start < cutoff))
        gone = worker is not None and (dead_on_this_host(worker, host) or (
            ended is not None and worker.get("worker_id") is not None and ended(int(worker["worker_id"]))))
        if (unowned or gone) and fail_and_requeue(storage, study, t, on_requeued):
            n += 1
    return n


def fail_stale(study: optuna.Study) -> None:
    """Optuna's heartbeat check: stale RUNNING trials (any host) become FAIL, each queued again once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def work_items(trials: list[optuna.trial.FrozenTrial]) -> int:
    """How many units of work these trials stand for: a failed trial handed to a queued copy (or one that died
    before it chose a configuration) and a surplus trial count for nothing; everything else (finished,
    running, waiting) counts once."""
    handed = {t.user_attrs[REQUEUED_FROM] for t in trials if REQUEUED_FROM in t.user_attrs}
    return sum(1 for t in trials if not t.user_attrs.get(SURPLUS_ATTR)
               and not (t.state == optuna.trial.TrialState.FAIL and (t.number in handed or _claimed_nothing(t))))
