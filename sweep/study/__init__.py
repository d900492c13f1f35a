"""The search over configurations: the orchestrator, the Optuna search and its sampler, the simulated prior, resume
and recovery after dead workers, liveness, resources, the dashboard and `doctor`. One configuration's ladder on
one server (steps, climbing on, refinement, the soak, the cross-check step, launch bookkeeping, the recorder,
wiring) is the floor below: sweep/ladder/.

Import each name from the module that defines it (this package lends none):
- `doctor`: `doctor_ok`, `profile_flags`, `render`, `run_doctor`, `workers_check`
- `liveness`: `optuna_storage`, `sweep_version`
- `orchestrator`: `KneeRun`, `Orchestrator`
- `prior`: the simulator as a prior and a screen
- `sampler`: `make_sampler`, `suggest`
- `search`: `CONSTRAINT_ATTR`, `FAILURE_ATTR`, `FEASIBLE_ATTR`, `ORCHESTRATOR_FAILURE`, `REQUEUED_ATTR`, `Search`,
  `StudyResult`, `promoted`
- `tiebreak`: the same winner, ties measured again (`Measured`, `study_knees`, `tied_with_leader`, `recut`)
- `trial_guard`: `CONFIGURATION_FAILURE`, `TrialGuard`, `storage_error`
"""
