"""What a study plans to measure: configurations per phase and steps with their length on the driver's clock,
read by the terminal's bars and the live page's ETA, and what it should cost in GPU-hours against the exhaustive
grid (`sweep plan`, issue 29).

With `search.prior: sim` (and a margin, or far windows) `sweep plan` runs the study's prior first
(sweep.study.plan_prior: minutes on the CPU, 5 for interactive's 17 configurations at 120 s windows on 2 shared
cores) and hands its outcome here (`PlanPriorFigures`): the configurations that survive its margin, screened for real
when more than screening's cut of them, and each final ladder's far steps from the prior's predicted knee (under a
real screen, the prior's best as many as the finals take). Without it (`--no-prior`, a space the prior cannot rank,
or the terminal's bars and the live page) the plan assumes as many survive as screening would promote from the
whole grid (4 of interactive's 16; the prior keeps 4 on the simulator), and says so with what each survivor more or
fewer changes. There each final ladder's predicted knee is assumed to lie between two
ladder steps (the prior refines its knee), so far windows (search.far_windows) leave the steps within the far factor
of it full and the rest short; a knee measured again at full length is not planned. The same-winner levers run only
on a tie (search.tie_break: finals measured again; search.screening.ties: screened configurations measured again), and
the plan is an upper bound: they are in the total as if every one tied (a launch and a full window each:
`again_launches`, at most search.screening.ties_max of the screen's), and the cost line names what they add. The
cheaper night's levers (issue 29) are counted from the prior's predicted knees: a screen ladder near the knee
(search.screening.near_knee) runs its steps from knee / far_windows.factor up; a refined final ladder with
far_windows.near "short" runs every step short, its refinement full, and one more full window for a bracket end
left short (or, with nothing to refine, its near steps again: the most it takes); SGLang's defaults beyond the prior's
margin are not refined (search.baseline_refine). Launches are billed at LAUNCH_FIRST_S for the first and LAUNCH_S
for each later one (SGLang 0.5.17 on the H200, the 8B shape, dummy weights: docs/h200-sample/); GPU-hours count each
server's GPUs (its largest tp_size).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from sweep import engines
from sweep.core.types import ServerConfig
from sweep.profile import Profile
from sweep.profile.grid import grid, grid_size
from sweep.profile.phases import (
    ladder_loads,
    ladder_windows,
    near_knee_start,
    phase_seconds,
    refines,
)

LAUNCH_FIRST_S = 140.0  # the first SGLang launch of a machine (cold caches), seconds
LAUNCH_S = 70.0  # each later launch


@dataclass(frozen=True)
class StudyPlan:
    """The most steps the study can run (SGLang's defaults, measured first; the screen, or only, ladders; the
    finals screening promotes; the soak), and their length on the driver's clock: an upper bound (every ladder
    climbing on past its top and refined to refine.max_steps), which ladders that stop early bring down; the
    terminal shows it as one (`12/≤105`, `ETA ≤`); and the GPU cost with launches."""

    steps: int
    seconds: float
    launches: int = 0
    short_steps: int = 0  # far steps on short windows (search.far_windows)
    gpu_hours: float = 0.0  # windows + launches, x each server's GPUs
    exhaustive_gpu_hours: float = 0.0  # every configuration on full final ladders (and the defaults, the soak)
    prior_basis: str = ""  # what the plan took of the prior: assumed, or from the prior it ran ("" when none)
    tie_break_launches: int = 0  # search.tie_break: the most finals measured again (a launch and a window each)
    tie_break_gpu_hours: float = 0.0  # what those cost when every final ties (in gpu_hours: the plan's most)
    screen_again_launches: int = 0  # search.screening.ties: the most screened configurations measured again
    screen_again_gpu_hours: float = 0.0  # what those cost when every one ties (in gpu_hours: the plan's most)

    @property
    def saved_gpu_hours(self) -> float:
        """What the plan saves against the exhaustive grid."""
        return self.exhaustive_gpu_hours - self.gpu_hours

    def cost_line(self) -> str:
        """The plan's cost in one line."""
        saved = self.saved_gpu_hours
        pct = f" ({saved / self.exhaustive_gpu_hours:.0%})" if self.exhaustive_gpu_hours > 0 else ""
        return (f"about {self.gpu_hours:.1f} GPU-hours with {self.launches} launch{'es' if self.launches != 1 else ''}"
                + (f" ({self.short_steps} far steps on short windows)" if self.short_steps else "")
                + f"; the exhaustive grid (every configuration on full ladders): {self.exhaustive_gpu_hours:.1f} "
                f"GPU-hours, saved {saved:.1f}{pct}" + (f"; {self.prior_basis}" if self.prior_basis else "")
                + (f"; of the total, finals within each other's noise measured again (search.tie_break): of the "
                   f"plan's {self.tie_break_launches} finals at most, a launch and a full window each, about "
                   f"{self.tie_break_gpu_hours:.1f} GPU-hours" if self.tie_break_launches else "")
                + (f"; of the total, the screen's ties measured again (search.screening.ties): of the plan's "
                   f"{self.screen_again_launches} screened at most, a launch and a full window each, about "
                   f"{self.screen_again_gpu_hours:.1f} GPU-hours" if self.screen_again_launches else "")
                + ("; only ties run them" if self.tie_break_launches or self.screen_again_launches else ""))


