"""The report's typed view of one study, as frozen dataclasses: `StudyContext` (what `study_context` reads back
from the store) and `StudyView`, the facts derived from it:

- Per-modality latency of the winner's steps, from the stored requests (a request counts as in
  `measure`: not warm-up, sent inside the window; latencies from successful requests only).
- Which knees sit at the top of their ladder (no step above them measured): not bracketed.
- Which configurations tie with the winner: P(winner's knee goodput higher) < 0.9 (sweep.analysis.significance).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import ladder_phase
from sweep.analysis.measure import percentile
from sweep.analysis.sessions import SessionStats
from sweep.analysis.significance import ties
from sweep.analysis.winner import HardwareRanking, Winner
from sweep.core.types import CUT, JSON
from sweep.profile import Profile
from sweep.profile.trace import Burstiness
from sweep.store import (
    ConfigRecord,
    EnvironmentRecord,
    PriorRecord,
    RequestTokens,
    RunRecord,
    StoredRequestRow,
    StudyRecord,
)

if TYPE_CHECKING:
    from sweep.analysis.soak import SoakVerdict
    from sweep.views.read_model import ConfigFailure, WinnerDecision

BRACKETING_STATUSES = ("completed", "failed")  # a failed step above the knee still bounds it
MODALITY_ORDER = {"text": 0, "image": 1, "video": 2, "audio": 3}


@dataclass(frozen=True)
class ModalityStats:
    """Latency of one modality's requests in one measured window (ms; None without data)."""

    modality: str
    count: int  # measured requests that completed
    errors: int  # failed requests (a cut one, still running when the drain ended, is no error)
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None


@dataclass(frozen=True)
class StudyView:
    """Facts the report derives from the store beyond the raw rows."""

    modalities: Mapping[int, tuple[ModalityStats, ...]] = field(default_factory=dict)  # run id -> per modality
    knee_at_top: frozenset[int] = frozenset()  # config ids whose knee is their highest measured step
    ties: tuple[int, ...] = ()  # config ids whose knee goodput interval overlaps the winner's

    def mixed(self) -> bool:
        """Whether any run's requests span more than one modality."""
        return any(len(rows) > 1 for rows in self.modalities.values())


def modality_stats(requests: Sequence[StoredRequestRow], window_s: float | None) -> tuple[ModalityStats, ...]:
    """Per modality (text, image, video, audio), the window's requests' TTFT, TPOT and E2E P50/P99 and counts.

    `requests` are stored requests rows (scheduled_at in seconds from the window start).
    """
    measured = [r for r in requests if not r.warmup and window_s is not None and 0 <= r.scheduled_at < window_s]
    out = []
    for modality in sorted({r.modality for r in measured}, key=lambda m: (MODALITY_ORDER.get(m, 99), m)):
        rows = [r for r in measured if r.modality == modality]
        ok = [r for r in rows if r.error is None and r.e2e_ms is not None]

        def pct(col: str, q: float, ok: list[StoredRequestRow] = ok) -> float | None:
            return percentile([v for r in ok if (v := r.latency(col)) is not None], q)

        out.append(ModalityStats(modality, len(ok), sum(1 for r in rows if r.error is not None and r.error_kind != CUT),
                                 pct("ttft_ms", 50), pct("ttft_ms", 99), pct("tpot_ms", 50), pct("tpot_ms", 99),
                                 pct("e2e_ms", 50), pct("e2e_ms", 99)))
    return tuple(out)


def knees_at_top(knees: Mapping[int, ConfigKnee], runs: Sequence[RunRecord],
                 ladder_of: Mapping[int, Hashable] | None = None) -> frozenset[int]:
    """Configurations whose knee has no completed or failed step of the same phase and ladder above it.

    `ladder_of` maps a config id to its ladder (default: its own id); a coupled ladder spans the configs that
    differ only in max_running_requests, one per step.
    """
    group = ladder_of or {}
    top = set()
    for cid, knee in knees.items():
        mine = group.get(cid, cid)
        above = [r for r in runs if group.get(r.server_config_id, r.server_config_id) == mine
                 and r.concurrency > knee.concurrency and ladder_phase(r.phase) == knee.phase
                 and r.status in BRACKETING_STATUSES]
        if not above:
            top.add(cid)
    return frozenset(top)


