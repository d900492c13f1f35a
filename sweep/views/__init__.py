"""Read models of a study built from the store alone, for every reader (report, live page, `sweep show`, the
terminal): its context (configurations, knees, winner, ties, hardware groups, failures), the live state, the
plan, the workers.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.views.context": ("answer_context", "config_failures", "study_context"),
    "sweep.views.live": ("read_state", "study_eta"),
    "sweep.views.plan": ("study_plan",),
    "sweep.views.read_model": ("ConfigFailure", "StudyReadModel", "WinnerDecision", "read_study"),
    "sweep.views.steps": ("measured_steps",),
    "sweep.views.history": ("History", "HistoryPoint", "study_history"),
    "sweep.views.study": ("StudyContext", "StudyView", "modality_stats", "tied_with"),
    "sweep.views.workers": ("activity", "with_worker_labels", "worker_labels"),
})
