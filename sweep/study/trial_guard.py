"""A trial's failures told apart: the orchestrator's own (retried), the configuration's (a result), a fenced one.

An orchestrator failure (a signal, the database, the disk) leaves the trial FAIL, marked so, and its configuration
queued again at once for any worker to take. A configuration failure (the server crashed, OOMed, hung) is a
COMPLETE trial with a violated constraint and is never retried. A fenced trial is one this worker lost while it
was suspended (its lease lapsed and another worker took it over): said in one line, and the worker goes on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import optuna
from sqlalchemy.exc import SQLAlchemyError

from sweep.core.errors import Fenced
from sweep.ladder.parts import orchestrator_failure
from sweep.ladder.runner import LadderRunner
from sweep.store.errors import DatabaseError, database_error, first_line
from sweep.study import liveness

FAILURE_ATTR = liveness.FAILURE_ATTR
ORCHESTRATOR_FAILURE = liveness.ORCHESTRATOR_FAILURE
CONFIGURATION_FAILURE = "configuration"
REQUEUED_ATTR = liveness.REQUEUED_FROM  # on a re-queued copy: the number of the FAIL trial it redoes

Objective = Callable[[optuna.Trial], float]


class TrialGuard:
    """Wraps a phase's objective: an orchestrator failure marks the trial and queues its configuration again;
    a lapsed lease is remembered (`fenced`) so the error Optuna raises telling the trial is known to be moot."""

    def __init__(self, storage: optuna.storages.BaseStorage, runner: LadderRunner):
        self.storage = storage
        self.runner = runner  # its `attempt` names the configuration being measured
        self.fenced: Fenced | None = None  # the current trial's lease lapsed
        self.trial_number: int | None = None  # the trial the objective last ran

    def stored_state(self, study: optuna.Study, number: int) -> optuna.trial.TrialState | None:
        """Trial `number`'s state as stored now; None when it cannot be read (the database may be what failed:
        then no fence is inferred from it)."""
        try:
            return liveness.stored_trial(self.storage, study, number).state
        except Exception:  # noqa: BLE001 - any failure to read means "unknown", never "fenced"
            return None

    def told_too_late(self, study: optuna.Study, exc: Exception) -> Fenced | None:
        """Whether Optuna's error telling the trial the objective just finished says another worker finished it
        first: this worker froze between storing its verdict and the tell, past the heartbeat grace, so the
        trial was failed and its configuration queued again (the stored verdict is reused by that copy, not
        measured twice). Then the error is moot: a Fenced to say in one line; otherwise None."""
        # Optuna raises "Cannot tell a FAIL trial." (ValueError), then, handling it, an AssertionError of its own
        told = exc if isinstance(exc, ValueError) else exc.__context__
        if self.trial_number is None or not (isinstance(told, ValueError) and "Cannot tell" in str(told)):
            return None
        state = self.stored_state(study, self.trial_number)
        if state in (None, optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.COMPLETE):
            return None
        return Fenced(f"trial {self.trial_number}", f"it was {state.name} before this worker could tell its result")

    def guarded(self, study: optuna.Study, measure: Objective) -> Objective:
        """The objective: `measure`, and on the orchestrator's own failure (a signal, the database, the disk)
        the trial marked so and its configuration queued again at once, for any worker to take."""

        def objective(trial: optuna.Trial) -> float:
            self.runner.attempt = None
            self.trial_number = trial.number
            try:
                return measure(trial)
            except optuna.TrialPruned:
                raise
            except BaseException as exc:  # Optuna marks the trial FAIL once this propagates
                if isinstance(exc, Exception):
                    self.fenced = self.lapsed(study, trial, exc)
                with contextlib.suppress(Exception):  # best effort: the database may be what failed
                    trial.set_user_attr(FAILURE_ATTR, ORCHESTRATOR_FAILURE)
                    trial.set_user_attr("failure_reason", orchestrator_failure(exc))
                    liveness.requeue(study, liveness.stored_trial(self.storage, study, trial.number))
                raise

        return objective

    def lapsed(self, study: optuna.Study, trial: optuna.Trial, exc: Exception) -> Fenced | None:
        """Whether `exc` says this worker's lease on the trial lapsed: the store refused a write of its attempt
        (Fenced), or another worker finished the trial (failed it on a stale heartbeat and queued it again)."""
        if isinstance(exc, Fenced):
            return exc
        state = self.stored_state(study, trial.number)
        if state in (None, optuna.trial.TrialState.RUNNING):
            return None
        attempt = getattr(self.runner, "attempt", None)
        what = f"trial {trial.number}" if attempt is None else f"configuration {attempt} (trial {trial.number})"
        return Fenced(what, f"the trial is {state.name}")

    @contextlib.contextmanager
    def quiet_when_fenced(self) -> Iterator[None]:
        """Optuna logs a trial's failure with its traceback; a fenced trial's is said in one line (on_fenced)."""

        def keep(record: logging.LogRecord) -> bool:
            return self.fenced is None

        logger = logging.getLogger("optuna.study._optimize")
        logger.addFilter(keep)
        try:
            yield
        finally:
            logger.removeFilter(keep)


def storage_error(exc: BaseException) -> BaseException:
    """Optuna's failure to write its study (disk full, database locked) as the one-line StoreError it is; any
    other exception unchanged. When Optuna cannot record a failed trial it raises an AssertionError of its own
    ("Should not reach") while handling the storage error: that error is the one to report."""
    if isinstance(exc, AssertionError) and exc.__context__ is not None:
        exc = exc.__context__
    if not isinstance(exc, optuna.exceptions.StorageInternalError | SQLAlchemyError):
        return exc
    what = "cannot write the Optuna study"
    return database_error(exc, what) or DatabaseError(f"{what}: {first_line(exc)}", "optuna")


def storage_error_behind(exc: BaseException) -> BaseException | None:
    """The storage error Optuna hid: when a trial's tell fails and reading the trial back fails too (a locked or lost
    database), Optuna's _run_trial raises UnboundLocalError from its finally block, the storage error only in its
    context. That error (its database driver's, where Optuna wrapped one), or None when `exc` is not that."""
    if not isinstance(exc, UnboundLocalError):
        return None
    seen = exc.__context__
    while seen is not None:
        if isinstance(seen, optuna.exceptions.StorageInternalError):
            return seen.__cause__ or seen
        seen = seen.__context__
    return None
