"""What one launch measures and what one configuration's ladder produced: the records LadderRunner
(sweep.ladder.runner) takes and returns, and the callbacks it calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweep.analysis.boundary import Boundary
from sweep.analysis.knee import KneeResult
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core import interrupt
from sweep.core.types import Placement, ServerConfig, WindowResult
from sweep.ladder.far_windows import FarPlan, KneeGuess
from sweep.ladder.launch import ServerCallback
from sweep.launchers.base import ServerHandle
from sweep.profile import Arrival, Window

if TYPE_CHECKING:
    from sglang_sim.params import MemoryPlan
    from sweep.ladder.crosscheck_step import CrossChecker  # the reference client: loaded where it is enabled

__all__ = ["Climb", "LadderHooks", "LadderOutcome", "StartCallback", "StepCallback", "StepJudge", "StepStart",
           "StopCheck"]


@dataclass
class LadderOutcome:
    """What one configuration's ladder produced."""

    config: ServerConfig
    config_id: int
    status: str  # completed | failed | infeasible
    steps: list[LadderStep] = field(default_factory=list)  # every completed step (refinement windows included)
    knee: KneeResult | None = None
    stop_reason: str = ""
    failure: str | None = None
    boundary: Boundary | None = None  # the refined ladder's SLA boundary (None: not refined, or not bracketed)

    @property
    def value(self) -> float | None:
        """The trial value: the knee's goodput (output tok/s), None when infeasible."""
        if self.knee is None or self.knee.point is None:
            return None
        return self.knee.point.goodput_tps


StepCallback = Callable[[ServerConfig, int, LadderStep], None]


@dataclass(frozen=True)
class StepStart:
    """A window about to begin, for progress: `expected_s` and `elapsed()` run on the driver's own clock
    (simulated seconds with the virtual driver), so an ETA is their rate against the wall clock."""

    config: ServerConfig
    concurrency: int
    phase: str  # screen | final | refine | soak
    expected_s: float
    elapsed: Callable[[], float | None]


StartCallback = Callable[[StepStart], None]
StopCheck = Callable[[int, LadderStep], bool]  # step index, step -> True stops the ladder (pruning)
StepJudge = Callable[[WindowResult, RunStats], str]  # a window and its stats -> the run's verdict line


@dataclass(frozen=True)
class LadderHooks:
    """What a LadderRunner calls and carries besides its launcher, driver and store, fixed when it is built (issue
    32: one frozen value at construction, no attributes set later). Every field is optional: a bare runner (tests,
    benches) measures and stores its windows and calls nobody."""

    on_step: StepCallback | None = None  # after each stored step
    on_launch: Callable[[ServerHandle], None] | None = None  # each ready server (the environment row)
    on_step_start: StartCallback | None = None  # before each window (the terminal's bars)
    on_server: ServerCallback | None = None  # each launch's launching, ready/failed and stopped
    placement: Placement | None = None  # the study worker, host and GPU group every row records
    crosscheck: CrossChecker | None = None  # a reference client after every window (profile crosscheck)
    predict: Callable[[ServerConfig], MemoryPlan] | None = None  # each launch's memory plan, stored; infeasible: skipped
    predicted_knee: KneeGuess | None = None  # the simulated prior's knee of a configuration (search.far_windows)


@dataclass(frozen=True)
class Climb:
    """What one launch measures: its concurrencies in order, the phase and its window.

    A judged climb (the soak) offers one fixed `arrival` process instead of the profile's per step, stores
    `judge`'s verdict as each run's reason, runs no cross-check and is never ranked by a knee. A refinement window
    of an open-loop rate ladder offers a fixed `arrival` too: the bisected rate.
    """

    ladder: tuple[int, ...]
    phase: str
    window: Window
    arrival: Arrival | None = None
    judge: StepJudge | None = None
    complete: str = "ladder complete"  # the stop_reason of a climb that ran every step
    climb_on: bool = False  # a final ladder that passes its top step climbs on past it (sweep.ladder.climb_on)
    far: FarPlan | None = None  # steps far from the prior's predicted knee run short windows (sweep.ladder.far_windows)
    again: bool = False  # a tie-break re-measure (search.tie_break): its loads at full length, nothing past them
    refine: bool = True  # a final ladder bisects its bracket (section refine); False: the study said not this one
    # a screen ladder started near the prior's predicted knee (search.screening.near_knee): the steps below it it
    # skipped, measured downward when none of its steps passes its SLA, and the knee it started from
    skipped: tuple[int, ...] = ()
    predicted_knee: float | None = None


def orchestrator_failure(exc: BaseException) -> str:
    """One line saying why the orchestrator (not the configuration) stopped: the signal, or the error."""
    if isinstance(exc, KeyboardInterrupt):
        return f"interrupted by {interrupt.received(exc).name}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
