"""SLA tiers judged on stored windows (pure): one study, one set of measured windows, a knee and a winner per tier.

A tier is a named SLA (sweep.profile.Tier). The primary tier's verdicts are the stored `runs` columns (what the
search was steered by). Any other tier is judged again from the stored requests of each window, never by measuring
again; its verdict follows sweep.analysis.measure's definitions, with one approximation:

- passes: the tier's percentile bounds on the window's successful requests (TTFT, TPOT, E2E as stored per request,
  the same numbers measure computed) and its error-rate bound: exactly measure's rule (`_sla_failures`); a cut
  request (still running when the drain ended) is no error and not in the error rate's denominator, as in measure.
- goodput_rps and attainment: requests sent in the window that meet the tier's per-request bounds: exact.
- goodput_tps: the window's stored goodput_tps (the primary tier's, counted by arrival time) scaled by the ratio of
  output tokens of requests meeting this tier to those meeting the primary (requests sent in the window), capped at
  the window's output_tps; without a stored primary, output_tps times the tier's token share. measure counts tokens
  by arrival time from per-chunk times, which the store does not keep: the ratio is exact for steady windows and
  off by at most the edge requests' tokens otherwise, and a tier stricter than the primary never reads higher.
- goodput interval: measure's union of a block bootstrap of meeting sends and the Wilson interval of attainment.

A tier whose bounds equal the study's stored SLA takes the stored columns unchanged, so the primary tier's knees
and winner are identical to the study's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep, ladder_knee
from sweep.analysis.measure import (
    GOODPUT_BLOCKS,
    _block_counts,
    _bootstrap_ci,
    _sla_failures,
    ratio,
    wilson_interval,
)
from sweep.analysis.run_stats import RunStats
from sweep.analysis.session_time import session_times_s
from sweep.profile import SLA
from sweep.profile.window import DEFAULT_MIN_REQUESTS


@dataclass(frozen=True)
class StoredRequest:
    """What a tier needs of one stored request (a `requests` row): times relative to the window start, in ms."""

    scheduled_at: float
    warmup: bool
    error: bool  # failed (a cut request is no error: `cut`)
    finished: bool  # e2e_ms recorded
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    output_tokens: int
    session: tuple[int, int | None, int | None] = (0, None, None)  # sessions: (idx, turn, session_turns)
    cut: bool = False  # still running when the drain ended (measure.is_cut): counted apart, never an error

    @property
    def ok(self) -> bool:
        """Finished without error (measure.succeeded)."""
        return not self.error and self.finished


def meets(req: StoredRequest, sla: SLA) -> bool:
    """measure.meets_sla on a stored request."""
    if not req.ok or req.ttft_ms is None or req.ttft_ms > sla.ttft_ms:
        return False
    if req.tpot_ms is not None and req.tpot_ms > sla.tpot_ms:
        return False
    return sla.e2e_ms is None or (req.e2e_ms is not None and req.e2e_ms <= sla.e2e_ms)


def same_bounds(a: SLA, b: SLA) -> bool:
    """Whether two SLAs (or tiers) judge identically."""
    return SLA(**a.model_dump(include=set(SLA.model_fields))) == SLA(**b.model_dump(include=set(SLA.model_fields)))


def judge_stats(stats: RunStats, requests: Sequence[StoredRequest], sla: SLA, *, primary: SLA | None = None,
                min_requests: int = DEFAULT_MIN_REQUESTS, bootstrap: int = 200, seed: int = 0) -> RunStats:
    """One stored window's statistics with the verdict columns (passes_sla, sla_failures, goodput, attainment and
    the goodput interval) re-judged for `sla`; every other column unchanged. A window that sent fewer than
    min_requests requests does not pass (measure's rule)."""
    window_s = stats.window_s
    recs = [r for r in requests if not r.warmup and 0.0 <= r.scheduled_at < window_s]
    ok = [r for r in recs if r.ok]
    meeting = [r for r in recs if meets(r, sla)]
    error_rate = ratio(sum(1 for r in recs if r.error), sum(1 for r in recs if not r.cut))
    sessions_s = session_times_s(
        (r.session[0], r.session[1], r.session[2], r.warmup, r.error or r.cut, r.scheduled_at,
         r.scheduled_at + r.e2e_ms / 1000 if r.e2e_ms is not None else None) for r in requests
    ) if sla.session_s is not None else None
    fails = _sla_failures(sla, [r.ttft_ms for r in ok if r.ttft_ms is not None],
                          [r.tpot_ms for r in ok if r.tpot_ms is not None],
                          [r.e2e_ms for r in ok if r.e2e_ms is not None], error_rate, len(ok), None,
                          len(recs), min_requests, sessions_s)
    tokens = sum(r.output_tokens for r in recs)
    share = ratio(sum(r.output_tokens for r in meeting), tokens)
    base = None if primary is None else ratio(sum(r.output_tokens for r in recs if meets(r, primary)), tokens)
    if stats.output_tps is None:
        goodput_tps = None
    elif base and stats.goodput_tps is not None:
        goodput_tps = min(stats.output_tps, stats.goodput_tps * (share or 0.0) / base)
    else:
        goodput_tps = stats.output_tps * (share or 0.0)
    lo = hi = None
    if window_s > 0 and recs and bootstrap > 0:
        rng = np.random.default_rng(seed)
        per_block = _block_counts([r.scheduled_at for r in meeting], 0.0, window_s, GOODPUT_BLOCKS)
        lo, hi = _bootstrap_ci(per_block, lambda a: float(a.sum()) * GOODPUT_BLOCKS / a.size / window_s,
                               bootstrap, rng)
        if lo is not None and hi is not None:
            w_lo, w_hi = wilson_interval(len(meeting), len(recs))
            lo, hi = min(lo, w_lo * len(recs) / window_s), max(hi, w_hi * len(recs) / window_s)
    return dataclasses.replace(stats, passes_sla=not fails, sla_failures="; ".join(fails),
                               goodput_rps=ratio(len(meeting), window_s), goodput_tps=goodput_tps,
                               attainment=ratio(len(meeting), len(recs)), goodput_rps_ci_low=lo, goodput_rps_ci_high=hi)


def steps_knee(steps: Sequence[LadderStep], flatten_threshold: float) -> ConfigKnee | None:
    """The knee of one configuration's steps (one phase, a refined ladder's windows included) with its goodput
    interval; None when none passes: sweep.analysis.ladder_steps.ladder_knee, the rule the primary tier's knee
    follows (a refined ladder's knee is its bracket's passing window)."""
    return ladder_knee(steps, flatten_threshold) if steps else None


@dataclass(frozen=True)
class TierVerdicts:
    """One tier over a study's stored windows: every configuration's judged steps and its knee."""

    name: str
    sla: SLA
    primary: bool
    steps: Mapping[int, tuple[LadderStep, ...]]  # config id -> its judged steps (the knee's phase), by concurrency
    knees: Mapping[int, ConfigKnee]  # config id -> its knee (configurations with a passing step only)


def judge_tier(name: str, sla: SLA, primary: bool, stored_sla: SLA | None,
               steps: Mapping[int, Sequence[LadderStep]],
               requests: Mapping[int, Sequence[StoredRequest]], flatten_threshold: float,
               min_requests: int = DEFAULT_MIN_REQUESTS) -> TierVerdicts:
    """A tier's verdicts: each configuration's steps (its knee's phase: final when it has a final ladder, else its
    screen) re-judged from `requests` (run id -> stored requests) unless `sla` equals `stored_sla`, and its knee."""
    keep = same_bounds(sla, stored_sla) if stored_sla is not None else False
    judged: dict[int, tuple[LadderStep, ...]] = {}
    knees: dict[int, ConfigKnee] = {}
    for cid, all_steps in steps.items():
        finals = [s for s in all_steps if s.phase in ("final", "refine")]  # a refined ladder's windows with it
        mine = sorted(finals or [s for s in all_steps if s.phase != "soak"], key=lambda s: s.concurrency)
        if not keep:
            mine = [dataclasses.replace(s, stats=judge_stats(s.stats, requests.get(s.run_id, ()), sla, primary=stored_sla,
                                                                   min_requests=min_requests))
                    for s in mine]
        judged[cid] = tuple(mine)
        knee = steps_knee(mine, flatten_threshold)
        if knee is not None:
            knees[cid] = knee
    return TierVerdicts(name, sla, primary, judged, knees)
