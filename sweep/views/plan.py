"""What a study plans to measure: configurations per phase and steps with their length on the driver's clock,
read by the terminal's bars and the live page's ETA."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.profile import Profile
from sweep.profile.grid import grid_size
from sweep.profile.phases import ladder_windows, phase_seconds


@dataclass(frozen=True)
class StudyPlan:
    """The most steps the study can run (SGLang's defaults, measured first; the screen, or only, ladders; the
    finals screening promotes; the soak), and their length on the driver's clock: an upper bound (every ladder
    climbing on past its top and refined to refine.max_steps), which ladders that stop early bring down; the
    terminal shows it as one (`12/≤105`, `ETA ≤`)."""

    steps: int
    seconds: float


def planned_configs(prof: Profile, phase: str) -> int:
    """Configurations a phase means to measure: the trial budget (else the grid's size); for the finals after a
    screen, the share screening promotes (search.promoted's cut of them all)."""
    n = prof.search.n_trials or grid_size(prof.search.space)
    sc = prof.search.screening
    return sc.kept(n) if sc.enabled and phase == "final" else n


def study_plan(prof: Profile) -> StudyPlan:
    """The whole study's steps and driver seconds, every phase it will run."""
    sc = prof.search.screening
    first_phase = "screen" if sc.enabled else "final"
    # a final ladder may add up to refine.max_steps refinement windows (a final's length each)
    first = planned_configs(prof, first_phase) * ladder_windows(prof, first_phase)
    finals = planned_configs(prof, "final") * ladder_windows(prof, "final") if sc.enabled else 0
    soak = 1 if prof.soak.enabled else 0
    # the defaults' ladder (search.baseline) runs first, on final-length windows, refined like a final
    base = ladder_windows(prof, "final") if prof.search.baseline and prof.search.mode != "coupled" else 0
    seconds = (first * phase_seconds(prof, "screen" if sc.enabled else "final")
               + (finals + base) * phase_seconds(prof, "final") + soak * phase_seconds(prof, "soak"))
    return StudyPlan(base + first + finals + soak, seconds)
