"""Everything a report needs about one study, read back from the store alone: knees, winner, view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sweep.analysis.sessions import SessionStats, session_stats
from sweep.profile import Search, Soak
from sweep.profile.trace import Burstiness, burstiness
from sweep.store import RunRecord, Store
from sweep.views.read_model import ConfigFailure, config_failures_of, read_study, stored_profile
from sweep.views.study import StudyContext, build_view

__all__ = ["ConfigFailure", "answer_context", "config_failures", "session_windows", "soak_verdicts", "stored_profile", "study_context"]

if TYPE_CHECKING:
    from sweep.analysis.soak import SoakVerdict


def config_failures(store: Store, study_id: int) -> tuple[list[ConfigFailure], bool]:
    """(failed or infeasible-at-launch configurations of a study, whether any configuration measured a step)."""
    return config_failures_of(store.server_configs(study_id), store.study_runs(study_id))


def study_context(store: Store, study_id: int, rank_mixed_hardware: bool = False) -> StudyContext:
    """Everything a report needs about one study, from the store alone: the read model (read_study, whose winner
    decision the live page and the terminal show too) and what only the report reads (soak verdicts,
    reference rows, histograms, per-modality view).

    A study measured on several GPU models has no single winner (each hardware group has its own) unless
    `rank_mixed_hardware` says to rank across them anyway.
    """
    model = read_study(store, study_id, rank_mixed_hardware)
    d, prof = model.decision, model.profile
    search = prof.search if prof is not None else Search()
    return StudyContext(
        study=model.study, configs=model.configs, runs=model.runs, env=model.env, profile_raw=model.profile_raw,
        profile=prof, labels=model.labels, knees=model.knees, winner=d.winner, hardware=d.hardware,
        decision=d,
        soak_verdicts=soak_verdicts(store, model.runs, prof.soak if prof is not None else Soak()),
        reference_runs=store.reference_runs(study_id), histograms=store.window_histograms(study_id),
        view=build_view(store.requests_for_run, model.configs, model.runs, model.knees, d.winner, d.pool,
                        coupled=search.mode == "coupled"),
        request_tokens=store.study_request_tokens(study_id), failures=model.failures, measured=model.measured,
        sessions=session_windows(store, model.runs) if prof is not None and prof.workload.sessions else {},
        prior=store.study_prior(study_id),
        send_bursts=send_bursts(store, model.runs) if model.env.trace is not None else {})


def send_bursts(store: Store, runs: Sequence[RunRecord]) -> dict[int, Burstiness]:
    """Each completed window's sends (its measured requests' scheduled times) as Burstiness, by run id: a trace
    replay's window next to the trace's own (sweep.report.trace)."""
    out: dict[int, Burstiness] = {}
    for r in runs:
        if r.status == "completed":
            times = [q.scheduled_at for q in store.requests_for_run(r.id) if not q.warmup]
            if len(times) > 1:
                out[r.id] = burstiness(times)
    return out


def answer_context(store: Store, study_id: int) -> StudyContext:
    """The read model alone (configurations, windows, knees, the winner decision): what `sweep explain`, `sweep
    compare` and the answer read. No request, sample or histogram is loaded (study_context reads the winner's
    requests for the per-modality view, every request's token counts, the histograms and the soak's samples)."""
    model = read_study(store, study_id)
    d = model.decision
    return StudyContext(
        study=model.study, configs=model.configs, runs=model.runs, env=model.env, profile_raw=model.profile_raw,
        profile=model.profile, labels=model.labels, knees=model.knees, winner=d.winner, hardware=d.hardware,
        decision=d, failures=model.failures, measured=model.measured)


def session_windows(store: Store, runs: Sequence[RunRecord]) -> dict[int, SessionStats]:
    """Each completed window's session figures (sweep.analysis.sessions), by run id."""
    out = {}
    for r in runs:
        if r.status == "completed" and (s := session_stats(store.requests_for_run(r.id))) is not None:
            out[r.id] = s
    return out


def soak_verdicts(store: Store, runs: Sequence[RunRecord], soak: Soak) -> dict[int, SoakVerdict]:
    """Each completed soak run's verdict, recomputed from its stored samples (the verdict is pure)."""
    from sweep.analysis.soak import judge

    return {r.id: judge(store.samples_for_run(r.id), soak, r.stats.sla_failures if r.stats else None) for r in runs
            if r.phase == "soak" and r.status == "completed"}
