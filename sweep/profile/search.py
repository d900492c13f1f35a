"""The search over server configurations: the space of knob values, screening, the sampler and its budget."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from sweep.core.types import KNOB_NAMES, SchedulePolicy
from sweep.profile.base import DAY_S, MAX_CONCURRENCY, MAX_GRID, MAX_TOKENS
from sweep.profile.base import Strict as _Strict
from sweep.profile.flags import FlagDimension, values_of

# tpe/gp with search.prior sim: the prior's best configurations in place of the random start-up trials
# (Optuna's n_startup_trials default)
PRIOR_STARTUP_TRIALS = 10
MAX_TP = 64  # the largest --tp-size a profile may search (GPUs one server spans)


class IntRange(_Strict):
    low: int = Field(ge=-1, le=MAX_TOKENS, description="smallest value")
    high: int = Field(ge=-1, le=MAX_TOKENS, description="largest value")
    step: int = Field(1, ge=1, le=MAX_TOKENS, description="spacing of the values")

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class FloatRange(_Strict):
    low: float = Field(description="smallest value")
    high: float = Field(description="largest value")
    step: float | None = Field(None, ge=1e-6, description="spacing of the values (none: continuous, for tpe/gp)")

    @model_validator(mode="after")
    def _ordered(self) -> FloatRange:
        if self.low > self.high:
            raise ValueError("low must be <= high")
        return self


# a knob's searched values as a profile gives them: a list, a range, or absent (the server's default)
KnobValues = list[int] | list[float] | list[str] | IntRange | FloatRange | None


class Space(_Strict):
    """One field per ServerConfig knob: a list of values, a range, or absent (server default). Any other flag of
    server.engine_version's SGLang is a dimension too, by its SGLang name (checked against that version's stored
    flag table: an unknown flag, a value of another kind or outside its choices, or a flag the version lacks is one
    line, exit 2, before anything runs): a list, `kv_cache_dtype: [auto, fp8_e5m2]`; a switch (store_true),
    `enable_mixed_chunk: [true, false]`; a range of an int or float flag, `cuda_graph_max_bs: {low: 32, high: 512,
    log: true}` (tpe / gp suggest it, on a log scale with log) or `schedule_conservativeness: {low: 0.5, high: 1.5,
    step: 0.25}` (the grid sampler needs a step); a conditional dimension, `speculative_num_steps: {values: [3, 5],
    when: {speculative_algorithm: EAGLE}}`, searched only where the other dimension has one of those values and left
    to the server elsewhere (a range takes `when` too). dp_size and attention data parallelism are not searched yet."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, allow_inf_nan=False)
    __pydantic_extra__: dict[str, FlagDimension] = Field(init=False)

    max_running_requests: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] | IntRange | None = Field(None,
        description="values of --max-running-requests (list or range; absent: the server's default)")
    mem_fraction_static: list[float] | FloatRange | None = Field(None,
        description="values of --mem-fraction-static, each in 0.05..0.99")
    chunked_prefill_size: list[Annotated[int, Field(ge=-1, le=MAX_TOKENS)]] | IntRange | None = Field(None,
        description="values of --chunked-prefill-size")
    schedule_policy: list[SchedulePolicy] | None = Field(None,
        description="values of --schedule-policy (SGLang's choices; the simulator orders dfs-weight as lpm and "
                    "priority, routing-key, hrrn, shortest-prefill-first as fcfs, and says so)")
    tp_size: list[Annotated[int, Field(ge=1, le=MAX_TP)]] | IntRange | None = Field(None,
        description=f"values of --tp-size, 1..{MAX_TP} (tensor parallel: a server spans this many GPUs; with "
                    "--gpus every worker gets a group of the largest value, and a smaller one leaves the rest "
                    "of its group idle while it runs)")

    @field_validator("mem_fraction_static")
    @classmethod
    def _fraction(cls, v: list[float] | FloatRange | None) -> list[float] | FloatRange | None:
        vals = v if isinstance(v, list) else ([v.low, v.high] if v is not None else [])
        for x in vals:
            if not 0.05 <= x <= 0.99:
                raise ValueError(f"mem_fraction_static {x} outside 0.05..0.99")
        return v

    @field_validator("max_running_requests")
    @classmethod
    def _positive_range(cls, v: list[int] | IntRange | None) -> list[int] | IntRange | None:
        if isinstance(v, IntRange) and not 1 <= v.low <= v.high <= MAX_CONCURRENCY:
            raise ValueError(f"a range within 1..{MAX_CONCURRENCY}")
        return v

    @field_validator("tp_size")
    @classmethod
    def _tp_range(cls, v: list[int] | IntRange | None) -> list[int] | IntRange | None:
        if isinstance(v, IntRange) and not 1 <= v.low <= v.high <= MAX_TP:
            raise ValueError(f"a range within 1..{MAX_TP}")
        return v

    def largest_tp(self) -> int | None:
        """The largest --tp-size the space searches (None: the knob is not searched)."""
        v = self.tp_size
        return None if v is None else max(v) if isinstance(v, list) else v.low + (v.high - v.low) // v.step * v.step

    @field_validator(*KNOB_NAMES)  # a ServerConfig knob without a field here fails at import
    @classmethod
    def _nonempty(cls, v: KnobValues) -> KnobValues:
        if isinstance(v, list) and not v:
            raise ValueError("must list at least one value")
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("lists a value twice")
        return v

    def flag_dims(self) -> dict[str, FlagDimension]:
        """The searched flags beyond the five knobs, by name (their dimensions as sweep.profile.flags types them)."""
        return dict(self.__pydantic_extra__ or {})

    @model_validator(mode="after")
    def _grid_fits(self) -> Space:
        total = 1
        for name in [*type(self).model_fields, *self.flag_dims()]:
            n = _value_count(getattr(self, name))
            if n > MAX_GRID:
                raise ValueError(f"{name} expands to {n} values (at most {MAX_GRID}): use a larger step")
            total *= n
        if total > MAX_GRID:
            raise ValueError(f"the space has {total} configurations (at most {MAX_GRID}): use larger steps")
        return self


