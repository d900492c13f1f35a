"""Running a study: the orchestrator, the ladder on one launch, the Optuna search and its sampler, the soak,
the cross-check step, launch bookkeeping, resume and recovery after dead workers, liveness, and `doctor`."""

from sweep.study.doctor import doctor_ok, profile_flags, render, run_doctor, workers_check
from sweep.study.environment import normalise_env
from sweep.study.ladder import LadderOutcome, LadderRunner, StepStart, saturated
from sweep.study.liveness import optuna_storage, sweep_version
from sweep.study.orchestrator import KneeRun, Orchestrator
from sweep.study.sampler import make_sampler, suggest
from sweep.study.search import (
    CONSTRAINT_ATTR,
    FAILURE_ATTR,
    FEASIBLE_ATTR,
    ORCHESTRATOR_FAILURE,
    REQUEUED_ATTR,
    Search,
    StudyResult,
    promoted,
)
from sweep.study.step_inputs import StepInputs
from sweep.study.wiring import ROOT, make_driver, make_launcher, model_path

__all__ = [
    "CONSTRAINT_ATTR", "FAILURE_ATTR", "FEASIBLE_ATTR", "KneeRun", "LadderOutcome", "LadderRunner",
    "ORCHESTRATOR_FAILURE", "Orchestrator", "REQUEUED_ATTR", "ROOT", "Search", "StepInputs", "StepStart",
    "StudyResult", "doctor_ok", "make_driver", "make_launcher", "make_sampler", "model_path",
    "normalise_env", "optuna_storage", "profile_flags", "promoted", "render", "run_doctor", "saturated",
    "suggest", "sweep_version", "workers_check",
]
