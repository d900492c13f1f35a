"""Running a study: the orchestrator, the ladder on one launch, the Optuna search and its sampler, the soak,
the cross-check step, launch bookkeeping, resume and recovery after dead workers, liveness, and `doctor`.

Import each name from the module that defines it (this package lends none):
- `doctor`: `doctor_ok`, `profile_flags`, `render`, `run_doctor`, `workers_check`
- `environment`: `normalise_env`
- `ladder`: `LadderOutcome`, `LadderRunner`, `StepStart`, `saturated`
- `liveness`: `optuna_storage`, `sweep_version`
- `orchestrator`: `KneeRun`, `Orchestrator`
- `sampler`: `make_sampler`, `suggest`
- `search`: `CONSTRAINT_ATTR`, `FAILURE_ATTR`, `FEASIBLE_ATTR`, `ORCHESTRATOR_FAILURE`, `REQUEUED_ATTR`, `Search`,
  `StudyResult`, `promoted`
- `step_inputs`: `StepInputs`
- `trial_guard`: `CONFIGURATION_FAILURE`, `TrialGuard`, `storage_error`
- `wiring`: `ROOT`, `make_driver`, `make_launcher`, `model_path`, `predictor`, `server_model`
"""