def _value_count(v: object) -> int:
    """How many values a knob's or flag's list or range expands to (1 when absent; a continuous range counts 2)."""
    if v is None:
        return 1
    if isinstance(v, list):
        return len(v)
    if not isinstance(v, IntRange | FloatRange):
        vals = values_of(v)
        return 2 if vals is None else len(vals)
    if isinstance(v, IntRange):
        return (v.high - v.low) // v.step + 1
    return 2 if v.step is None else int((v.high - v.low) / v.step + 1e-9) + 1


class Probe(_Strict):
    """The probe screen (issue 29): where the simulated prior is the screen, each survivor it cannot rank apart is
    measured once, at the step of its predicted knee, instead of on a quarter-window ladder."""

    enabled: bool = Field(False, description=(
        "with prior sim and a margin: each survivor screened for real gets one launch and one window at the ladder "
        "step of the prior's predicted knee (the highest step at or below it), of measure_seconds x fraction, in "
        "place of a screen ladder; the cut is taken by those windows (one failing its SLA counts 0; every one "
        "failing: the prior's order) and screen ties are not measured again (screening.ties: each survivor's one "
        "window already is the tie's re-measure). A configuration the prior did not predict gets a screen ladder"))
    fraction: float = Field(1.0, gt=0, le=1, description="the probe's window = window.measure_seconds x fraction")


class Screening(_Strict):
    """Successive halving: short windows over every configuration, long ones for the promising few."""

    enabled: bool = Field(False, description="screen every configuration with short windows first")
    fraction: float = Field(0.25, gt=0, le=1, description="screen window = window.measure_seconds x fraction")
    keep: float = Field(0.25, gt=0, le=1, description="share of feasible screened configurations measured fully")
    min_keep: int = Field(1, ge=1, le=MAX_GRID, description="at least this many configurations get a final ladder")
    ties: bool = Field(False, description=(
        "the screen's leader and every screened configuration the tie rule cannot rank below it (the report's, on "
        "their knee intervals: sweep.analysis.significance) are launched again and their screen knee's load "
        "measured at full length; the cut to the finals is taken among them by those windows"))
    probe: Probe = Field(default_factory=Probe, description="the probe screen (with the prior as the screen)")
    near_knee: bool = Field(False, description=(
        "with prior sim: a screen ladder skips its steps below the prior's predicted knee / far_windows.factor (far "
        "below the knee: they pass, they do not rank) and starts at the next one; when that first step fails, the "
        "skipped steps are measured downward until one passes"))
    ties_max: int | None = Field(None, ge=2, le=MAX_GRID, description=(
        "with ties: measure again at most this many, the leader and the tied configurations closest to it by "
        "ties_order (none: every tied one)"))
    ties_order: Literal["screen", "screen_and_prior"] = Field("screen", description=(
        "which tied configurations fill a ties_max cap after the leader: screen (their screen knee goodput over the "
        "leader's, highest first) or screen_and_prior (the mean of that ratio and their simulated knee goodput over "
        "the best simulated among the tied: the prior's per-configuration error and a screen window's noise are "
        "alike, and its common bias cancels; a configuration the prior did not rank counts its screen ratio twice)"))

    def kept(self, n: int) -> int:
        """How many of `n` screened configurations get a final ladder: the top `keep` share, at least
        `min_keep`, at most all of them (the one cut formula: the search and the study plan both use it)."""
        return min(n, max(self.min_keep, math.ceil(self.keep * n)))