def planned_configs(prof: Profile, phase: str) -> int:
    """Configurations a phase means to measure: the trial budget (else the grid's size); for the finals after a
    screen, the share screening promotes (search.promoted's cut of them all). With the prior as the screen: the
    configurations assumed to survive its margin (`prior_survivors`), and screening's cut of them."""
    n = prof.search.n_trials or grid_size(prof.search.space)
    sc = prof.search.screening
    if prior_screens(prof):
        n = prior_survivors(prof)
    return sc.kept(n) if screens(prof) and phase == "final" else n


def prior_screens(prof: Profile) -> bool:
    """Whether the simulated prior's margin screens the space (search.prior sim with prior_margin)."""
    return prof.search.prior == "sim" and prof.search.prior_margin is not None and prof.search.mode != "coupled"


def prior_survivors(prof: Profile) -> int:
    """The configurations the plan assumes survive the prior's margin: as many as screening would promote from the
    whole grid (`Screening.kept`; without screening, min_keep)."""
    n = prof.search.n_trials or grid_size(prof.search.space)
    sc = prof.search.screening
    return sc.kept(n) if sc.enabled else min(n, sc.min_keep)


def screens(prof: Profile) -> bool:
    """Whether the plan has a real screen: screening on, and (with the prior as the screen) more survivors than
    screening's cut of them keeps (sweep.study.prior.needs_screen's rule on the assumed survivors)."""
    sc = prof.search.screening
    if not sc.enabled:
        return False
    if not prior_screens(prof):
        return True
    k = prior_survivors(prof)
    return k > sc.kept(k)


def probes(prof: Profile) -> bool:
    """Whether the real screen among the prior's survivors is the probe screen (search.screening.probe): one launch
    and one window of the probe's length each (sweep.study.prior.probes' rule on the profile)."""
    return (prof.search.screening.probe.enabled and prior_screens(prof) and not prof.rate_ladder
            and prof.search.mode != "coupled")


def screen_windows(prof: Profile, knee: float | None = None) -> tuple[int, float]:
    """(windows, driver seconds) of one screened configuration: a probe's one window, else a screen ladder's (with
    search.screening.near_knee and the prior's predicted `knee`: its steps from near_knee_start on)."""
    if probes(prof):
        return 1, phase_seconds(prof, "probe")
    n = ladder_windows(prof, "screen")
    if prof.search.prior == "sim" and prof.search.mode != "coupled":  # the runner's rule (profile.phases)
        n = len(prof.ladder) - near_knee_start(prof, prof.ladder, knee)
    return n, n * phase_seconds(prof, "screen")


def _probed(prof: Profile) -> str:
    return " by probes (one window each at its predicted knee's step)" if probes(prof) else ""


def far_active(prof: Profile) -> bool:
    """Whether final ladders run far steps short (search.far_windows with the prior's predicted knees)."""
    fw = prof.search.far_windows
    return prof.search.prior == "sim" and fw.enabled and fw.fraction < 1 and prof.search.mode != "coupled"


def full_ladder_steps(prof: Profile) -> int:
    """Of a final ladder's steps (its climb past the top included), how many run full windows with far windows on:
    those within the far factor of a predicted knee between two adjacent steps (the most over the ladder)."""
    loads = ladder_loads(prof)
    if len(loads) < 2:
        return len(loads)
    fw = prof.search.far_windows
    knees = [math.sqrt(a * b) for a, b in zip(loads, loads[1:], strict=False)]
    return max(sum(not fw.far(x, k) for x in loads) for k in knees)


def short_seconds(prof: Profile) -> float:
    """A far step's short window on the driver's clock."""
    w = prof.window
    return w.warmup_seconds + w.measure_seconds * prof.search.far_windows.fraction + w.drain_seconds


