"""Everything a report needs about one study, read back from the store alone: knees, winner, view, history."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import ladder_knee
from sweep.analysis.winner import pick_winner, rank_by_hardware
from sweep.core.errors import SweepError
from sweep.core.types import ServerConfig
from sweep.profile import Profile, Search, Soak
from sweep.store import Store
from sweep.views.steps import config_missing
from sweep.views.study import StudyContext, TrialPoint, build_view

if TYPE_CHECKING:
    from sweep.analysis.soak import SoakVerdict


@dataclass(frozen=True)
class ConfigFailure:
    """One configuration that yielded no ladder: its label, failure class (oom, timeout, bad_flag, crash, hung,
    errors, ...) and the stored reason."""

    label: str
    failure_class: str
    reason: str


def config_failures(store: Store, study_id: int) -> tuple[list[ConfigFailure], bool]:
    """(failed or infeasible-at-launch configurations of a study, whether any configuration measured a step)."""
    configs = [c for c in store.server_configs(study_id) if c["status"] != "aborted"]
    done = {r["server_config_id"] for r in store.study_runs(study_id) if r["status"] == "completed"}
    out = []
    for c in configs:
        reason = c.get("failure_reason")
        if c["status"] not in ("failed", "infeasible") or not reason:
            continue
        label = ServerConfig.from_mapping(c).label()
        cls = reason.split(":", 1)[0] if ":" in reason.split(" ", 1)[0] else "failed"
        out.append(ConfigFailure(label, cls, reason))
    return out, any(c["id"] in done for c in configs)


def study_context(store: Store, study_id: int, rank_mixed_hardware: bool = False) -> StudyContext:
    """Everything a report needs about one study, from the store alone.

    A study measured on several GPU models has no single winner (each hardware group has its own) unless
    `rank_mixed_hardware` says to rank across them anyway.
    """
    study = store.get_study(study_id)
    if study is None:
        raise SweepError(f"no study {study_id}")
    configs = store.server_configs(study_id)
    runs = store.study_runs(study_id)
    prof = stored_profile(study["profile_json"])
    search = prof.search if prof is not None else Search()
    knees: dict[int, ConfigKnee] = {}
    for c in configs:
        if c["status"] == "aborted":
            continue  # an interrupted attempt: its steps stay stored but never count (the config was redone)
        steps = [r for r in runs if r["server_config_id"] == c["id"] and r["status"] == "completed"
                 and r.get("phase") != "soak"]
        if not steps:
            continue
        knee = ladder_knee(steps, search.flatten_threshold)
        if knee is not None:  # with the refined SLA boundary its configuration row stores (None: not refined)
            knees[c["id"]] = replace(knee, boundary=c.get("boundary_concurrency"),
                                     boundary_ci_low=c.get("boundary_ci_low"),
                                     boundary_ci_high=c.get("boundary_ci_high"), boundary_shape=c.get("boundary_shape"))
    # A candidate ran its ladder to the end (a failed one never wins) and meets the report contract itself.
    status = {c["id"]: c["status"] for c in configs}

    def eligible(i: int) -> bool:
        return status[i] == "completed" and not config_missing([r for r in runs if r["server_config_id"] == i])

    winner, pool = pick_winner(configs, knees, eligible)
    hardware = rank_by_hardware(configs, knees, rank_mixed_hardware, eligible)
    if hardware.reason is not None:
        winner = None  # knees on different GPU models are not comparable: see hardware.winners
    return StudyContext(
        study=study, configs=configs, runs=runs, env=store.environment(study_id) or {},
        profile_raw=json.loads(study["profile_json"]),  # as stored: the report shows another version's study too
        profile=prof, labels={c["id"]: ServerConfig.from_mapping(c).label() for c in configs}, knees=knees,
        winner=winner, hardware=hardware, trials=optuna_history(study, store.url),
        soak_verdicts=soak_verdicts(store, runs, prof.soak if prof is not None else Soak()),
        reference_runs=store.reference_runs(study_id), histograms=store.window_histograms(study_id),
        view=build_view(store.requests_for_run, configs, runs, knees, winner, pool, coupled=search.mode == "coupled"),
        request_tokens=store.study_request_tokens(study_id))


def stored_profile(profile_json: str) -> Profile | None:
    """A study's stored profile (sweep_studies.profile_json) re-validated; None when this version of sweep no
    longer accepts it (a study made by another version: the report then shows its stored fields as they are)."""
    try:
        return Profile.model_validate_json(profile_json)
    except ValidationError:
        return None


def soak_verdicts(store: Store, runs: list[dict[str, Any]], soak: Soak) -> dict[int, SoakVerdict]:
    """Each completed soak run's verdict, recomputed from its stored samples (the verdict is pure)."""
    from sweep.analysis.soak import judge

    return {r["id"]: judge(store.samples_for_run(r["id"]), soak, r.get("sla_failures")) for r in runs
            if r.get("phase") == "soak" and r["status"] == "completed"}


def optuna_history(study: dict[str, Any], url: str) -> list[TrialPoint]:
    """(number, state, value, feasible) of the study's Optuna trials, for the history plot; [] without one."""
    import optuna

    name = study.get("optuna_study_name")
    if not name:
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        st = optuna.load_study(study_name=name, storage=url)
    except Exception:  # noqa: BLE001 - no Optuna study under that name (e.g. a report of a foreign DB)
        return []
    return [TrialPoint(t.number, t.state.name, t.value, bool(t.user_attrs.get("feasible")),
                       str(t.user_attrs.get("phase", "final"))) for t in st.get_trials(deepcopy=False)]
