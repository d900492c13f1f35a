"""search.baseline_refine could_tie (issue 29, a night of at most 6 GPU-hours): SGLang's defaults' final ladder is
refined only where the prior's margin keeps them within reach of its best; outside it their knee stays the
ladder's, and the study says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.knee import KneeResult, StepPoint
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import load_profile
from sweep.store import PriorRecord
from sweep.study import prior
from sweep.study.search import Search

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


class _Recording:
    """Every ladder yields a knee equal to max_running_requests; records each run's refine flag."""

    def __init__(self) -> None:
        self.ran: list[tuple[ServerConfig, bool]] = []
        self.attempt: int | None = None

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final", ladder: Any = None,
            should_stop: Any = None, refine: bool = True) -> LadderOutcome:
        self.ran.append((config, refine))
        v = float(config.max_running_requests or 3)
        return LadderOutcome(config, len(self.ran), "completed", [],
                             KneeResult(0, StepPoint(8, v, v, v, 10.0, 0, True), "fake"))


def _ranking(defaults: float, margin: float | None = 0.15) -> list[PriorRecord]:
    out = [PriorRecord(rank=0, label="SGLang defaults", knobs_json="{}", sim_goodput_tps=defaults, margin=margin,
                       knee_concurrency=4.0)]
    for i, (mrr, v) in enumerate([(8, 1000.0), (4, 950.0)], 1):
        out.append(PriorRecord(rank=i, label=f"mrr={mrr}", knobs_json=json.dumps({"max_running_requests": mrr}),
                               sim_goodput_tps=v, margin=margin, knee_concurrency=float(mrr)))
    return out


@pytest.mark.parametrize(("rule", "defaults", "margin", "refined"), [
    ("could_tie", 600.0, 0.15, False),  # 40% below the prior's best: they cannot tie the winner
    ("could_tie", 900.0, 0.15, True),  # 10% below: within the margin, they could tie: refined
    ("always", 600.0, 0.15, True),  # the naive rule refines them whatever the prior says
    ("could_tie", 600.0, None, True),  # a prior with no margin decides nothing
])
def test_the_defaults_are_refined_only_where_they_could_tie(tmp_path: Path, rule: str, defaults: float,
                                                            margin: float | None, refined: bool) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]}, "search.baseline": True,
                                "search.prior": "sim", "search.baseline_refine": rule, "refine.enabled": True})
    runner = _Recording()
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s",  # type: ignore[arg-type]
           prior_ranking=_ranking(defaults, margin)).run()
    base = [r for c, r in runner.ran if c == ServerConfig()]
    assert base == [refined]
    assert all(r for c, r in runner.ran if c != ServerConfig())  # the searched configurations: always refined
    why = prior.defaults_beyond_margin(_ranking(defaults, margin))
    assert (why is not None) == (margin is not None and defaults < 850.0)  # 15% below the best (1000)
    if why is not None:
        assert "40% below the simulated best" in why
