"""`sweep plan` runs the simulated prior (issue 29): the same prior a study of the profile runs first
(sweep.study.prior: `sim_profile` on the simulator, virtual driver, CPU), so the plan counts its real survivors and
reads its predicted knees instead of assuming them.

The prior runs in a temporary SQLite database and report folder that are deleted afterwards: the plan writes nothing
(no results.db, no report). Where the prior cannot screen (`prior.cannot_rank`: no calibrated simulator preset for
the profile's GPU and model, or a searched knob the simulator does not model varies), it is not run and
`PlanPrior.why_not` says why in one line; the plan then falls back to its assumption (sweep.views.plan).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.ladder.runner import LadderOutcome
from sweep.ladder.wiring import server_model
from sweep.profile import Profile
from sweep.profile.grid import grid, grid_size
from sweep.store import PriorRecord
from sweep.study import prior
from sweep.study.orchestrator import Orchestrator
from sweep.views.plan import PlanPriorFigures, far_active, prior_screens

Say = Callable[[str], None]


@dataclass(frozen=True)
class PlanPrior:
    """The prior's outcome for the plan: its ranking (best first, rank 0 the defaults) and its wall time, or why it
    was not run."""

    ranked: tuple[PriorRecord, ...] = ()
    seconds: float = 0.0
    why_not: str = ""

    def survivors_line(self) -> str:
        """The configurations the prior keeps, best first, each with its predicted knee ("" when it was not run)."""
        if self.why_not or not self.ranked:
            return ""
        kept = prior.kept(self.ranked)
        return (f"the prior keeps {len(kept)} of {len(prior.ranked_configs(self.ranked))}: "
                + ", ".join(f"{r.label} (predicted knee {r.knee_concurrency:g})" if r.knee_concurrency is not None
                            else r.label for r in kept))

    def figures(self) -> PlanPriorFigures | None:
        """What the plan reads of it (None: not run)."""
        return None if self.why_not else prior.plan_figures(self.ranked, self.seconds)


def plan_needs_prior(profile: Profile) -> bool:
    """Whether the plan depends on the prior's outcome: the study runs it first (search.prior sim, not coupled) and
    its margin screens the space or its predicted knees set the final ladders' short windows (search.far_windows)."""
    return (profile.search.prior == "sim" and profile.search.mode != "coupled"
            and (prior_screens(profile) or far_active(profile)))


def prior_blocked(profile: Profile) -> str | None:
    """Why the plan does not run the prior (one line: it could not screen the space), None when it runs it."""
    return prior.cannot_rank(profile, server_model(profile))


def run_plan_prior(profile: Profile, say: Say | None = None) -> PlanPrior:
    """Run the study's prior for the plan, in a temporary database deleted afterwards; `say` gets one progress line
    per simulated configuration."""
    why = prior_blocked(profile)
    if why is not None:
        return PlanPrior(why_not=why)
    sim = prior.sim_profile(profile)
    total = grid_size(sim.search.space) + (1 if sim.search.baseline else 0)
    started = time.monotonic()
    done = 0

    def on_trial(_: LadderOutcome) -> None:
        nonlocal done
        done += 1
        if say is not None:
            say(f"prior: {done}/{total} configurations simulated ({time.monotonic() - started:.0f} s)")

    name = prior.prior_name(profile.name)
    with tempfile.TemporaryDirectory(prefix="sweep-plan-prior-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'prior.db'}"
        orchestrator = Orchestrator(sim, url, Path(tmp) / "reports", "sim", "virtual", None, check_resources=False)
        try:
            run = orchestrator.knee(name, on_trial=on_trial)
            ranked = prior.ranking(orchestrator.store, run.study_id, name, grid(profile.search.space),
                                   profile.search.prior_margin)
        finally:
            orchestrator.store.close()
    return PlanPrior(tuple(ranked), time.monotonic() - started)