def final_ladder(prof: Profile, knee: float | None = None, refined: bool = True, assumed: bool = False,
                 ) -> tuple[int, int]:
    """(full windows, short windows) of one final ladder at most, for the prior's predicted `knee` (None: no
    prediction, every step full; `assumed`: a knee between the two adjacent steps that leave the most steps full);
    `refined` False: not refined (search.baseline_refine). Refinement windows are always full; with
    far_windows.near "short" on a refined ladder every step is short, and one full window measures a bracket end
    left on a short one again, or, with no bracket to refine, the steps near the knee are measured again at full
    length (the most of the two)."""
    refine_n = prof.refine.max_steps if refined and refines(prof, "final") else 0
    climbed = len(ladder_loads(prof))
    if not far_active(prof) or (not assumed and (knee is None or knee <= 0)):
        return climbed + refine_n, 0
    short = climbed - full_ladder_steps(prof) if knee is None or knee <= 0 else short_steps_at(prof, knee)  # assumed
    if prof.search.far_windows.near == "short" and refine_n:  # every step short; full: the refinement and a bracket
        return max(refine_n + 1, climbed - short), climbed  # end again, or with nothing to refine the near steps again
    return climbed - short + refine_n, short


def configs_launches(prof: Profile, n: int) -> int:
    """Launches that measure `n` configurations of the grid, one ladder each: one per configuration, except that
    configurations differing only in knobs the engine updates live (Dialect.live_knobs) share one where the whole
    grid is measured."""
    dialect = engines.get(prof.server.engine)
    if not dialect.live_knobs or n != grid_size(prof.search.space):
        return n
    space = grid(prof.search.space)
    configs = [ServerConfig.from_mapping(dict(zip(space, values, strict=True)))
               for values in itertools.product(*space.values())]
    return dialect.launches(configs)


def launch_seconds(launches: int) -> float:
    """Seconds of `launches` server starts on one machine."""
    return 0.0 if launches <= 0 else LAUNCH_FIRST_S + LAUNCH_S * (launches - 1)


@dataclass(frozen=True)
class PlanPriorFigures:
    """What the plan reads of a prior it ran (sweep.study.plan_prior): the predicted knee of each configuration
    that survives the margin, best simulated first; the defaults' predicted knee; how long the prior took."""

    survivor_knees: tuple[float | None, ...]
    defaults_knee: float | None
    seconds: float
    ranked: int  # configurations the prior ranked
    defaults_beyond: bool = False  # the prior puts SGLang's defaults beyond its margin (search.baseline_refine)


def short_steps_at(prof: Profile, knee: float | None) -> int:
    """A final ladder's far steps on short windows for a predicted knee (0: far windows off, or no prediction)."""
    if not far_active(prof) or knee is None or knee <= 0:
        return 0
    return sum(prof.search.far_windows.far(x, knee) for x in ladder_loads(prof))


def study_plan(prof: Profile, prior: PlanPriorFigures | None = None) -> StudyPlan:
    """The whole study's steps, driver seconds and GPU cost, every phase it will run; with `prior` (the prior run
    for the plan), its real survivors and predicted knees in place of the assumption."""
    base = prof.search.baseline and prof.search.mode != "coupled"
    if prior is None or not (prior_screens(prof) or far_active(prof)):
        screened = screens(prof)
        first_n = planned_configs(prof, "screen" if screened else "final")
        finals_n = planned_configs(prof, "final") if screened else first_n
        finals = [final_ladder(prof, assumed=True)] * (finals_n + (1 if base else 0))
        return _plan(prof, [screen_windows(prof)] * first_n if screened else [], first_n, finals,
                     assumed(prof, screened))
    sc = prof.search.screening
    n = prof.search.n_trials or grid_size(prof.search.space)
    knees = list(prior.survivor_knees[:n])
    k = len(knees)
    margin = prof.search.prior_margin if prior_screens(prof) else None
    screened = sc.enabled and (margin is None or k > sc.kept(k))  # sweep.study.prior.needs_screen's rule
    final_knees = knees[:sc.kept(k)] if screened else knees
    told = (f"from the simulated prior, run for this plan ({prior.seconds:.0f} s on this CPU): it "
            + (f"keeps {k} of {prior.ranked} configurations within its {margin:.0%} margin, " if margin is not None
               else f"ranks {prior.ranked} configurations (no margin: all measured), ")
            + (f"screened for real{_probed(prof)} (the finals' far steps read from the prior's best {len(final_knees)})"
               if screened else "no real screen") + "; far steps from its predicted knees")
    finals = [final_ladder(prof, knee) for knee in final_knees]
    if base:
        unrefined = prof.search.baseline_refine == "could_tie" and prior.defaults_beyond
        finals.append(final_ladder(prof, prior.defaults_knee, refined=not unrefined))
        if unrefined:
            told += "; SGLang's defaults not refined (the prior puts them beyond its margin: search.baseline_refine)"
    screen = [screen_windows(prof, knee) for knee in knees] if screened else []
    return _plan(prof, screen, k, finals, told)