def coupled_ladders(configs: Sequence[ConfigRecord]) -> dict[int, Hashable]:
    """Config id -> its coupled ladder: the knobs other than max_running_requests."""
    return {c.id: tuple(v for k, v in c.config.columns().items() if k != "max_running_requests") for c in configs}


def tied_with(winner_id: int | None, pool: Mapping[int, ConfigKnee]) -> tuple[int, ...]:
    """Configurations of the winner's pool the data do not rank below it: the bootstrap probability that the
    winner's knee goodput is higher is below 0.9 (sweep.analysis.significance). SGLang's defaults are ranked like
    any other configuration: a winner the data do not rank above the defaults ties with them (issue 28 §2); a winner
    without an interval ties with nothing."""
    if winner_id is None or winner_id not in pool:
        return ()
    w = pool[winner_id]
    if w.ci_low is None or w.ci_high is None:
        return ()
    return ties(winner_id, pool)


def build_view(requests_for_run: Callable[[int], Sequence[StoredRequestRow]], configs: Sequence[ConfigRecord],
               runs: Sequence[RunRecord],
               knees: Mapping[int, ConfigKnee], winner: Winner | None,
               pool: Mapping[int, ConfigKnee], coupled: bool = False) -> StudyView:
    """The view of a study; `requests_for_run(run_id)` reads a run's stored requests."""
    modalities: dict[int, tuple[ModalityStats, ...]] = {}
    if winner is not None:
        for r in runs:
            if r.server_config_id == winner.id and r.status == "completed":
                modalities[r.id] = modality_stats(requests_for_run(r.id), r.stats.window_s if r.stats else None)
    ladders = coupled_ladders(configs) if coupled else None
    return StudyView(modalities, knees_at_top(knees, runs, ladders), tied_with(winner.id if winner else None, pool))


@dataclass(frozen=True)
class StudyContext:
    """Everything a report needs about one study, read back from the store (its records, sweep/store/records.py)."""

    study: StudyRecord = field(default_factory=lambda: StudyRecord(0, ""))
    configs: list[ConfigRecord] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)  # reference-client rows left out
    env: EnvironmentRecord = field(default_factory=EnvironmentRecord)  # the environment row (empty: none recorded)
    profile_raw: dict[str, JSON] = field(default_factory=dict)  # the stored profile JSON as it was written
    profile: Profile | None = None  # the stored profile re-validated; None: another version's (see profile_raw)
    labels: dict[int, str] = field(default_factory=dict)  # config id -> ServerConfig.label()
    knees: dict[int, ConfigKnee] = field(default_factory=dict)  # config id -> its knee (feasible ladders only)
    winner: Winner | None = None  # None: nothing passed, or knees on several GPU models (see hardware)
    hardware: HardwareRanking | None = None
    decision: WinnerDecision | None = None  # the read model's winner decision (winner and hardware come from it)
    soak_verdicts: dict[int, SoakVerdict] = field(default_factory=dict)  # soak run id -> its verdict
    reference_runs: list[RunRecord] = field(default_factory=list)
    histograms: dict[int, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)  # run id -> metric
    view: StudyView = field(default_factory=StudyView)
    request_tokens: list[RequestTokens] = field(default_factory=list)  # Store.study_request_tokens
    failures: list[ConfigFailure] = field(default_factory=list)  # configurations that failed or never started
    measured: bool = False  # whether any configuration got a completed measured step
    sessions: dict[int, SessionStats] = field(default_factory=dict)  # run id -> its sessions (workload.sessions)
    prior: list[PriorRecord] = field(default_factory=list)  # the simulated prior's ranking (search.prior: sim)
    send_bursts: dict[int, Burstiness] = field(default_factory=dict)  # run id -> its sends' burstiness (a trace)

    def raw(self, section: str) -> dict[str, JSON]:
        """One section of the stored profile JSON as written ({} when absent or not an object)."""
        value = self.profile_raw.get(section)
        return value if isinstance(value, dict) else {}
