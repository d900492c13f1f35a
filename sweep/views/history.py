"""A workload's history (`sweep history`): each study of one workload fingerprint, oldest first, with its stored
winner (study_winners' primary row), its knee and where it ran (SGLang version, GPU, host: the environments
table), and whether its knee goodput fell below the previous study's beyond both intervals (a regression)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from sweep.core.errors import NotFound, UsageError
from sweep.store import EnvironmentRecord, Store, StudyRecord
from sweep.views.fixed_flags import differences, of_profile_json

HISTORY_SCHEMA_VERSION = 1  # of the `history` JSON document (docs/json-schema/history.json)


@dataclass(frozen=True)
class HistoryPoint:
    """One study of the workload: when, where, and its stored winner (config None: none named, `why` says why).
    Goodput and its interval are output tokens/s inside the SLA."""

    study: str
    status: str
    created_at: datetime | None
    simulated: bool
    sglang_version: str | None
    gpu_name: str | None
    host: str | None
    winner: str | None = None
    config_id: int | None = None
    phase: str | None = None
    concurrency: int | None = None
    goodput_tps: float | None = None
    goodput_ci_low: float | None = None
    goodput_ci_high: float | None = None
    why: str | None = None
    change_pct: float | None = None  # knee goodput against the previous study with a winner
    regression: bool = False  # below the previous winner's interval, and its own interval below that goodput

    def where(self) -> str:
        """SGLang version, GPU and host in one phrase."""
        return ", ".join(p for p in (f"SGLang {self.sglang_version}" if self.sglang_version else "",
                                     self.gpu_name or "", self.host or "") if p) or "unrecorded"


@dataclass(frozen=True)
class History:
    """The studies of one workload fingerprint, oldest first, and what was left out."""

    fingerprint: str
    profile: str | None
    points: tuple[HistoryPoint, ...]
    other_fingerprints: tuple[str, ...] = ()  # the profile's studies of another workload (not comparable)


def _point(store: Store, study: StudyRecord) -> HistoryPoint:
    env = store.environment(study.id) or EnvironmentRecord()
    base = HistoryPoint(study.name, study.status, study.created_at, study.simulated, env.sglang_version,
                        env.gpu_name, env.host)
    row = next((w for w in store.study_winners(study.id) if w.is_primary), None)
    if row is None:
        return HistoryPoint(**{**base.__dict__, "why": "no winner stored (the study has not ended)"})
    return HistoryPoint(**{**base.__dict__, "winner": row.label, "config_id": row.server_config_id, "phase": row.phase,
                           "concurrency": row.concurrency, "goodput_tps": row.goodput_tps,
                           "goodput_ci_low": row.goodput_ci_low, "goodput_ci_high": row.goodput_ci_high,
                           "why": row.why})


def _regressed(now: HistoryPoint, before: HistoryPoint) -> bool:
    """Whether `now`'s knee goodput is below `before`'s beyond both intervals (each goodput outside the other's)."""
    if now.goodput_tps is None or before.goodput_tps is None:
        return False
    low_before = before.goodput_ci_low if before.goodput_ci_low is not None else before.goodput_tps
    high_now = now.goodput_ci_high if now.goodput_ci_high is not None else now.goodput_tps
    return now.goodput_tps < low_before and high_now < before.goodput_tps


def with_changes(points: list[HistoryPoint]) -> list[HistoryPoint]:
    """Each point's change against the previous point with a winner, regressions marked."""
    out, before = [], None
    for p in points:
        if p.goodput_tps is not None and before is not None and before.goodput_tps:
            pct = 100.0 * (p.goodput_tps - before.goodput_tps) / before.goodput_tps
            p = HistoryPoint(**{**p.__dict__, "change_pct": pct, "regression": _regressed(p, before)})
        out.append(p)
        if p.goodput_tps is not None:
            before = p
    return out


def study_history(store: Store, profile: str | None = None, fingerprint: str | None = None,
                  force: bool = False) -> History:
    """The history of one workload: `fingerprint`'s studies, or `profile`'s studies of its newest study's
    fingerprint (the profile's studies of another workload are named in other_fingerprints, not mixed in).
    UsageError when those studies ran with different fixed flags (sweep.views.fixed_flags: their knees measure
    different servers), unless `force`."""
    if profile is None and fingerprint is None:
        raise UsageError("sweep history needs --profile NAME or --fingerprint FINGERPRINT")
    found = store.studies(profile=profile, fingerprint=fingerprint)
    if not found:
        what = " and ".join(x for x in (f"profile {profile}" if profile else "",
                                        f"fingerprint {fingerprint}" if fingerprint else "") if x)
        raise NotFound(f"no study of {what} in {store.shown}")
    fp = fingerprint or found[-1].fingerprint
    others = Counter(s.fingerprint for s in found if s.fingerprint != fp)
    mine = [s for s in found if s.fingerprint == fp]
    first = of_profile_json(mine[0].profile_json)
    for s in mine[1:]:
        differ = differences(first, of_profile_json(s.profile_json))
        if differ and not force:
            raise UsageError(f"studies {mine[0].name} and {s.name} ran with different fixed flags "
                             f"({'; '.join(differ)}): their knees are not comparable; pass --force to list them anyway")
    points = with_changes([_point(store, s) for s in mine])
    return History(fp, profile, tuple(points), tuple(others))
