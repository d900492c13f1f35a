"""The arrival processes of a profile, and the open-loop send schedule each one computes.

Every kind is an `ArrivalProcess`: `schedule(window, seed, step)` is None for the closed loop (`concurrency`
users, each sending when its last request ends) and a `SendSchedule` for an open loop (rate, gamma, trace).
A schedule is a sorted numpy array of send-time offsets in seconds from the step's start (t0), computed up
front from a seeded RNG (or a trace file): the same (arrival, seed, step) always yields the same schedule, so
every configuration sees the same arrivals. Latency is counted from these scheduled times, never from the
actual send, so a slow client or a full in-flight cap cannot hide queueing (coordinated omission).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from sweep.profile.base import DAY_S, MAX_CONCURRENCY, MAX_RATE
from sweep.profile.base import Strict as _Strict
from sweep.profile.trace import load_trace, recorded_rate
from sweep.profile.warmup import WarmupRule, open_users
from sweep.profile.window import Window

_BLOCK = 4096
_RATE = f"requests per second (at most {MAX_RATE:,.0f})"
_IN_FLIGHT = "cap on requests in flight; later arrivals wait and their latency counts the wait"


@dataclass(frozen=True)
class SendSchedule:
    """One open-loop step: its send offsets from t0, its warm-up rule and its in-flight cap.

    The window opens when its warm-up ends (sweep.profile.warmup: requests completed, seconds, the arrivals' load,
    the bound), known only while the step runs, so the offsets run to the latest the window can end (the bound plus
    measure_seconds); a driver sends those before the window's actual end. The same (arrival, seed, step) gives the
    same sends, however far the schedule runs. `earliest` is the soonest the window can
    open: its warm-up seconds, its load, the warmup_requests-th send (a request completes after it is sent)."""

    offsets: np.ndarray
    warmup: WarmupRule
    earliest: float
    measure_s: float
    max_in_flight: int

    def needed(self) -> int:
        """The fewest requests the step sends: those scheduled before its window's earliest end."""
        return int(np.searchsorted(self.offsets, self.earliest + self.measure_s, side="left"))


def rng_for(seed: int, step: int) -> np.random.Generator:
    """The schedule RNG of one ladder step: numpy Generator seeded from (workload seed, step)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(step) & 0xFFFFFFFF, 0x5EED])


def mean_gap(offsets: np.ndarray) -> float:
    """The mean gap between consecutive sends of a schedule (0 for fewer than two)."""
    return float(offsets[-1] - offsets[0]) / (len(offsets) - 1) if len(offsets) > 1 else 0.0


class ArrivalProcess(_Strict):
    """How a step's requests are sent; the base of every `arrival` kind."""

    open_loop: ClassVar[bool] = False

    def schedule(self, window: Window, seed: int = 0, step: int = 0) -> SendSchedule | None:
        """The open-loop send schedule of one step (seeded by workload seed and step); None for a closed loop."""
        return None


class ClosedArrival(ArrivalProcess):
    kind: Literal["closed"] = Field("closed",
        description="closed: `concurrency` users, each sends when its previous request ends")
    think_time_s: float = Field(0.0, ge=0, le=DAY_S,
        description="pause of a user between a response and its next request, seconds")


