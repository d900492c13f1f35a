"""Window-to-window noise: how far a window moves between windows beyond its own requests' sampling noise, measured
from a configuration's own windows, and the intervals that carry it (pure; issue 28 §3).

A window's figure (its SLA ratio, its goodput) is known from its requests to within the block bootstrap's spread,
but a second window at the same load does not land there: clocks, the host, a neighbour on the node move whole
windows (on one H200 two launches of one configuration crossed their SLA bound 0.5% apart, a dense scan on another
day 7% lower). An interval over one window's requests misses that.

Spec:

- Figures: window i at load c_i (concurrency or req/s) has a figure y_i > 0 and s_i, the sd of log y_i over its own
  block-bootstrap resamples. In x = log c, y = log y_i, a smooth curve f runs through them.
- Two ways a window moves, each relative (0.05 is 5%):
  vertical, `tau`: log y_i = f(x_i) + e_i, e_i of sd tau (the whole window ran faster or slower: its goodput);
  horizontal, `eta`: log y_i = f(x_i + h_i), h_i of sd eta (the load the server saw was effectively higher or
  lower: its capacity moved). Near a steep SLA crossing (an open loop at its capacity: the ratio 10x per doubling
  of the rate) a few percent of capacity moves the ratio several-fold, which only the horizontal form describes; a
  flat stretch (goodput past saturation) moves only vertically.
- Residuals: windows at one load are averaged (their spread is a residual of its own: d = y_a - y_b between two
  of them, share 2); then each window with a neighbour on either side (a < i < b, by load) against the line
  through them: d = y_i - (1 - w) y_a - w y_b, w = (x_i - x_a) / (x_b - x_a), share 1 + (1 - w)^2 + w^2, within
  s_i^2 + (1 - w)^2 s_a^2 + w^2 s_b^2, slope m = (y_b - y_a) / (x_b - x_a) (of a repeated load: the slope between
  its neighbouring loads). E d^2 = within + share (tau^2, or m^2 eta^2) + the curve's bend (which only makes the
  estimate larger: conservative). A triplet with a jump of more than JUMP (10x) between neighbours gives no
  residual: a cliff is the curve's shape, not noise. Windows without a finite positive figure give none. `near`
  keeps the residuals of windows whose load lies in a given range (those that decide a crossing).
- Estimates, pooled (method of moments): tau^2 = max(0, sum(d^2 - within)) / sum(share), k = the number of
  residuals; eta^2 = max(0, sum(d^2 - within)) / sum(m^2 share), k = Kish's effective number of residuals under
  the weights m^2 share ((sum)^2 / sum of squares). Reported sd = max(measured, NOISE_FLOOR); with no residual (or
  no slope) it is not measured: NOISE_UNMEASURED, k = 0.
- An interval that carries it draws the sd per resample from its own uncertainty: sd * sqrt(k' / chi2_k'), k' = k +
  FLOOR_DOF (scaled inverse chi-square: an sd measured from k residuals, Student-t tails for small k; the floor
  counts as one residual more), at most NOISE_CAP; not measured: NOISE_UNMEASURED itself.
- widen(value, lo, hi, noise): a 95% interval of `value` (e.g. the knee's goodput from its window's requests) with
  the window-to-window term added: half-widths sqrt(h^2 + (t95 * value)^2) on either side, where h is the given
  half-width on that side and t95 = Noise.half95() (the 97.5th percentile of sd* x z, z standard normal); never
  zero width for a value other than 0.
- knee_interval(value, lo, hi, windows): widen by the vertical noise of `windows` (a configuration's passing
  windows' goodput, each from_interval of its own 95% interval: sd of its log = log(hi / lo) / 3.92).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

JUMP = 10.0  # a neighbouring pair whose figure moves more than this factor is a cliff, not noise
# The least window-to-window spread an interval assumes (3%): under the 5-9% run-to-run CV of a window's goodput
# on the H200 (bench/search_prior.py), above the 0.5% between two launches' boundaries there (issue 28 §3).
NOISE_FLOOR = 0.03
FLOOR_DOF = 1.0  # the floor counts as one residual more in a measured sd's uncertainty
NOISE_CAP = 0.25  # a drawn sd beyond 25% says nothing more: capped so that an interval stays finite
NOISE_UNMEASURED = 0.09  # nothing to measure it from: the H200's run-to-run CV of window goodput (9%)
HALF_DRAWS = 20000


@dataclass(frozen=True)
class WindowFigure:
    """One window's figure: its load, the figure (ratio, goodput; > 0 to count) and the sd of its log over the
    window's own bootstrap resamples (0 when unknown)."""

    load: float
    value: float
    sd_log: float = 0.0


@dataclass(frozen=True)
class Residual:
    """One residual (module docstring): d^2, the within-window part of its expectation, its share of the
    window-to-window variance and the curve's slope there (log-log)."""

    d2: float
    within: float
    share: float
    slope: float


