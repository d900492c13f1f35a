"""What a study cost, from the store alone (issue 29): GPU-hours spent, of which inside the windows that informed the
answer, and what it saved against the exhaustive grid.

- **Spent**: per server launch (a server_configs row), launch + warm-up + windows + drain: the row's created_at to
  its finished_at (a row without one: to its last window's end), times its GPUs (tp_size). On the virtual driver
  (the simulator in virtual time) the wall clock says nothing of a GPU: there it is the driver's clock, the launch's
  startup_s and each window's warm-up, measured window and drain (the profile's drain_seconds, its bound).
- **Informed the answer**: the windows the answer rests on: the winner's knee window, the bracketing fail (the
  winner's lowest failing window above its knee), the winner's refinement windows and the soak's windows; each
  window's started_at to finished_at (virtual driver: its driver-clock length), times its GPUs. Everything else (the
  screen, the other ladders, far steps, the launches) drew the curve or ruled configurations out.
- **Saved**: the exhaustive grid's plan (every configuration and SGLang's defaults on a full final ladder, the soak,
  their launches: sweep.views.plan.exhaustive_gpu_hours) minus what was spent; None without the study's profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweep.analysis.ladder_steps import LadderStep, steps_knee
from sweep.profile import Profile
from sweep.store import ConfigRecord, RunRecord
from sweep.views.plan import exhaustive_gpu_hours
from sweep.views.read_model import StudyReadModel, config_steps

VIRTUAL = "virtual"


@dataclass(frozen=True)
class StudyCost:
    """A study's GPU cost in hours (see the module docstring for each figure); saved_gpu_h is the exhaustive grid's
    GPU-hours minus what was spent (None: no profile to plan the grid from)."""

    spent_gpu_h: float
    informed_gpu_h: float
    exhaustive_gpu_h: float | None
    saved_gpu_h: float | None
    launches: int
    clock: str  # "wall clock" | "driver clock, virtual time"

    def line(self) -> str:
        """The cost in one line."""
        share = f" ({self.informed_gpu_h / self.spent_gpu_h:.0%})" if self.spent_gpu_h > 0 else ""
        saved = self.saved_gpu_h
        vs = ("" if saved is None or self.exhaustive_gpu_h is None else
              f"; the exhaustive grid would take about {self.exhaustive_gpu_h:.2f}: saved {saved:.2f} GPU-hours"
              + (f" ({saved / self.exhaustive_gpu_h:.0%})" if self.exhaustive_gpu_h > 0 else ""))
        return (f"cost: {self.spent_gpu_h:.2f} GPU-hours over {self.launches} launch{'es' if self.launches != 1 else ''} ({self.clock}), "
                f"{self.informed_gpu_h:.2f} of them{share} in windows that informed the answer{vs}")



def study_cost(model: StudyReadModel) -> StudyCost:
    """A study's cost from its read model."""
    w = model.decision.winner
    return cost_of(model.configs, model.runs, model.profile, w.id if w is not None else None)


def cost_of(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord], profile: Profile | None,
            winner_id: int | None) -> StudyCost:
    """The cost of a study's stored launches and windows, `winner_id` the configuration its answer names."""
    virtual = any(r.driver == VIRTUAL for r in runs)
    drain = profile.window.drain_seconds if profile is not None else 0.0
    gpus = {c.id: c.config.tp_size or 1 for c in configs}
    launched = [c for c in configs if c.created_at is not None]
    runs_of: dict[int, list[RunRecord]] = {}
    for r in runs:
        runs_of.setdefault(r.server_config_id, []).append(r)
    spent = sum(launch_seconds(c, runs_of.get(c.id, []), virtual, drain) * gpus[c.id] for c in launched) / 3600
    flatten = profile.search.flatten_threshold if profile is not None else 0.10
    informed = sum(window_seconds(r, virtual, drain) * gpus.get(r.server_config_id, 1)
                   for r in informing_runs(configs, runs, winner_id, flatten)) / 3600
    exhaustive = exhaustive_gpu_hours(profile) if profile is not None else None
    return StudyCost(spent, informed, exhaustive, None if exhaustive is None else exhaustive - spent, len(launched),
                     "driver clock, virtual time" if virtual else "wall clock")


def window_seconds(run: RunRecord, virtual: bool, drain: float) -> float:
    """One window's GPU seconds: its stored start to end; on the virtual driver, warm-up + window + drain."""
    if virtual:
        st = run.stats
        return 0.0 if st is None else float(st.warmup_s or 0.0) + float(st.window_s or 0.0) + drain
    if run.started_at is None or run.finished_at is None:
        return 0.0
    return max(0.0, (run.finished_at - run.started_at).total_seconds())


def launch_seconds(config: ConfigRecord, runs: Sequence[RunRecord], virtual: bool, drain: float) -> float:
    """One launch's GPU seconds: created to finished (or its last window's end); virtual: startup + windows."""
    if virtual:
        return float(config.startup_s or 0.0) + sum(window_seconds(r, True, drain) for r in runs)
    end = config.finished_at or max((r.finished_at for r in runs if r.finished_at is not None), default=None)
    if config.created_at is None or end is None:
        return 0.0
    return max(0.0, (end - config.created_at).total_seconds())


def informing_runs(configs: Sequence[ConfigRecord], runs: Sequence[RunRecord], winner_id: int | None,
                   flatten_threshold: float) -> list[RunRecord]:
    """The windows the answer rests on: the winner's knee window and bracketing fail, its refinement windows, and
    the soak's windows."""
    by_id = {r.id: r for r in runs}
    out = [r for r in runs if r.phase == "soak" and r.status == "completed"]
    if winner_id is None:
        return out
    steps = config_steps(configs, runs).get(winner_id, [])
    knee_run = knee_window(steps, flatten_threshold)
    if knee_run is None:
        return out
    fails = [s for s in steps if not s.stats.passes_sla and s.load > knee_run.load]
    bracket = min(fails, key=lambda s: s.load) if fails else None
    ids = {knee_run.run_id} | ({bracket.run_id} if bracket is not None else set())
    ids |= {s.run_id for s in steps if s.phase == "refine"}
    return out + [by_id[i] for i in sorted(ids) if i in by_id]


def knee_window(steps: Sequence[LadderStep], flatten_threshold: float) -> LadderStep | None:
    """The window find_knee chose among a configuration's steps (None: no knee)."""
    k = steps_knee(steps, flatten_threshold)
    return None if k.index is None else steps[k.index]