class OpenArrival(ArrivalProcess):
    """An open loop: requests sent at scheduled times whatever the server does, at most max_in_flight at once."""

    open_loop: ClassVar[bool] = True
    max_in_flight: int = Field(1024, ge=1, le=MAX_CONCURRENCY, description=_IN_FLIGHT)

    @property
    def mean_rate(self) -> float | None:
        """The offered rate (requests/s) where the kind has one; None for a trace."""
        return None

    def offsets(self, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
        """Send offsets covering [0, horizon_s) and at least min_count requests; the first request is at 0."""
        rng = rng_for(seed, step)
        parts: list[np.ndarray] = []
        last, count = 0.0, 0
        while last < horizon_s or count < min_count:
            t = last + np.cumsum(self._gaps(rng, _BLOCK))
            if not parts:
                t = np.concatenate(([0.0], t[:-1]))
            parts.append(t)
            last, count = float(t[-1]), count + len(t)
        out = np.concatenate(parts)
        keep = max(int(np.searchsorted(out, horizon_s, side="left")), min_count)
        return out[:keep]

    def _gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise TypeError(f"no gap model for {type(self).__name__}")

    def schedule(self, window: Window, seed: int = 0, step: int = 0) -> SendSchedule:
        """The step's sends before its window's latest end, its warm-up rule and the in-flight cap. Its load: one
        mean gap (1/rate; a trace's own mean) per user (sweep.profile.warmup.open_users: step, at most the cap)."""
        n = window.warmup_requests
        offs = self.offsets(window.warmup_seconds + window.measure_seconds, seed, step, min_count=n + 1)
        gap = 1.0 / self.mean_rate if self.mean_rate else mean_gap(offs)
        nth = float(offs[min(n, len(offs)) - 1]) if n > 0 and len(offs) else 0.0  # the warmup_requests-th send
        rule = WarmupRule.open(window, open_users(step, self.max_in_flight) * gap, nth, self.max_in_flight)
        last_end = rule.bound + window.measure_seconds
        offs = self.offsets(last_end, seed, step, min_count=n + 1)  # the same sends, on to the window's latest end
        earliest = min(rule.bound, max(rule.seconds, rule.load_s, nth))
        return SendSchedule(offs[offs < last_end], rule, earliest, window.measure_seconds, self.max_in_flight)


class RateArrival(OpenArrival):
    """Open loop at `rate` requests/s: evenly spaced (constant) or exponential gaps (poisson)."""

    kind: Literal["constant", "poisson"] = Field(
        description="constant (evenly spaced) or poisson (exponential gaps)")
    rate: float = Field(gt=0, le=MAX_RATE, description=_RATE)
    rates: list[Annotated[float, Field(gt=0, le=MAX_RATE)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")

    @property
    def mean_rate(self) -> float | None:
        return self.rate

    def offsets(self, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
        if self.kind == "constant":  # exact multiples, no cumsum drift
            n = max(int(math.ceil(horizon_s * self.rate - 1e-9)), min_count)
            return np.arange(n, dtype=float) / self.rate
        return super().offsets(horizon_s, seed, step, min_count)

    def _gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.exponential(1.0 / self.rate, n)


class GammaArrival(OpenArrival):
    """Open loop with gamma gaps: mean 1/rate, burstiness by shape (cv = 1/sqrt(shape)); cv > 1 is burstier."""

    kind: Literal["gamma"] = Field("gamma", description="gamma: gamma-distributed gaps (bursty when cv > 1)")
    rate: float = Field(gt=0, le=MAX_RATE, description=_RATE)
    shape: float | None = Field(None, gt=0, description="gamma shape k (1 = poisson)")
    cv: float | None = Field(None, gt=0, description="coefficient of variation of the gaps (alternative to shape)")
    rates: list[Annotated[float, Field(gt=0, le=MAX_RATE)]] | None = Field(
        None, description="offered rate per ladder step (req/s), one per step; overrides rate")

    @model_validator(mode="after")
    def _one_of(self) -> GammaArrival:
        if (self.shape is None) == (self.cv is None):
            raise ValueError("gamma arrivals need exactly one of shape or cv")
        return self

    @property
    def k(self) -> float:
        """The gamma shape, from shape or cv."""
        return self.shape if self.shape is not None else 1.0 / (self.cv or 1.0) ** 2

    @property
    def mean_rate(self) -> float | None:
        return self.rate

    def _gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.gamma(self.k, 1.0 / (self.rate * self.k), n)


class TraceArrival(OpenArrival):
    """Open loop replaying send times: the workload dataset's own (each entry at its own time, in file order), or a
    file of timestamps; `scales` makes the ladder a time-scale ladder (step i at scales[i]× the recorded rate)."""

    kind: Literal["trace"] = Field("trace", description="trace: replay send times from a file")
    path: str | None = Field(None, min_length=1,
        description=("the trace file (timestamps one per line, or a JSONL trace: Mooncake \"timestamp\" ms, "
                     "\"send_at\" s); relative paths are looked up in the profile's folder, then the working "
                     "directory. Omitted, or the dataset's own file: the workload dataset's entries are sent at their "
                     "own times, in file order (a trace replay)"))
    time_scale: float = Field(1.0, ge=1e-6, le=1e6, description="multiply every trace gap (0.5 = twice as fast)")
    scales: list[Annotated[float, Field(gt=0, le=1e4)]] | None = Field(None, description=(
        "a time-scale ladder: one per ladder step, step i replays the trace at scales[i]× its recorded rate "
        "(its gaps divided by it); refined and climbed on like arrival.rates, its load in req/s"))
    _resolved: Path | None = PrivateAttr(None)  # set by load_profile: where `path` (or the dataset) was found
    _start_s: float = PrivateAttr(0.0)  # set by load_profile: the dataset's start_s when it replays the dataset
    _of_dataset: bool = PrivateAttr(False)  # set by load_profile: replays the workload dataset's own send times

    @property
    def file(self) -> Path:
        """The trace file load_profile found (the profile's folder, then the working directory)."""
        return self._resolved or Path(self.path or "")

    @property
    def start_s(self) -> float:
        """Where the replay starts in the trace (the dataset's start_s when it replays the dataset), seconds."""
        return self._start_s

    @property
    def of_dataset(self) -> bool:
        """Whether it replays the workload dataset's entries at their own times (a driver takes the send times
        from the requests; `offsets` reads the same file for plans)."""
        return self._of_dataset

    @property
    def recorded_rps(self) -> float | None:
        """The trace's recorded mean rate (req/s, from its start), before any scale."""
        return _recorded(str(self.file), self._start_s)

    @property
    def mean_rate(self) -> float | None:
        rate = self.recorded_rps
        return rate / self.time_scale if rate is not None else None

    def check_ladder(self, steps: int, has_dataset: bool) -> None:
        """ValueError (one line) when `scales` cannot make a ladder of `steps` steps, or no file gives the times."""
        sc = self.scales
        if sc is not None and len(sc) != steps:
            raise ValueError(f"arrival.scales has {len(sc)} values for a ladder of {steps} steps")
        if sc is not None and any(b <= a for a, b in zip(sc, sc[1:], strict=False)):
            raise ValueError("arrival.scales must be strictly ascending")
        if self.path is None and not has_dataset:
            raise ValueError("arrival: a trace without a path replays the workload dataset's send times: set "
                             "workload.dataset, or arrival.path")

    def step_rates(self) -> list[float]:
        """The offered rate (req/s) of each step of a time-scale ladder: the recorded rate times its scale."""
        rec = self.recorded_rps
        return [rec * s for s in self.scales] if self.scales is not None and rec is not None else []

    def scaled(self, scale: float) -> TraceArrival:
        """This trace at scale× its recorded rate (a time-scale ladder's step)."""
        return self._copy(self.model_copy(update={"time_scale": 1.0 / scale}))

    def at_rate(self, rate: float) -> TraceArrival:
        """This trace scaled to offer `rate` req/s on average (a refinement or climbing window)."""
        rec = self.recorded_rps
        if rec is None:
            raise ValueError(f"{self.file}: a trace whose sends all fall at one instant has no rate to scale")
        return self._copy(self.model_copy(update={"time_scale": rec / rate}))

    def _copy(self, other: TraceArrival) -> TraceArrival:
        other._resolved, other._start_s, other._of_dataset = self._resolved, self._start_s, self._of_dataset
        return other

    def offsets(self, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
        """The whole trace (from its start), whatever the horizon."""
        return load_trace(self.file, self.time_scale, self._start_s)

    def replay(self, window: Window, recorded: np.ndarray, seed: int = 0, step: int = 0) -> SendSchedule:
        """The step's schedule from the requests' own recorded send offsets (seconds from the step's first
        request), at this arrival's time scale."""
        fixed = np.asarray(recorded, dtype=float) * self.time_scale
        return _Fixed(fixed, self).schedule(window, seed, step)


class _Fixed(OpenArrival):
    """A trace's sends given as offsets (TraceArrival.replay), scheduled like any open loop."""

    _offs: np.ndarray = PrivateAttr()
    _rate: float | None = PrivateAttr(None)

    def __init__(self, offs: np.ndarray, trace: TraceArrival):
        super().__init__(max_in_flight=trace.max_in_flight)
        self._offs = offs
        self._rate = None

    def offsets(self, horizon_s: float, seed: int = 0, step: int = 0, min_count: int = 0) -> np.ndarray:
        return self._offs


@lru_cache(maxsize=64)
def _recorded(path: str, start_s: float) -> float | None:
    try:
        return recorded_rate(load_trace(path, 1.0, start_s))
    except (OSError, ValueError):
        return None


Arrival = Annotated[ClosedArrival | RateArrival | GammaArrival | TraceArrival, Field(discriminator="kind")]
