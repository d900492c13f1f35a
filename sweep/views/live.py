"""What the live page shows, read from the store alone: so it works for a finished study, for one running in
another process and for a study several workers share (PostgreSQL).

- configurations: planned = the profile's trial budget (n_trials, else the grid size); done = configurations
  whose ladder completed or proved infeasible (screen and final counted apart); running; failed; queued =
  planned - done - running - failed of the current phase (never below 0); during the finals, screened = the
  configurations the screen measured.
- workers: one row per worker that joined the study (sweep/views/workers.py): its label, host and GPU group,
  whether it runs, what it measures or launches now and how much it finished; a study without worker
  records (stored before workers existed) has one row, "this study". Each window names its worker and host.
- curves: every configuration's completed windows by load (concurrency, or in an open-loop rate ladder the offered
  rate in req/s, never the ladder position its windows are labelled with): goodput, TTFT and TPOT at the SLA's
  percentiles (the SLA bounds travel with them). Every window, the winner's knee and a failed window name their load
  the same way (sweep.analysis.loads).
- failures: configurations that failed (or were found infeasible at launch, out of memory) with their reason,
  and failed windows. A reason names no absolute path (the page may be served to other hosts): a server log under
  the study's output folder reads relative to it (`logs/LABEL/FILE.log`), any other path as `…/NAME`.
- winner: the read model's winner (sweep/views/read_model.py, the rule the report and the terminal use too:
  completed ladders that fill the report contract, one GPU model), with its 95% CI; else why there is none.
- ETA: what is left of every phase (screen, final, soak) on the driver's clock, at the wall seconds a driver
  second has cost so far (study_eta).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from sweep.analysis.binding import binding
from sweep.analysis.knee import ConfigKnee
from sweep.analysis.loads import load_text, load_words
from sweep.analysis.run_stats import STORED_PERCENTILES, LatencyMetric
from sweep.core.errors import SweepError
from sweep.core.types import Placement
from sweep.profile import Profile
from sweep.profile.grid import grid
from sweep.store import RunRecord, Store, WorkerRecord
from sweep.views.plan import planned_configs
from sweep.views.read_model import read_study
from sweep.views.workers import WorkerActivity, activity, worker_labels

DONE = ("completed", "infeasible")
# an absolute path in free text: after the start, a space, a quote, `(`, `[` or `=` (not `</b>`, not a URL's `//`)
_ABS_PATH = re.compile(r"""(?<![^\s"'(\[=])/[^\s|\]()'",;]+""")


def relative_paths(text: str, study: str) -> str:
    """`text` with its absolute paths cut: one under the study's output folder (OUT/STUDY/...) relative to that
    folder, any other to its last name (`…/NAME`)."""
    def cut(m: re.Match[str]) -> str:
        path = m.group(0)
        _, sep, rest = path.partition(f"/{study}/")
        return rest if sep and rest else "…/" + path.rstrip("/").rsplit("/", 1)[-1]

    return _ABS_PATH.sub(cut, text)


@dataclass(frozen=True)
class Window:
    run_id: int
    config: str
    phase: str
    concurrency: int
    worker: str  # the label of the worker that measured it
    host: str | None
    gpu: str | None  # the GPU group of its server
    goodput_tps: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    passes_sla: bool
    load: str = ""  # "16", or "12.50 req/s" in an open-loop rate ladder (concurrency is then only the in-flight cap)


@dataclass(frozen=True)
class Curve:
    config_id: int
    config: str
    phase: str
    concurrency: list[int]
    goodput_tps: list[float | None]
    ttft_ms: list[float | None]
    tpot_ms: list[float | None]
    binding: str = ""  # why its knee is where it is (sweep.analysis.binding), once its ladder is done
    load: list[float] = field(default_factory=list)  # the x values: concurrency, or offered rate in a rate ladder
    unit: str = "concurrency"  # what `load` counts: concurrency, or req/s


@dataclass(frozen=True)
class Failure:
    config: str
    what: str  # "launch" | "window c=16" | ...
    reason: str
    worker: str = ""  # the worker (and host) it failed on


@dataclass(frozen=True)
class LiveWinner:
    """The best knee so far, flat for the page's script: its configuration's label and the knee."""

    config: str
    phase: str
    concurrency: int
    goodput_tps: float
    ci_low: float | None
    ci_high: float | None
    reason: str
    at: str = ""  # the knee's load in words: "concurrency 16", or "12.50 req/s" in a rate ladder

    @classmethod
    def of(cls, label: str, knee: ConfigKnee) -> LiveWinner:
        return cls(label, knee.phase, knee.concurrency, knee.goodput_tps, knee.ci_low, knee.ci_high, knee.reason,
                   load_words(knee.concurrency, knee.offered_rps))


@dataclass(frozen=True)
class LiveState:
    study: str
    status: str
    simulated: bool
    phase: str  # the phase the counts are of: screen or final
    sla: dict[str, float]
    planned: int
    done: int
    running: int
    queued: int
    failed: int
    windows_done: int
    eta_s: float | None
    winner: LiveWinner | None
    workers: list[WorkerActivity] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    screened: int = 0  # during the finals: configurations the screen measured (the counts are the finals')
    no_winner: str = ""  # why no winner is named yet (the read model's one line; "" when one is)

    def as_json(self) -> str:
        return json.dumps(asdict(self), default=str)


def _seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def _goodput(r: RunRecord) -> float | None:
    return None if r.stats is None else r.stats.goodput_tps


def _pct(r: RunRecord, metric: LatencyMetric, q: int) -> float | None:
    """A run's `metric` P`q` (ms), its P99 where the runs table keeps no such percentile."""
    return None if r.stats is None else r.stats.percentile_ms(metric, q if q in STORED_PERCENTILES else 99)


def _load(r: RunRecord) -> float:
    """A window's load: its offered rate in an open-loop rate ladder, else its concurrency (LadderStep.load)."""
    return r.offered_rps if r.offered_rps is not None else float(r.concurrency)


def read_state(store: Store, study_id: int) -> LiveState:
    try:
        model = read_study(store, study_id)
    except SweepError as exc:
        raise LookupError(str(exc)) from None
    study = model.study
    prof = model.profile or Profile.model_validate_json(study.profile_json)  # another version's: its error
    sla = prof.sla
    pt, pp = int(sla.ttft_percentile), int(sla.tpot_percentile)
    configs = [c for c in model.configs if c.status != "aborted"]
    runs = [r for r in model.runs if r.status != "aborted"]
    labels = model.labels
    by_id = {c.id: c for c in configs}
    workers = store.workers(study_id) or [WorkerRecord(None, "this study", "running" if study.status == "running"
                                                       else "done")]
    names = worker_labels(workers)

    windows: list[Window] = []
    per_config: dict[int, list[RunRecord]] = {}
    for r in runs:
        if r.status != "completed" or r.server_config_id not in by_id:
            continue
        where_r = r.placement
        windows.append(Window(r.id, labels[r.server_config_id], r.phase, r.concurrency,
                              names.get(where_r.worker_id or -1, "this study"), where_r.host, where_r.gpu_index,
                              _goodput(r), _pct(r, "ttft", pt), _pct(r, "tpot", pp),
                              bool(r.stats and r.stats.passes_sla),
                              load_text(r.concurrency, r.offered_rps).removeprefix("c=")))
        if r.phase != "soak":
            per_config.setdefault(r.server_config_id, []).append(r)

    curves: list[Curve] = []
    for cid, steps in per_config.items():
        steps.sort(key=lambda r: (_load(r), r.phase))
        why = ""
        if by_id[cid].status in DONE or study.status != "running":
            knee = model.knees.get(cid)
            b = binding([r.step() for r in steps if r.stats is not None], knee, by_id[cid].config,
                        grid(prof.search.space), resolved=by_id[cid].resolved(), drain_s=prof.window.drain_seconds)
            why = b.line() if b is not None else ""
        curves.append(Curve(cid, labels[cid], steps[0].phase, [r.concurrency for r in steps],
                            [_goodput(r) for r in steps], [_pct(r, "ttft", pt) for r in steps],
                            [_pct(r, "tpot", pp) for r in steps], why, [_load(r) for r in steps],
                            "req/s" if any(r.offered_rps is not None for r in steps) else "concurrency"))
    best = model.decision.named  # the one winner rule: the report and the terminal name the same one
    winner = LiveWinner.of(labels[best.id], best.knee) if best is not None else None

    def where(at: Placement) -> str:
        return " on ".join(str(x) for x in (names.get(at.worker_id or -1), at.host) if x)

    # an out-of-memory launch is infeasible, not failed (it counts as done), but it failed with a reason all the same
    failures = [Failure(labels[c.id], ("launch" if not per_config.get(c.id) else "ladder")
                        + ("" if c.status == "failed" else f" ({c.status})"),
                        relative_paths(c.failure_reason or c.stop_reason or c.status, study.name), where(c.placement))
                for c in configs if c.status == "failed" or c.failure_reason]
    failures += [Failure(labels.get(r.server_config_id, "?"), f"{r.phase} window {load_text(r.concurrency, r.offered_rps)}",
                         relative_paths(r.reason or "failed", study.name), where(r.placement))
                 for r in runs if r.status == "failed"]

    soaks = {r.server_config_id for r in runs if r.phase == "soak"}
    ladder_configs = [c for c in configs if c.id not in soaks]
    phase = "final" if any(r.phase == "final" for r in runs) or not prof.search.screening.enabled else "screen"
    ran_as = {cid: steps[0].phase for cid, steps in per_config.items()}  # a configuration not yet measured: none
    in_phase = [c for c in ladder_configs if ran_as.get(c.id, phase) == phase]
    done = sum(c.status in DONE for c in in_phase)
    running = sum(c.status in ("running", "pending") for c in in_phase)
    failed = sum(c.status == "failed" for c in in_phase)
    planned = max(planned_configs(prof, phase), done + running + failed)  # a count never passes its total
    queued = 0 if study.status != "running" else max(0, planned - done - running - failed)
    screened = 0 if phase != "final" else sum(c.status in DONE for c in ladder_configs if ran_as.get(c.id) == "screen")

    lengths = [len(per_config[c.id]) for c in ladder_configs if c.status in DONE and c.id in per_config]
    soak_runs = {r.status for r in runs if r.phase == "soak"}
    soak_left = 0.0 if not prof.soak.enabled or "completed" in soak_runs else 0.5 if "running" in soak_runs else 1.0
    eta = None
    if study.status == "running":
        eta = study_eta(prof, phase, queued, running, lengths, soak_left, runs)
    return LiveState(study.name, study.status, bool(study.simulated), phase,
                     {"ttft_ms": float(sla.ttft_ms), "tpot_ms": float(sla.tpot_ms), "ttft_percentile": pt,
                      "tpot_percentile": pp}, planned, done, running, queued, failed, len(windows), eta, winner,
                     activity(workers, configs, runs), curves, windows, failures, screened,
                     model.decision.why_none())


def study_eta(prof: Profile, phase: str, queued: int, running: int, steps: list[int], soak_left: float,
              runs: Sequence[RunRecord]) -> float | None:
    """Wall seconds to the end of the study, None before a window has finished.

    What is left of every phase (this one's queued configurations, half of those running, the finals that
    screening will promote, the soak's share not run; a ladder as long as the finished ones were, `steps`) in
    seconds of the driver's clock, times the wall seconds a driver second has cost so far (a worker's span over
    its windows' driver seconds, so launches count), the ladders spread over the configurations running."""
    from sweep.profile.phases import ladder_windows, phase_seconds

    driver_s = 0.0
    first: dict[int | None, datetime] = {}
    last: dict[int | None, datetime] = {}
    for r in runs:
        if r.status == "completed" and r.started_at is not None and r.finished_at is not None:
            who = r.placement.worker_id
            driver_s += phase_seconds(prof, r.phase)
            first[who] = min(first.get(who, r.started_at), r.started_at)
            last[who] = max(last.get(who, r.finished_at), r.finished_at)
    wall_s = sum(_seconds(first[w], last[w]) for w in first)
    if driver_s <= 0 or wall_s <= 0:
        return None
    per_config = sum(steps) / len(steps) if steps else ladder_windows(prof, phase)
    ladders = (queued + running / 2) * per_config * phase_seconds(prof, phase)
    if phase == "screen":  # the finals' ladders, refinement windows included
        ladders += planned_configs(prof, "final") * ladder_windows(prof, "final") * phase_seconds(prof, "final")
    left = ladders / max(1, running) + soak_left * phase_seconds(prof, "soak")
    return left * wall_s / driver_s
