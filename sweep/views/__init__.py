"""Read models of a study built from the store alone, for every reader (report, live page, `sweep show`, the
terminal): its context (configurations, knees, winner, ties, hardware groups, failures), the live state, the
plan, the workers.

Import each name from the module that defines it (this package lends none):
- `context`: `answer_context`, `config_failures`, `study_context`
- `history`: `History`, `HistoryPoint`, `study_history`
- `live`: `read_state`, `study_eta`
- `plan`: `study_plan`
- `read_model`: `ConfigFailure`, `StudyReadModel`, `WinnerDecision`, `read_study`
- `steps`: `measured_steps`
- `study`: `StudyContext`, `StudyView`, `modality_stats`, `tied_with`
- `workers`: `activity`, `with_worker_labels`, `worker_labels`
"""
