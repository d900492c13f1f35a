"""Running a study: the orchestrator, the ladder on one launch, the Optuna search and its sampler, the soak,
the cross-check step, launch bookkeeping, resume and recovery after dead workers, liveness, and `doctor`.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.study.doctor": ("doctor_ok", "profile_flags", "render", "run_doctor", "workers_check"),
    "sweep.study.environment": ("normalise_env",),
    "sweep.study.ladder": ("LadderOutcome", "LadderRunner", "StepStart", "saturated"),
    "sweep.study.liveness": ("optuna_storage", "sweep_version"),
    "sweep.study.orchestrator": ("KneeRun", "Orchestrator"),
    "sweep.study.sampler": ("make_sampler", "suggest"),
    "sweep.study.search": (
        "CONSTRAINT_ATTR", "FAILURE_ATTR", "FEASIBLE_ATTR", "ORCHESTRATOR_FAILURE", "REQUEUED_ATTR",
        "Search", "StudyResult", "promoted",
    ),
    "sweep.study.step_inputs": ("StepInputs",),
    "sweep.study.trial_guard": ("CONFIGURATION_FAILURE", "TrialGuard", "storage_error"),
    "sweep.study.wiring": ("ROOT", "make_driver", "make_launcher", "model_path", "predictor", "server_model"),
})
