"""The SLA boundary of one configuration: where its SLA percentile crosses its bound, with a 95% interval (pure).

Spec (issue 19 §1, "find the boundary, not the ladder step"; issue 28 §3 and §4, intervals that hold on a repeat):

- SLA ratio of a window: the largest of its SLA percentiles over their bounds (TTFT P<ttft_percentile> / ttft_ms,
  TPOT P<tpot_percentile> / tpot_ms, E2E P<e2e_percentile> / e2e_ms when bounded) and of its error rate over
  max_error_rate (an error with max_error_rate 0, or a window with no completed request: infinite). A window
  whose ratio is <= 1 meets the SLA's percentile and error bounds.
- Load of a window: its concurrency, or in an open-loop rate ladder (arrival.rates) its offered rate in req/s; the
  boundary is in the same unit.
- Bracket of a ladder (windows in load order): the highest window with ratio <= 1 that has a window with
  ratio > 1 above it (lo), and the lowest window above lo with ratio > 1 (hi). None when nothing passes (the
  boundary is below the ladder) or nothing above the highest pass fails (above it: "not bracketed").
- Crossing: the load where the ratio, linear between lo and hi, reaches 1:
  c_lo + (1 - r_lo) / (r_hi - r_lo) * (c_hi - c_lo) (c_lo when r_hi is infinite).
- Shape: "cliff" when the SLA ratio jumps more than CLIFF_FACTOR (10x) between neighbouring windows around the
  crossing, else "smooth". Around the crossing: the ladder's own steps (not refinement windows) that bracket it,
  and every pair of neighbouring windows between those two (refinement windows included); the jump of a pair is
  r_upper / r_lower (infinite when the upper window's ratio is). The ladder's steps are the same on every seed and
  warm-up, and a refinement bisects inside their bracket, so the verdict does not hang on where a bisection landed
  (the product of the jumps inside is the ladder pair's own). An open loop past its capacity is a cliff by this rule
  (its queue, and so its TTFT, grows through the window: ratio 0.08 -> 5.8 from 20 to 40 req/s on the simulator);
  a KV-bound closed loop whose cache fills at 10 users is one (TTFT P95 31 ms at c=9, 1,134 ms at c=10); a
  closed loop queueing past its running slots is not (0.9 -> 2.0 from 32 to 64 users). Without refinement
  windows, the ladder's bracket is the whole of it; windows not marked either way count as the ladder's.
- 95% interval, carrying both a window's own sampling noise and the window-to-window noise (issue 28 §3):
  1. Block bootstrap per window: its requests in send order, cut into BLOCKS (10) contiguous segments of equal
     time from its first send to its last (empty ones dropped; of equal count without send times); a resample draws
     as many segments with replacement, so a burst or a queue episode inside the window stays whole. The
     resample's SLA ratio, and its load: in an open loop (`rate`) the offered rate times the resample's request
     count over the window's (how many requests arrived is part of the load a window saw); else the load. n
     resamples per window, a fixed seed.
  2. Window-to-window term: eta, the relative spread of the load a window's server effectively saw
     (sweep.analysis.window_noise.horizontal: residuals of the windows' log SLA ratios against the line through
     their neighbours, in log load, each over the curve's slope there, less what each window's own resamples
     explain), measured from the bracket's two windows (those that decide the crossing); when they give no
     residual (a cliff between them, the ladder's end), from every window; floored, and unmeasured:
     window_noise.NOISE_UNMEASURED.
  3. CROSSING_DRAWS crossings: each takes one resample of every window and moves each window's load by
     exp(eta_j z), z standard normal per window, eta_j drawn from eta's own uncertainty (window_noise.Noise.draws);
     the windows in their new load order, the crossing re-found (bracket included). One with no bracket counts as
     the ladder's end it ran off (its lowest load when nothing passes, its highest when nothing fails). The
     interval: the 2.5th and 97.5th percentiles of the crossings.
  4. Resolution floor, so no interval has zero width: a cliff's crossing is only known to lie in its bracket, so
     the interval holds [c_lo, c_hi]; a smooth one holds both the crossing and the crossing of the ratio
     interpolated linearly in its logarithm (the bend between the bracket's windows is unknown); the point estimate
     always lies inside. A zero-width interval left after this (a ratio of exactly 1) widens to the bracket.
  On the simulator with window noise the interval covers a dense scan's crossing in 18-20 of 20 studies per
  configuration (docs/bench-intervals.md); a bootstrap over single requests covered 4, 18 and 0.

The windows' requests are the measured ones (not warm-up, sent inside the window), as measure counts them; a cut one
(still running when the drain ended) is left out, as measure leaves it out of the latencies and the error rate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.analysis import window_noise
from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.tiers import StoredRequest
from sweep.profile import SLA

CLIFF_FACTOR = 10.0
FAILED = math.nextafter(1.0, math.inf)  # the least SLA ratio of a window stopped early: just over its bound
BOOTSTRAP_N = 200  # block-bootstrap resamples of each window
CROSSING_DRAWS = 2000  # crossings drawn, each from one resample of every window and the window-to-window term
BLOCKS = 10
_COLS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True)
class WindowSample:
    """One window's measured requests, as the boundary needs them: latencies in ms (nan where the request has
    none: an error, a TPOT below 2 output tokens) and whether each failed. `concurrency` is the window's load: its
    concurrency, or its offered rate (req/s) in an open-loop rate ladder. `sent_s`: each request's send time
    (seconds from the window's start; empty: the requests are in send order); `refined`: a refinement window (a
    bisection), not one of the ladder's steps; `rate`: an open loop's window, whose load is an offered rate;
    `stopped_early`: a window stopped once its step could not pass, whose requests are the part it measured: its SLA
    ratio (and every resample's) is at least FAILED, so it brackets as the fail it was decided to be."""

    concurrency: float
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    error: tuple[bool, ...]
    goodput_tps: float | None = None
    sent_s: tuple[float, ...] = ()
    refined: bool = False
    rate: bool = False
    stopped_early: bool = False  # decided failing before its end (sweep.analysis.early_stop): its ratio is > 1


@dataclass(frozen=True)
class Boundary:
    """Where a configuration's SLA percentile crosses its bound (a load: concurrency, or req/s in an open-loop rate
    ladder), its 95% interval, the bracket it lies in, the shape of the crossing (smooth | cliff) and the
    window-to-window noise the interval carries (eta: the relative sd of the load a window effectively saw, and the
    effective number of residuals that measured it; 0 when not measured)."""

    concurrency: float
    ci_low: float
    ci_high: float
    passing: float  # the bracket's passing load
    failing: float  # the bracket's failing load
    shape: str  # smooth | cliff
    ratio_passing: float  # the SLA ratio (percentile / bound, worst bound) of the two bracket windows
    ratio_failing: float
    noise: float = 0.0
    noise_dof: float = 0.0


def window_sample(concurrency: float, requests: Sequence[StoredRequest], window_s: float | None,
                  goodput_tps: float | None = None, refined: bool = False, rate: bool = False,
                  stopped_early: bool = False) -> WindowSample:
    """A window's stored requests (times relative to the window start) as a sample: its measured requests
    (not warm-up, not cut by the drain, scheduled inside [0, window_s)), in send order."""
    rows = sorted((r for r in requests if not r.warmup and not r.cut and window_s is not None
                   and 0 <= r.scheduled_at < window_s), key=lambda r: r.scheduled_at)

    def col(values: list[float | None]) -> tuple[float, ...]:
        return tuple(math.nan if r.error or v is None else v for r, v in zip(rows, values, strict=True))

    return WindowSample(concurrency, col([r.ttft_ms for r in rows]), col([r.tpot_ms for r in rows]),
                        col([r.e2e_ms for r in rows]), tuple(r.error for r in rows), goodput_tps,
                        tuple(r.scheduled_at for r in rows), refined, rate, stopped_early)


def _bounds(sla: SLA) -> list[tuple[str, float, float]]:
    out = [("ttft_ms", sla.ttft_percentile, sla.ttft_ms), ("tpot_ms", sla.tpot_percentile, sla.tpot_ms)]
    if sla.e2e_ms is not None:
        out.append(("e2e_ms", sla.e2e_percentile, sla.e2e_ms))
    return out


def _ratio(cols: Mapping[str, np.ndarray], error: np.ndarray, sla: SLA) -> float:
    """The SLA ratio of one window's (resampled) requests."""
    n = error.size
    if n == 0 or bool(error.all()):
        return math.inf
    worst = 0.0
    for name, q, bound in _bounds(sla):
        v = cols[name][~np.isnan(cols[name])]
        if v.size:
            worst = max(worst, float(np.percentile(v, q)) / bound)
    rate = float(error.sum()) / n
    if rate > 0:
        worst = max(worst, rate / sla.max_error_rate if sla.max_error_rate > 0 else math.inf)
    return worst


def _arrays(w: WindowSample) -> tuple[dict[str, np.ndarray], np.ndarray]:
    return {k: np.asarray(getattr(w, k), float) for k in _COLS}, np.asarray(w.error, bool)


def sla_ratio(w: WindowSample, sla: SLA) -> float:
    """The window's SLA ratio (module docstring): <= 1 meets the percentile and error bounds (a window stopped early:
    at least FAILED)."""
    r = _ratio(*_arrays(w), sla)
    return max(r, FAILED) if w.stopped_early else r


def blocks(w: WindowSample) -> list[np.ndarray]:
    """The window's requests (indices) in send order, cut into BLOCKS contiguous segments: equal slices of time from
    its first send to its last (empty ones dropped), or of equal count without send times."""
    n = len(w.error)
    if n == 0:
        return []
    if len(w.sent_s) != n or n < 2 or max(w.sent_s) <= min(w.sent_s):
        order = np.argsort(np.asarray(w.sent_s, float), kind="stable") if len(w.sent_s) == n else np.arange(n)
        return list(np.array_split(order, min(BLOCKS, n)))
    t = np.asarray(w.sent_s, float)
    cut = np.minimum(((t - t.min()) / (t.max() - t.min()) * BLOCKS).astype(int), BLOCKS - 1)
    order = np.argsort(t, kind="stable")
    return [seg for k in range(BLOCKS) if (seg := order[cut[order] == k]).size]


def block_ratios(w: WindowSample, sla: SLA, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n block-bootstrap resamples of the window's SLA ratio (module docstring, step 1), and of its load: an open
    loop's offered rate times the resample's request count over the window's."""
    cols, err = _arrays(w)
    segs = blocks(w)
    if not segs:
        return np.full(n, math.inf), np.full(n, w.concurrency)
    out, load = np.empty(n), np.full(n, w.concurrency)
    for j in range(n):
        idx = np.concatenate([segs[i] for i in rng.integers(0, len(segs), len(segs))])
        out[j] = _ratio({k: v[idx] for k, v in cols.items()}, err[idx], sla)
        if w.stopped_early:
            out[j] = max(out[j], FAILED)
        if w.rate:
            load[j] = w.concurrency * idx.size / err.size
    return out, load


def bracket(points: Sequence[tuple[float, float]]) -> tuple[int, int] | None:
    """(lo, hi) positions in `points` ((load, ratio), ascending load) of the bracket; None without."""
    passing = [i for i, (_, r) in enumerate(points) if r <= 1.0]
    for lo in reversed(passing):
        above = [i for i in range(lo + 1, len(points)) if points[i][1] > 1.0]
        if above:
            return lo, above[0]
    return None


def crossing(points: Sequence[tuple[float, float]]) -> float | None:
    """The load where the ratio crosses 1 inside the bracket; None without a bracket."""
    b = bracket(points)
    if b is None:
        return None
    (c_lo, r_lo), (c_hi, r_hi) = points[b[0]], points[b[1]]
    if math.isinf(r_hi):
        return float(c_lo)
    return c_lo + (1.0 - r_lo) / (r_hi - r_lo) * (c_hi - c_lo)


def log_crossing(points: Sequence[tuple[float, float]]) -> float | None:
    """The crossing with the ratio interpolated linearly in its logarithm between the bracket's windows."""
    b = bracket(points)
    if b is None:
        return None
    (c_lo, r_lo), (c_hi, r_hi) = points[b[0]], points[b[1]]
    if math.isinf(r_hi) or r_lo <= 0:
        return float(c_lo)
    return c_lo + -math.log(r_lo) / math.log(r_hi / r_lo) * (c_hi - c_lo)


def _ran_off(points: Sequence[tuple[float, float]]) -> float:
    """A resample without a bracket: the ladder's end the crossing lies beyond."""
    return float(points[0][0]) if all(r > 1.0 for _, r in points) else float(points[-1][0])


def jump(points: Sequence[tuple[float, float]], refined: Sequence[bool]) -> float:
    """The largest factor the SLA ratio moves by between neighbouring windows around the crossing (module
    docstring, shape); 0 when nothing brackets it."""
    ladder = [p for p, r in zip(points, refined, strict=True) if not r]
    b, src = bracket(ladder), ladder
    if b is None:
        b, src = bracket(points), list(points)
    if b is None:
        return 0.0
    lo, hi = src[b[0]][0], src[b[1]][0]
    worst = 0.0
    for seq in (ladder, list(points)):
        inside = [r for c, r in seq if lo <= c <= hi]
        for a, z in zip(inside, inside[1:], strict=False):
            worst = max(worst, math.inf if math.isinf(z) or a <= 0 else z / a)
    return worst


def estimate_boundary(windows: Sequence[WindowSample], sla: SLA, n: int = BOOTSTRAP_N,
                      seed: int = 0, draws_n: int = CROSSING_DRAWS) -> Boundary | None:
    """The boundary of one configuration's windows (any order; see module docstring); None when not bracketed."""
    ws = sorted(windows, key=lambda w: w.concurrency)
    points = [(w.concurrency, sla_ratio(w, sla)) for w in ws]
    b = bracket(points)
    point = crossing(points)
    if b is None or point is None:
        return None
    rng = np.random.default_rng(seed)
    pairs = [block_ratios(w, sla, n, rng) for w in ws]
    draws = np.array([p[0] for p in pairs])  # windows x resamples: the ratio, and the load, of each resample
    loads = np.array([p[1] for p in pairs])
    with np.errstate(divide="ignore", invalid="ignore"):
        sd_log = [float(np.std(np.log(d))) if np.isfinite(d).all() and (d > 0).all() else math.inf for d in draws]
    figures = [window_noise.WindowFigure(c, r, s) for (c, r), s in zip(points, sd_log, strict=True)]
    noise = window_noise.horizontal(figures, near=(points[b[0]][0], points[b[1]][0]))  # the bracket's two windows
    if noise.measured is None:  # they give no residual (a cliff between them, the ladder's end): every window's
        noise = window_noise.horizontal(figures)
    pick = rng.integers(0, n, (len(ws), draws_n))  # one resample of every window per crossing drawn
    rows = np.arange(len(ws))[:, None]
    ratios = draws[rows, pick]
    loads = loads[rows, pick] * np.exp(noise.draws(draws_n, rng)[None, :] * rng.standard_normal(pick.shape))
    found = []
    for j in range(draws_n):
        resampled = sorted(zip(loads[:, j].tolist(), ratios[:, j].tolist(), strict=True))
        c = crossing(resampled)
        found.append(c if c is not None else _ran_off(resampled))
    lo, hi = (float(x) for x in np.percentile(found, [2.5, 97.5]))
    lo_w, hi_w = ws[b[0]], ws[b[1]]
    r_lo, r_hi = points[b[0]][1], points[b[1]][1]
    form = shape(jump(points, [w.refined for w in ws]))
    if form == "cliff":
        lo, hi = min(lo, lo_w.concurrency), max(hi, hi_w.concurrency)
    else:
        other = log_crossing(points)
        lo, hi = min(lo, point, other if other is not None else point), max(hi, point, other or point)
    if hi <= lo:
        lo, hi = lo_w.concurrency, hi_w.concurrency
    return Boundary(point, min(lo, point), max(hi, point), lo_w.concurrency, hi_w.concurrency, form, r_lo, r_hi,
                    noise.sd, noise.dof)


def shape(ratio_jump: float) -> str:
    """cliff | smooth of the largest jump of the SLA ratio between neighbouring windows around the crossing."""
    return "cliff" if ratio_jump > CLIFF_FACTOR else "smooth"


def steps_boundary(steps: Sequence[LadderStep], requests: Mapping[int, Sequence[StoredRequest]],
                   sla: SLA) -> Boundary | None:
    """The SLA boundary of one configuration's stored steps (run id -> its stored requests in `requests`) judged
    by `sla`: None unless the ladder was refined (a step of phase 'refine') and is bracketed for `sla`."""
    if not any(s.phase == "refine" for s in steps):
        return None
    return estimate_boundary(steps_windows(steps, lambda run_id: requests.get(run_id, ())), sla)


def steps_windows(steps: Sequence[LadderStep], requests_of: Callable[[int], Sequence[StoredRequest]]
                  ) -> list[WindowSample]:
    """Stored steps as boundary windows (their requests by run id from `requests_of`), refinement windows marked."""
    return [window_sample(s.load, requests_of(s.run_id), s.stats.window_s, s.stats.goodput_tps,
                          refined=s.phase == "refine", rate=s.offered_rps is not None,
                          stopped_early=s.stats.stopped_early_by is not None) for s in steps]


def with_boundary(knee: ConfigKnee, b: Boundary | None) -> ConfigKnee:
    """`knee` carrying boundary `b` (unchanged when None)."""
    if b is None:
        return knee
    return dataclasses.replace(knee, boundary=b.concurrency, boundary_ci_low=b.ci_low, boundary_ci_high=b.ci_high,
                               boundary_shape=b.shape)