class FarWindows(_Strict):
    """Final-ladder steps far from the knee the simulated prior predicts run shorter windows (issue 29): they draw
    the curve and never decide the answer; a knee that lands on one is measured again at full length first."""

    enabled: bool = Field(True, description=(
        "with prior sim: a final ladder's steps below knee/factor or above knee x factor (the prior's predicted "
        "knee of that configuration) run a window of measure_seconds x fraction; refinement windows, the soak and "
        "a knee that lands on a short window (measured again) run the full window"))
    factor: float = Field(2.0, gt=1, le=64, description="how far from the predicted knee a step is far (x or /)")
    fraction: float = Field(0.25, gt=0, le=1, description="a far step's window = window.measure_seconds x fraction")
    near: Literal["full", "short"] = Field("full", description=(
        "the steps within the factor of the predicted knee: full windows, or short ones where the ladder is refined "
        "(refine.enabled): the refinement's full windows decide the knee, and a bracket end left on a short window "
        "is measured again at full length"))

    def far(self, load: float, predicted_knee: float | None) -> bool:
        """Whether a step at `load` is far from `predicted_knee` (None: no prediction, never far)."""
        if not self.enabled or predicted_knee is None or predicted_knee <= 0:
            return False
        return load < predicted_knee / self.factor or load > predicted_knee * self.factor


class TieBreak(_Strict):
    """Finals within each other's window noise are measured again before one wins (issue 29, the same winner)."""

    enabled: bool = Field(False, description=(
        "after the final ladders: the leader and every final the tie rule cannot rank below it (sweep.analysis"
        ".significance) are launched again and their knee's load measured once more at full length; a load "
        "measured twice counts as the mean of its windows, and the one winner rule decides on that"))


class Search(_Strict):
    space: Space = Field(Space(), description="the knobs and their values (section search.space)")
    sampler: Literal["grid", "tpe", "gp", "auto"] = Field("grid",
        description="grid (every combination), tpe, gp, or auto (grid when it fits n_trials)")
    n_trials: int | None = Field(None, ge=1, le=MAX_GRID,
        description="configurations to measure (default: the whole grid)")
    time_budget_s: float | None = Field(None, gt=0, le=365 * DAY_S,
        description="stop starting configurations when one more would not fit, seconds")
    flatten_threshold: float = Field(0.10, ge=0, le=1, description="min throughput gain per doubling")
    # ladder: one launch per configuration, client concurrency climbs; coupled: the article's experiment,
    # --max-running-requests follows client concurrency step by step (a relaunch per step), other knobs fixed
    mode: Literal["ladder", "coupled"] = Field("ladder",
        description=("ladder (one launch per configuration) or coupled (--max-running-requests "
                     "follows concurrency)"))
    screening: Screening = Field(Screening(), description="successive halving (section search.screening)")
    baseline: bool = Field(True, description=(
        "measure SGLang with none of the searched flags (its own defaults) first, as configuration 0, so the "
        "report can state the winner's gain over the defaults (skipped in coupled mode)"))
    baseline_refine: Literal["always", "could_tie"] = Field("always", description=(
        "SGLang's defaults' final ladder refined always, or (could_tie) only where the simulated prior with a margin "
        "keeps the defaults within it of its best, so that they could tie the winner; outside it their knee is the "
        "ladder's (its bracket is said), the gain over them stated on it"))
    pruning: bool = Field(False, description="stop a ladder whose goodput trails the median of earlier ones")
    prior: Literal["none", "sim"] = Field("none", description=(
        "sim: run the same study on the simulator first (CPU, virtual driver; a separate study labelled "
        "simulated) and measure its best-ranked configurations first (grid: the whole grid in the simulated "
        "order; tpe/gp: its top ones replace the random start-up trials)"))
    prior_margin: float | None = Field(None, gt=0, lt=1, description=(
        "with prior sim: never measure a configuration the simulator ranks more than this share below its best "
        "(or infeasible), and screen for real only among the rest when more survive than the finals take; "
        "0.15-0.25 covers the held-out error bands of docs/calibration.md; none: the prior only orders the "
        "trials. Where the simulator has no calibrated preset for server.sim_gpu and the model, or a searched knob "
        "is one it does not model, nothing is dropped (the study says so)"))
    far_windows: FarWindows = Field(FarWindows(), description=(
        "short windows for final-ladder steps far from the prior's predicted knee (section search.far_windows)"))
    tie_break: TieBreak = Field(TieBreak(), description=(
        "measure tied finals again before one wins (section search.tie_break)"))
    # Several workers share a study: a worker silent for grace_s (default 4 x heartbeat_s) is dead, and its
    # configuration is measured again by another worker (Optuna's trial heartbeat).
    heartbeat_s: float = Field(30.0, ge=1, le=DAY_S, description="how often a worker's running trial says it is alive")
    grace_s: float | None = Field(None, ge=2, le=DAY_S, description="silence after which a worker's trial is failed")

    @model_validator(mode="after")
    def _prior(self) -> Search:
        if self.prior_margin is not None and self.prior != "sim":
            raise ValueError("prior_margin needs prior: sim")
        if self.prior == "sim" and self.mode == "coupled":
            raise ValueError("prior: sim orders configurations of a ladder search; coupled mode has none to order")
        return self
