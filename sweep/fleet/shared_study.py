"""A study made for workers to join: created (or resumed) with Optuna's tables and study ready, and summed up
from the store once its workers are done (they may have run anywhere)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import optuna

from sweep.core.errors import UsageError
from sweep.study.liveness import optuna_storage
from sweep.study.sampler import make_sampler
from sweep.study.search import StudyResult

if TYPE_CHECKING:
    from sweep.study.orchestrator import KneeRun, Orchestrator


def create_study(orch: Orchestrator, study_name: str) -> int:
    """Create the study (results store and Optuna) without measuring: workers join it later."""
    if orch.store.get_study_by_name(study_name) is not None:
        raise UsageError(f"study {study_name} exists")
    return open_shared_study(orch, study_name, resume=False)[0]


def open_shared_study(orch: Orchestrator, study_name: str | None, resume: bool) -> tuple[int, str]:
    """The study created or resumed for workers to join: its row, and Optuna's tables and study."""
    study_id, name = orch.open_study(study_name, resume)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sp = orch.profile.search  # Optuna's tables and study exist before the first worker arrives
    optuna.create_study(study_name=name, storage=optuna_storage(orch.db_url, sp.heartbeat_s, sp.grace_s),
                        direction="maximize", sampler=make_sampler(orch.profile), load_if_exists=True)
    return study_id, name


def summary(orch: Orchestrator, study_id: int, study_name: str) -> KneeRun:
    """What the study's workers found, from the store: its winner and a fresh report."""
    return orch.conclude(study_id, study_name, StudyResult())
