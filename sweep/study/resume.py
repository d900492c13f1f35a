"""Resuming a study: open it again (after cleaning what dead workers left), and never measure a ladder twice."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sweep.analysis.ladder_steps import ladder_phase, steps_knee
from sweep.core.errors import UsageError
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import Profile
from sweep.store import Store
from sweep.study.recovery import clean_after_dead


def open_study(store: Store, profile: Profile, study_name: str | None, resume: bool, simulated: bool,
               driver_name: str, say: Callable[[str], None]) -> tuple[int, str]:
    """The study's id and name: created, or (resume) found and cleaned of what dead workers left."""
    if study_name is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        study_name = f"{profile.name}-{stamp}" + ("-sim" if simulated else "")
    existing = store.get_study_by_name(study_name)
    if existing is not None:
        if not resume:
            raise UsageError(f"study {study_name} exists; pass --resume to continue it")
        if existing.fingerprint != profile.fingerprint():
            raise UsageError(f"study {study_name} was run with another workload fingerprint "
                             f"({existing.fingerprint} vs {profile.fingerprint()})")
        # Only what dead workers left: another live worker of this study keeps its server and its rows.
        clean_after_dead(store, existing.id, say)
        store.reopen_study(existing.id)
        return existing.id, study_name
    study_id = store.create_study(
        study_name, profile.name, profile.model_dump_json(), profile.fingerprint(),
        profile.search.sampler, simulated, driver_name, study_name)
    return study_id, study_name


def reuse_outcome(store: Store, profile: Profile, study_id: int, config: ServerConfig,
                  phase: str = "final") -> LadderOutcome | None:
    """A configuration whose ladder (of this phase) completed before a kill is not measured twice."""
    for row in reversed(store.server_configs(study_id)):
        if row.config_key != config.key() or row.status not in ("completed", "infeasible"):
            continue
        steps = [r.step() for r in store.completed_runs(study_id, row.id) if r.stats is not None]
        if steps and any(ladder_phase(s.phase) != phase for s in steps):  # refinement windows are final steps
            continue  # the other fidelity: a screen never stands in for a final, nor the reverse
        knee = steps_knee(steps, profile.search.flatten_threshold)
        return LadderOutcome(config, row.id, row.status, steps, knee, row.stop_reason or "")
    return None


def soak_done(store: Store, study_id: int) -> bool:
    """Whether a completed soak run exists for this study (a resume does not soak twice)."""
    return any(r.phase == "soak" and r.status == "completed" for r in store.study_runs(study_id))