def assumed(prof: Profile, screened: bool) -> str:
    """What the plan assumes of a prior it did not run ("" when there is no prior screen)."""
    if not prior_screens(prof):
        return ""
    k = prior_survivors(prof)
    gpus = prof.search.space.largest_tp() or 1
    extra = screen_windows(prof)[1] + LAUNCH_S
    return (f"assumes the simulated prior keeps {k} configuration{'s' if k != 1 else ''} within its "
            f"{prof.search.prior_margin:.0%} margin (as many as screening would promote from the whole "
            f"grid){', screened for real' + _probed(prof) if screened else ', no real screen'}; each survivor more or "
            f"fewer: about {extra * gpus / 3600:.2f} GPU-hours more or less")


def _plan(prof: Profile, screen: list[tuple[int, float]], first_n: int, finals: list[tuple[int, int]],
          prior_basis: str) -> StudyPlan:
    """The plan of a study whose first phase measures `first_n` configurations, on a screen of `screen` (windows,
    driver seconds) each when there is one, and whose final ladders (the defaults' included) run `finals` (full,
    short) windows each."""
    screened = bool(screen)
    soak = 1 if prof.soak.enabled else 0
    coupled = prof.search.mode == "coupled"
    steps_s = sum(full * phase_seconds(prof, "final") + short * short_seconds(prof) for full, short in finals)
    base_n = 1 if prof.search.baseline and not coupled else 0
    windows = sum(full + short for full, short in finals)
    steps_s += sum(sec for _, sec in screen)
    windows += sum(w for w, _ in screen)
    finals_launched = len(finals) - base_n if screened else 0
    steps_s += soak * phase_seconds(prof, "soak")
    launches = ((len(prof.ladder) * first_n if coupled else configs_launches(prof, first_n)) + finals_launched
                + base_n + soak)
    gpus = prof.search.space.largest_tp() or 1
    again, screen_again = again_launches(prof, first_n if screened else 0, len(finals))
    windows, launches = windows + again + screen_again, launches + again + screen_again
    steps_s += (again + screen_again) * phase_seconds(prof, "final")
    gpu_h = (steps_s + launch_seconds(launches)) * gpus / 3600
    one = (LAUNCH_S + phase_seconds(prof, "final")) * gpus / 3600  # a launch and a full window
    return StudyPlan(windows + soak, steps_s, launches, sum(short for _, short in finals), gpu_h,
                     exhaustive_gpu_hours(prof), prior_basis, again, again * one, screen_again, screen_again * one)


def again_launches(prof: Profile, screened: int, finals: int) -> tuple[int, int]:
    """(finals, screened configurations) measured again at most, a launch and one full window at the knee load each:
    search.tie_break's of the plan's `finals` final ladders (SGLang's defaults included), search.screening.ties' of
    its `screened` configurations; all of them when they all tie, none with one or the lever off (closed-loop
    ladder searches only, as sweep.study.search runs them)."""
    if prof.rate_ladder or prof.search.mode == "coupled":
        return 0, 0
    finals_again = finals if prof.search.tie_break.enabled and finals >= 2 else 0
    sc = prof.search.screening
    screen_again = screened if sc.ties and not probes(prof) and screened >= 2 else 0
    screen_again = min(screen_again, sc.ties_max) if sc.ties_max is not None else screen_again
    return finals_again, screen_again


def exhaustive_gpu_hours(prof: Profile) -> float:
    """Every configuration of the search (and SGLang's defaults, where measured) on a full final ladder with its
    climb and refinement, and the soak: the grid without screening, prior or short windows."""
    n = prof.search.n_trials or grid_size(prof.search.space)
    base_n = 1 if prof.search.baseline and prof.search.mode != "coupled" else 0
    soak = 1 if prof.soak.enabled else 0
    seconds = (n + base_n) * ladder_windows(prof, "final") * phase_seconds(prof, "final") \
        + soak * phase_seconds(prof, "soak")
    launches = (n * len(prof.ladder) if prof.search.mode == "coupled" else configs_launches(prof, n)) + base_n + soak
    return (seconds + launch_seconds(launches)) * (prof.search.space.largest_tp() or 1) / 3600
