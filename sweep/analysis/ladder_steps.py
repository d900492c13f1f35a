"""A ladder's completed windows as knee inputs: `LadderStep` (one stored runs row and its statistics), the
steps as `StepPoint`s, and the knee of one configuration's stored steps with its goodput interval (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sweep.analysis.knee import ConfigKnee, KneeResult, StepPoint, find_knee, knee_goodput_ci
from sweep.analysis.run_stats import RunStats
from sweep.analysis.window_noise import from_interval, knee_interval


@dataclass(frozen=True)
class LadderStep:
    """One completed window of a ladder: its runs row, its load and its statistics."""

    run_id: int
    concurrency: int
    phase: str  # screen | final | soak
    stats: RunStats
    server_config_id: int | None = None  # the launch it ran on (coupled mode: one launch per step)
    offered_rps: float | None = None  # the offered rate (req/s) of a window of an open-loop rate ladder (arrival.rates)
    short: bool = False  # a far step's short window (search.far_windows): it draws the curve, never decides the knee

    @property
    def load(self) -> float:
        """The step's load along its ladder: the offered rate (req/s) in an open-loop rate ladder, else the
        concurrency."""
        return self.offered_rps if self.offered_rps is not None else float(self.concurrency)


def ladder_phase(phase: str | None) -> str:
    """The ladder a run's phase belongs to: a refinement window ('refine') is a step of its final ladder."""
    return "final" if phase in (None, "", "refine") else phase


def step_points(steps: Sequence[LadderStep]) -> list[StepPoint]:
    """Ladder steps to knee inputs."""
    return [StepPoint(concurrency=s.concurrency, goodput_rps=(st := s.stats).goodput_rps or 0.0,
                      goodput_tps=st.goodput_tps or 0.0, throughput_tps=st.output_tps or 0.0,
                      ttft_p99_ms=st.ttft_p99_ms or 0.0, retractions=st.retractions or 0,
                      passes=bool(st.passes_sla), goodput_ci_low=_ci_tps(st, st.goodput_rps_ci_low),
                      goodput_ci_high=_ci_tps(st, st.goodput_rps_ci_high), offered_rps=s.offered_rps,
                      flagged=bool(st.client_bound)) for s in steps]


def deciding(steps: Sequence[LadderStep]) -> list[LadderStep]:
    """The windows that may decide a knee: every full-length window (a far step's short window draws the curve, it
    never decides the answer: search.far_windows); only short windows (a ladder cut off before any full one): all
    of them, as measured."""
    full = [s for s in steps if not s.short]
    return full if full else list(steps)


def knee_on_short(steps: Sequence[LadderStep], flatten_threshold: float) -> LadderStep | None:
    """The short window find_knee's rule would pick as the knee if short windows decided (the naive rule), where no
    full-length window at its load has been measured yet: it must be measured again at full length before it can
    be the answer; None when the rule lands on a full-length window (or on none)."""
    full_loads = {s.load for s in steps if not s.short}
    candidates = [s for s in steps if not (s.short and s.load in full_loads)]
    k = find_knee(step_points(candidates), flatten_threshold)
    if k.index is None or not candidates[k.index].short:
        return None
    return candidates[k.index]


def steps_knee(steps: Sequence[LadderStep], flatten_threshold: float) -> KneeResult:
    """The knee of one configuration's windows (ladder steps and refinement windows alike): find_knee's one rule
    over the windows that may decide it (`deciding`); its indices refer to `steps`."""
    chosen = deciding(steps)
    k = find_knee(step_points(chosen), flatten_threshold)
    if len(chosen) == len(steps):
        return k
    where = [i for i, s in enumerate(steps) if not s.short]  # chosen is the full windows, in order
    return replace(k, index=None if k.index is None else where[k.index],
                   flattens_at=None if k.flattens_at is None else where[k.flattens_at])


