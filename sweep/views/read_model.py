"""One read model of a study, built once from the store: its rows, the knee of every configuration, the
configurations that failed, and the one winner decision that the report, the live page and the terminal's final
answer all show.

The winner rule (decide_winner) lives here and nowhere else:
- a candidate ran its ladder to the end (status completed: a failed configuration never wins, however high its
  best step) and its own measured steps fill the report contract's per-step fields;
- among candidates, the highest knee goodput of the final ladders (screens when no final ran);
- knees measured on different GPU models are not comparable: such a study names no single winner (each hardware
  group has its own) unless the caller asks to rank across them anyway;
- a winner is named only when the report contract is met (README.md, first paragraph).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep, ladder_knee, ladder_phase
from sweep.analysis.winner import HardwareRanking, Winner, pick_winner, rank_by_hardware
from sweep.core.errors import PREDICTED_INFEASIBLE, NotFound
from sweep.core.types import JSON
from sweep.profile import Profile, Search
from sweep.store import ConfigRecord, EnvironmentRecord, RunRecord, Store, StudyRecord, WinnerRecord
from sweep.store.records import labels_of
from sweep.views.contract import ContractInput, missing_fields
from sweep.views.steps import config_missing


@dataclass(frozen=True)
class ConfigFailure:
    """One configuration that yielded no ladder: its label, failure class (oom, timeout, bad_flag, crash, hung,
    errors, ...) and the stored reason."""

    label: str
    failure_class: str
    reason: str


@dataclass(frozen=True)
class WinnerDecision:
    """The study's winner under the one rule, and why there is none when there is none."""

    winner: Winner | None  # the ranked winner: eligible, on one GPU model (or ranked anyway)
    pool: dict[int, ConfigKnee]  # the eligible knees it was chosen from (ties are judged within it)
    hardware: HardwareRanking
    missing: tuple[str, ...] = ()  # report-contract fields the data cannot fill
    knees: int = 0  # how many configurations have a knee at all
    what_happened: str = ""  # when no configuration is eligible: what the configurations did instead (one line)

    @property
    def named(self) -> Winner | None:
        """The winner a report, page or terminal may name: the ranked one, when the contract is met."""
        return self.winner if not self.missing else None

    def why_none(self) -> str:
        """One line: why no winner is named ('' when one is)."""
        if self.named is not None:
            return ""
        if self.hardware.reason is not None:
            return f"no single winner: {self.hardware.reason}"
        if self.winner is not None:
            return f"report contract not met, no conclusion drawn: missing {', '.join(self.missing)}"
        return self.what_happened or "no configuration passed the SLA"


def config_steps(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord]) -> dict[int, list[LadderStep]]:
    """Config id -> its completed, non-soak steps by concurrency (an aborted attempt's steps never count: the
    configuration was measured again); the steps every knee of a study (each tier's too) is found from. A
    configuration's final windows on a later launch (a tie-break re-measure, search.tie_break) are its first final
    launch's (`remeasured`): one configuration, one knee."""
    out = launch_steps(configs, runs)
    onto = remeasured(configs, out)
    for later, first in onto.items():
        out[first] += out.pop(later)
    return {cid: sorted(steps, key=lambda s: s.concurrency) for cid, steps in out.items()}


def launch_steps(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord]) -> dict[int, list[LadderStep]]:
    """Launch (server_configs) id -> its completed, non-soak steps, in stored order (an aborted attempt's never)."""
    live = {c.id for c in configs if c.status != "aborted"}
    out: dict[int, list[LadderStep]] = {}
    for r in runs:
        if r.server_config_id in live and r.status == "completed" and r.phase != "soak" and r.stats is not None:
            out.setdefault(r.server_config_id, []).append(r.step())
    return out


