"""`sweep plan` runs the simulated prior (issue 29): the plan counts the prior's real survivors and reads its predicted
knees, the very ones the study's own prior finds; where the prior cannot screen it says so in one line and assumes;
it writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweep.cli import app
from sweep.profile import load_profile
from sweep.store import PriorRecord, Store
from sweep.study import prior
from sweep.study.orchestrator import Orchestrator
from sweep.study.plan_prior import run_plan_prior
from sweep.views.plan import prior_survivors, study_plan

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
# On the simulator (H200, the 8B shape) these rank mrr 8 > 4 > 2 > 1 at about 970, 620, 360, 190 tok/s: a 70% margin
# keeps three. Screening on keeps a quarter (one) for the finals, which is what the plan assumed before it ran the
# prior: "as many survive as screening would promote from the whole grid".
OVER = {"search.space": {"max_running_requests": [1, 2, 4, 8], "mem_fraction_static": [0.85]},
        "search.prior": "sim", "search.prior_margin": 0.7,
        "search.screening": {"enabled": True, "fraction": 0.5, "keep": 0.25, "min_keep": 1}}
SETS = ["search.prior=sim", "search.prior_margin=0.7", "search.space.max_running_requests=[1,2,4,8]",
        "search.screening.enabled=true", "search.screening.keep=0.25"]


def test_the_plan_runs_the_prior_the_study_runs(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, OVER)
    planned = run_plan_prior(prof)
    assert planned.why_not == "" and planned.seconds > 0
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("real")
    store = Store(f"sqlite:///{db}")
    try:
        study = store.get_study_by_name("real")
        assert study is not None
        stored = store.study_prior(study.id)
    finally:
        store.close()

    def view(records: Sequence[PriorRecord]) -> list[tuple[object, ...]]:
        return [(r.rank, r.label, r.dropped, r.sim_goodput_tps, r.knee_concurrency) for r in records]

    assert view(planned.ranked) == view(stored)  # the same prior: the same ranking, survivors and knees
    survivors = [r.label for r in prior.kept(planned.ranked)]
    assert survivors == [r.label for r in prior.kept(stored)] and len(survivors) == 3, survivors
    assert prior_survivors(prof) == 1  # the assumption it replaces would have planned one survivor
    figures = planned.figures()
    assert figures is not None and figures.survivor_knees == tuple(r.knee_concurrency for r in prior.kept(stored))
    ran, assumed = study_plan(prof, figures), study_plan(prof)
    assert "keeps 3 of 4 configurations within its 70% margin, screened for real" in ran.cost_line()
    # three survivors screened, the best quarter (one) on a final ladder: 4 launches; the one-survivor assumption
    # planned no screen and that one final ladder
    assert (ran.launches, assumed.launches) == (4, 1) and ran.steps > assumed.steps


def test_the_plan_writes_nothing_and_prints_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["plan", "--profile", str(SMOKE), *[a for s in SETS for a in ("--set", s)]])
    assert res.exit_code == 0, res.output
    assert "running the simulated prior" in res.output and "prior: 4/4 configurations simulated" in res.output
    assert "keeps 3 of 4 configurations within its 70% margin" in res.output
    assert "the prior keeps 3 of 4: mrr=8 mem=0.85 (predicted knee 8), mrr=4 mem=0.85 (predicted knee 8), mrr=2 " \
        "mem=0.85 (predicted knee 4)" in res.output
    assert list(tmp_path.iterdir()) == []  # no results.db, no report


@pytest.mark.parametrize("over,why", [
    (["server.sim_gpu=L40S"], "prior not run: the simulator has no calibrated preset for L40S with the model "
                              "llama3-8b-shape"),
    (['search.space.schedule_policy=["lpm","priority"]'], "prior not run: search.space.schedule_policy varies over "),
])
def test_where_the_prior_cannot_screen_one_line_says_so_and_the_plan_assumes(over: list[str], why: str) -> None:
    res = CliRunner().invoke(app, ["plan", "--profile", str(SMOKE),
                                   *[a for s in [*SETS, *over] for a in ("--set", s)]])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "prior not run" in ln]
    assert len(lines) == 1 and why in lines[0], res.output
    assert "running the simulated prior" not in res.output
    assert "assumes the simulated prior keeps " in res.output
    assert "within its 70% margin (as many as screening would promote from the whole grid)" in res.output


def test_no_prior_keeps_the_fast_assumption() -> None:
    res = CliRunner().invoke(app, ["plan", "--profile", str(SMOKE), "--no-prior",
                                   *[a for s in SETS for a in ("--set", s)]])
    assert res.exit_code == 0, res.output
    assert "running the simulated prior" not in res.output
    assert "assumes the simulated prior keeps 1 configuration within its 70% margin" in res.output