def pooled(steps: Sequence[LadderStep]) -> list[LadderStep]:
    """A load measured more than once (a tie-break re-measure, search.tie_break) as one window: the mean of its
    windows' goodput and throughput figures (and of their intervals), failing the SLA if any of them fails; a window
    the client's self-check flagged stays apart (it never decides). In load order; one window per load is as is."""
    groups: dict[tuple[float, str], list[LadderStep]] = {}
    out: list[LadderStep] = []
    for s in steps:
        if s.stats.client_bound:
            out.append(s)
        else:
            groups.setdefault((s.load, ladder_phase(s.phase)), []).append(s)
    out += [g[0] if len(g) == 1 else _mean_window(g) for g in groups.values()]
    return sorted(out, key=lambda s: s.load)


def _mean_window(windows: Sequence[LadderStep]) -> LadderStep:
    """Windows at one load as one (`pooled`): the first's row and figures, the goodput and throughput the mean."""
    def mean(field: Callable[[RunStats], float | None]) -> float | None:
        values = [field(w.stats) for w in windows]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None) / len(values)

    stats = replace(windows[0].stats, passes_sla=all(w.stats.passes_sla for w in windows),
                    goodput_tps=mean(lambda s: s.goodput_tps), goodput_rps=mean(lambda s: s.goodput_rps),
                    output_tps=mean(lambda s: s.output_tps), goodput_rps_ci_low=mean(lambda s: s.goodput_rps_ci_low),
                    goodput_rps_ci_high=mean(lambda s: s.goodput_rps_ci_high))
    return replace(windows[0], stats=stats)


def ladder_knee(steps: Sequence[LadderStep], flatten_threshold: float) -> ConfigKnee | None:
    """The knee of one configuration's completed windows (stored windows of one ladder, its refinement windows
    included, and a tie-break's re-measured windows: a load measured more than once counts once, `pooled`), with its
    goodput interval (the knee re-chosen in every resample, widened by the window-to-window noise of every passing
    window, a repeated load's spread included); None when no window is eligible. A far step's short window never
    decides it (`deciding`)."""
    every = deciding(steps)
    steps = pooled(every)
    if not steps:
        return None
    points = step_points(steps)
    k = find_knee(points, flatten_threshold)
    if k.point is None:
        return None
    lo, hi = knee_goodput_ci(points, flatten_threshold)
    # with the window-to-window noise of the passing windows' goodput (sweep.analysis.window_noise, issue 28 §3)
    lo, hi = knee_interval(k.point.goodput_tps, lo, hi, [from_interval(p.load, p.goodput_tps, p.goodput_ci_low,
                                                                       p.goodput_ci_high)
                                                         for p in step_points(every) if p.passes])
    unit = "req/s" if any(s.offered_rps is not None for s in steps) else "concurrency"
    return ConfigKnee(k.point.concurrency, k.point.goodput_tps, k.point.goodput_rps, lo, hi,
                      ladder_phase(steps[0].phase), k.reason, steps[k.index or 0].stats.throughput_rps,
                      boundary_unit=unit, offered_rps=k.point.offered_rps)


def same_windows(a: Sequence[LadderStep], b: Sequence[LadderStep]) -> bool:
    """Whether two configurations measured the same numbers at the same loads (issue 28 §2): every window of one has
    a window of the other at the same load and phase with equal requests, goodput and SLA percentiles. On the
    simulator a knob that never binds (a memory fraction whose pool is never full) measures exactly alike: those
    configurations are one answer, not a winner and a loser."""
    def key(steps: Sequence[LadderStep]) -> list[tuple[object, ...]]:
        return sorted((ladder_phase(s.phase), s.load, s.stats.n_completed, s.stats.goodput_tps, s.stats.ttft_p95_ms,
                       s.stats.tpot_p95_ms, s.stats.passes_sla) for s in steps)
    return bool(a) and key(a) == key(b)


def _ci_tps(stats: RunStats, v: float | None) -> float | None:
    """measure's goodput interval is in requests/s; scale it to output tok/s by the step's tokens per request."""
    rps, tps = stats.goodput_rps, stats.goodput_tps
    if v is None or not rps or tps is None:
        return None
    return float(v) * float(tps) / float(rps)