@dataclass(frozen=True)
class Noise:
    """A window-to-window sd (relative: vertical tau or horizontal eta), the effective number of residuals it was
    measured from (dof; 0: not measured), and the measured value before the floor (None when not measured)."""

    sd: float
    dof: float
    measured: float | None

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws of the sd carrying its own uncertainty (module docstring): sd * sqrt(k / chi2_k), k = dof +
        FLOOR_DOF, at most NOISE_CAP; the sd itself when not measured."""
        if self.measured is None:
            return np.full(n, self.sd)
        k = self.dof + FLOOR_DOF
        return np.minimum(NOISE_CAP, self.sd * np.sqrt(k / rng.chisquare(k, n)))

    def half95(self) -> float:
        """The relative half-width of a 95% interval from this term alone: the 97.5th percentile of sd* x z, z
        standard normal (about sd x Student's t_0.975 with dof + FLOOR_DOF degrees of freedom; 1.96 sd when not
        measured), from HALF_DRAWS draws with a fixed seed."""
        rng = np.random.default_rng(0)
        return float(np.quantile(self.draws(HALF_DRAWS, rng) * rng.standard_normal(HALF_DRAWS), 0.975))


def _usable(f: WindowFigure) -> bool:
    return f.load > 0 and math.isfinite(f.value) and f.value > 0 and math.isfinite(f.sd_log)


def residuals(figures: Sequence[WindowFigure], near: tuple[float, float] | None = None) -> list[Residual]:
    """Every residual of `figures` (module docstring)."""
    by_load: dict[float, list[WindowFigure]] = {}
    for f in figures:
        if _usable(f):
            by_load.setdefault(f.load, []).append(f)
    loads = sorted(by_load)
    points = [(math.log(load), float(np.mean([math.log(f.value) for f in by_load[load]])),
               sum(f.sd_log ** 2 for f in by_load[load]) / len(by_load[load]) ** 2) for load in loads]
    jump = math.log(JUMP)

    def slope(i: int) -> float | None:
        """The secant slope between window i's neighbours (one-sided at an end); None alone or across a cliff."""
        a, b = max(0, i - 1), min(len(points) - 1, i + 1)
        if a == b or abs(points[b][1] - points[a][1]) > jump * (b - a):
            return None
        return (points[b][1] - points[a][1]) / (points[b][0] - points[a][0])

    def kept(i: int) -> bool:
        return near is None or near[0] <= loads[i] <= near[1]

    out: list[Residual] = []
    for i, load in enumerate(loads):
        g, m = by_load[load], slope(i)
        if len(g) < 2 or not kept(i) or m is None:
            continue
        logs = [math.log(f.value) for f in g]
        for a in range(len(g)):
            for b in range(a + 1, len(g)):
                out.append(Residual((logs[a] - logs[b]) ** 2, g[a].sd_log ** 2 + g[b].sd_log ** 2, 2.0, m))
    for i in range(1, len(points) - 1):
        (xa, ya, va), (xi, yi, vi), (xb, yb, vb) = points[i - 1], points[i], points[i + 1]
        if abs(yi - ya) > jump or abs(yb - yi) > jump or not kept(i):
            continue
        w = (xi - xa) / (xb - xa)
        d = yi - (1 - w) * ya - w * yb
        out.append(Residual(d * d, vi + (1 - w) ** 2 * va + w * w * vb, 1 + (1 - w) ** 2 + w * w,
                            (yb - ya) / (xb - xa)))
    return out


def _pooled(res: Sequence[Residual], weights: Sequence[float]) -> Noise:
    total = sum(weights)
    if not res or total <= 0:
        return Noise(NOISE_UNMEASURED, 0, None)
    measured = math.sqrt(max(0.0, sum(r.d2 - r.within for r in res)) / total)
    dof = total * total / sum(x * x for x in weights)
    return Noise(max(measured, NOISE_FLOOR), dof, measured)


def vertical(figures: Sequence[WindowFigure], near: tuple[float, float] | None = None) -> Noise:
    """tau: how far a window's figure moves between windows (module docstring)."""
    res = residuals(figures, near)
    return _pooled(res, [r.share for r in res])


def horizontal(figures: Sequence[WindowFigure], near: tuple[float, float] | None = None) -> Noise:
    """eta: how far the load a window's server effectively saw moves between windows (module docstring)."""
    res = residuals(figures, near)
    return _pooled(res, [r.slope * r.slope * r.share for r in res])


def widen(value: float, lo: float | None, hi: float | None, noise: Noise) -> tuple[float, float]:
    """`value`'s 95% interval (lo, hi; None: unknown, taken as the point) with the window-to-window term added
    (module docstring); never below 0 when value >= 0, never zero width when value != 0."""
    extra = noise.half95() * abs(value)
    below = value - lo if lo is not None else 0.0
    above = hi - value if hi is not None else 0.0
    low = value - math.hypot(max(below, 0.0), extra)
    high = value + math.hypot(max(above, 0.0), extra)
    return (max(0.0, low) if value >= 0 else low), high


def from_interval(load: float, value: float, lo: float | None, hi: float | None) -> WindowFigure:
    """A window's figure from its 95% interval (a normal's on the log scale: sd = log(hi / lo) / 3.92; 0 without)."""
    sd = math.log(hi / lo) / 3.92 if lo is not None and hi is not None and lo > 0 and hi >= lo else 0.0
    return WindowFigure(load, value, sd)


def knee_interval(value: float, lo: float | None, hi: float | None,
                  windows: Sequence[WindowFigure]) -> tuple[float, float]:
    """The knee goodput's 95% interval: (lo, hi) from its own window(s) widened by the vertical window-to-window
    noise of the configuration's passing windows' goodput (`windows`, e.g. from_interval of each)."""
    return widen(value, lo, hi, vertical(windows))