def remeasured(configs: Sequence[ConfigRecord], steps_of: Mapping[int, Sequence[LadderStep]]) -> dict[int, int]:
    """Later launch id -> the first launch id of the same configuration (knobs) whose final windows it measured
    again (a tie-break re-measure); launches without final windows (screens) are never joined."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for c in sorted(configs, key=lambda c: c.id):
        steps = steps_of.get(c.id)
        if not steps or ladder_phase(steps[0].phase) != "final":
            continue
        key = c.config.key()
        if key in first:
            out[c.id] = first[key]
        else:
            first[key] = c.id
    return out


def config_knees(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord],
                 flatten_threshold: float) -> dict[int, ConfigKnee]:
    """Each configuration's knee from its steps (`config_steps`), with the SLA boundary its row stores."""
    knees: dict[int, ConfigKnee] = {}
    steps_of = config_steps(configs, runs)
    for c in configs:
        steps = steps_of.get(c.id, [])
        knee = ladder_knee(steps, flatten_threshold) if steps else None
        if knee is not None:  # with the refined SLA boundary its configuration row stores (None: not refined)
            knees[c.id] = replace(knee, boundary=c.boundary_concurrency, boundary_ci_low=c.boundary_ci_low,
                                  boundary_ci_high=c.boundary_ci_high, boundary_shape=c.boundary_shape)
    return knees


def decide_winner(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord], knees: Mapping[int, ConfigKnee],
                  env: EnvironmentRecord, profile_raw: Mapping[str, JSON],
                  rank_mixed_hardware: bool = False) -> WinnerDecision:
    """The one winner rule (see the module's docstring)."""
    status = {c.id: c.status for c in configs}

    def eligible(i: int) -> bool:
        return status.get(i) == "completed" and not config_missing([r for r in runs if r.server_config_id == i])

    winner, pool = pick_winner(configs, knees, eligible)
    hardware = rank_by_hardware(configs, knees, rank_mixed_hardware, eligible)
    if hardware.reason is not None:
        winner = None  # knees on different GPU models are not comparable: see hardware.winners
    missing = missing_fields(ContractInput(env, profile_raw, runs, winner.id if winner else None))
    return WinnerDecision(winner, pool, hardware, tuple(missing), len(knees),
                          "" if winner is not None else what_happened(configs, runs, knees))


# per-step contract fields that come from the server's /metrics, not from the client's own timings
_FROM_METRICS = ("cache hit rate", "preemption count", "peak GPU memory")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _failure_class(reason: str | None) -> str:
    """A stored failure reason's class (`oom: ...` -> oom; `predicted infeasible: ...`), else "failed"."""
    if (reason or "").startswith(PREDICTED_INFEASIBLE):
        return PREDICTED_INFEASIBLE
    head = (reason or "").split(" ", 1)[0]
    return head.split(":", 1)[0] if ":" in head else "failed"


def what_happened(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord],
                  knees: Mapping[int, ConfigKnee]) -> str:
    """Why no configuration can be named, as one line from the rows: configurations whose steps passed the SLA
    but cannot be named (a ladder not finished, contract fields missing, and which), or no step within the SLA,
    or no window measured at all; then the configurations that crashed or failed, by failure class."""
    live = [c for c in configs if c.status != "aborted"]
    status = {c.id: c.status for c in live}
    measured = [r for r in runs if r.measured and r.server_config_id in status]
    passing = [cid for cid in knees if cid in status]
    if passing:
        unfinished = [cid for cid in passing if status[cid] != "completed"]
        lacking = sorted({f for cid in passing if status[cid] == "completed"
                          for f in config_missing([r for r in runs if r.server_config_id == cid])})
        why = []
        if lacking:
            metrics = [f for f in lacking if f in _FROM_METRICS]
            why.append("their steps lack " + ", ".join(lacking) + (
                " (read from the server's /metrics: it did not answer, or not in time)" if metrics else ""))
        if unfinished:
            why.append(f"{_count(len(unfinished), 'configuration')} did not finish its ladder")
        head = (f"{_count(len(passing), 'configuration')} passed the SLA at some step but none can be named: "
                + "; ".join(why or ["none completed its ladder"]))
    elif measured:
        head = (f"no configuration passed the SLA at any step ({_count(len(measured), 'window')} measured, "
                "none within it)")
    else:
        head = "no configuration measured a window"
    broken = []
    for what in ("failed", "infeasible"):
        rows = [c for c in live if c.status == what]
        if rows:
            classes = Counter(_failure_class(c.failure_reason) for c in rows)
            kinds = ", ".join(f"{n} {k}" for k, n in classes.most_common())
            broken.append(f"{len(rows)} {'failed' if what == 'failed' else 'infeasible at launch'} ({kinds})")
    if not broken:
        return head
    return head + ("; " if passing else ": ") + ", ".join(broken)


