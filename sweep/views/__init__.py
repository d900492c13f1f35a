"""Read models of a study built from the store alone, for every reader (report, live page, `sweep show`, the
terminal): its context (configurations, knees, winner, ties, hardware groups, failures), the live state, the
plan, the workers."""

from sweep.views.context import config_failures, study_context
from sweep.views.live import read_state, study_eta
from sweep.views.plan import study_plan
from sweep.views.read_model import ConfigFailure, StudyReadModel, WinnerDecision, read_study
from sweep.views.steps import measured_steps
from sweep.views.study import StudyContext, StudyView, TrialPoint, modality_stats, tied_with
from sweep.views.workers import activity, with_worker_labels, worker_labels

__all__ = [
    "ConfigFailure", "StudyContext", "StudyReadModel", "StudyView", "WinnerDecision", "read_study", "TrialPoint", "activity", "config_failures",
    "measured_steps", "modality_stats", "read_state", "study_context", "study_eta", "study_plan",
    "tied_with", "with_worker_labels", "worker_labels",
]