def config_failures_of(configs: Sequence[ConfigRecord],
                       runs: Sequence[RunRecord]) -> tuple[list[ConfigFailure], bool]:
    """(failed or infeasible-at-launch configurations, whether any configuration measured a step)."""
    live = [c for c in configs if c.status != "aborted"]
    done = {r.server_config_id for r in runs if r.status == "completed"}
    out = []
    for c in live:
        reason = c.failure_reason
        if c.status not in ("failed", "infeasible") or not reason:
            continue
        out.append(ConfigFailure(c.label(), _failure_class(reason), reason))
    return out, any(c.id in done for c in live)


def stored_profile(profile_json: str) -> Profile | None:
    """A study's stored profile (sweep_studies.profile_json) re-validated; None when this version of sweep no
    longer accepts it (a study made by another version: the report then shows its stored fields as they are)."""
    try:
        return Profile.model_validate_json(profile_json)
    except ValidationError:
        return None


def with_stored_winner(decision: WinnerDecision, stored: Sequence[WinnerRecord], configs: Sequence[ConfigRecord],
                       knees: Mapping[int, ConfigKnee]) -> WinnerDecision:
    """The decision naming the study's stored winner (study_winners' primary row, written when the study ended)
    where one is stored: the report, the live page and the terminal read the one fact `sweep show` reads, even
    where the rule, run again on the same rows by another version of sweep, would pick another configuration. A
    study still running (no row), or a stored configuration with no knee in these rows, keeps the rule's decision."""
    row = next((w for w in stored if w.is_primary), None)
    if row is None or row.server_config_id is None or decision.winner is None:
        return decision
    cid = row.server_config_id
    if cid == decision.winner.id or cid not in knees:
        return decision
    config = next((c for c in configs if c.id == cid), None)
    if config is None:
        return decision
    knee = knees[cid]
    pool = {**decision.pool, cid: knee}
    return replace(decision, winner=Winner(cid, config.config, knee, knee.phase == "screen"), pool=pool)


@dataclass(frozen=True)
class StudyReadModel:
    """One study as read back from the store: rows, knees, failures and the winner decision."""

    study: StudyRecord
    configs: list[ConfigRecord]  # aborted attempts included
    runs: list[RunRecord]  # reference-client rows left out
    env: EnvironmentRecord  # the environment row (empty when none was recorded)
    profile_raw: dict[str, JSON]  # the stored profile JSON as it was written
    profile: Profile | None  # re-validated; None: another version's (see profile_raw)
    labels: dict[int, str]  # config id -> ServerConfig.label()
    knees: dict[int, ConfigKnee]
    decision: WinnerDecision
    failures: list[ConfigFailure] = field(default_factory=list)
    measured: bool = False  # whether any configuration got a completed measured step

    @property
    def winner(self) -> Winner | None:
        """The ranked winner (see WinnerDecision.named for the one a report may name)."""
        return self.decision.winner


def read_study(store: Store, study_id: int, rank_mixed_hardware: bool = False) -> StudyReadModel:
    """The read model of one study, from the store alone."""
    study = store.get_study(study_id)
    if study is None:
        raise NotFound(f"no study {study_id}")
    configs = store.server_configs(study_id)
    runs = store.study_runs(study_id)
    env = store.environment(study_id) or EnvironmentRecord()
    profile_raw = json.loads(study.profile_json)  # as stored: the report shows another version's study too
    prof = stored_profile(study.profile_json)
    search = prof.search if prof is not None else Search()
    knees = config_knees(configs, runs, search.flatten_threshold)
    decision = decide_winner(configs, runs, knees, env, profile_raw, rank_mixed_hardware)
    if not rank_mixed_hardware:  # the stored fact, where the study has ended; --rank-mixed-hardware asks anew
        decision = with_stored_winner(decision, store.study_winners(study_id), configs, knees)
    failures, measured = config_failures_of(configs, runs)
    return StudyReadModel(study, configs, runs, env, profile_raw, prof,
                          labels_of(configs), knees, decision,
                          failures, measured)
