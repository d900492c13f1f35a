"""Issue 29, the answer in one night: the simulated prior as the screen, short windows far from the predicted knee
(never the answer), and what a study costs against the exhaustive grid."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.knee import KneeResult, StepPoint
from sweep.analysis.ladder_steps import LadderStep, knee_on_short, ladder_knee, steps_knee
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import load_profile
from sweep.profile.phases import phase_window
from sweep.store import PriorRecord
from sweep.study import prior
from sweep.study.search import Search
from sweep.views.plan import PlanPriorFigures, launch_seconds, study_plan
from tests.virtual_ladder import virtual_runner

ROOT = Path(__file__).resolve().parents[2]
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _step(run_id: int, c: int, goodput: float, passes: bool, short: bool = False) -> LadderStep:
    stats = RunStats.from_row({"n_started": 500, "n_completed": 500, "goodput_tps": goodput,
                               "goodput_rps": goodput / 100, "output_tps": goodput, "ttft_p99_ms": 100.0,
                               "retractions": 0, "passes_sla": passes, "goodput_ci_low": goodput / 100 * 0.98,
                               "goodput_ci_high": goodput / 100 * 1.02, "client_bound": False})
    return LadderStep(run_id, c, "final", stats, short=short)


# --- the plan ---------------------------------------------------------------------------------------------------

NO_TIE_LEVERS: dict[str, object] = {"search.tie_break.enabled": False, "search.screening.ties": False}
# the shipped rule before session 13's levers (the plan arithmetic below is that rule's)
BEFORE_LEAN: dict[str, object] = {"search.screening.near_knee": False, "search.screening.ties_max": None,
                                  "search.far_windows.near": "full", "search.far_windows.fraction": 0.25}

def test_interactive_plan_fits_one_night_with_full_windows_where_the_answer_is_decided() -> None:
    """Issue 29's goal: `sweep plan --profile interactive` at most 6 GPU-hours, every re-measure of a tie in the
    total. The prior's outcome is what `sweep plan` runs it to (4 survivors of mrr 128, each predicted to knee at 128;
    SGLang's defaults at 256: sweep.study.plan_prior on this profile)."""
    prof = load_profile(INTERACTIVE)
    figures = PlanPriorFigures(survivor_knees=(128.0,) * 4, defaults_knee=256.0, seconds=300.0, ranked=16)
    plan = study_plan(prof, figures)
    assert plan.gpu_hours <= 6.0, plan.cost_line()
    no_ties = study_plan(load_profile(INTERACTIVE, NO_TIE_LEVERS), figures)
    # the same-winner re-measures are in the total as if every one tied (the plan is an upper bound): a launch and a
    # full window for each of the 2 finals and the 2 screened ones the cap measures again
    assert plan.gpu_hours == pytest.approx(no_ties.gpu_hours + plan.tie_break_gpu_hours + plan.screen_again_gpu_hours)
    assert (plan.tie_break_launches, plan.screen_again_launches) == (2, 2)
    # the shipped rule before session 13 (the whole screen ladder, every tie measured again, full windows near the
    # knee) plans 7.8 on the same prior
    before = study_plan(load_profile(INTERACTIVE, {"search.screening.near_knee": False, "search.screening.ties_max": None,
                                                   "search.far_windows.near": "full", "search.far_windows.fraction": 0.25}),
                        figures)
    assert before.gpu_hours > 7.5 and before.gpu_hours - plan.gpu_hours > 1.5
    # the seed's 15-minute windows stay on every window that decides: refinement, a re-measured end, the soak
    assert prof.window.measure_seconds == 900 and phase_window(prof, "final").measure_seconds == 900
    assert prof.soak.duration_s == 3600 and prof.refine.enabled
    assert plan.exhaustive_gpu_hours > 5 * plan.gpu_hours
    assert "from the simulated prior" in plan.cost_line()


def test_plan_cost_adds_up_and_today_settings_keep_today_plan() -> None:
    prof = load_profile(INTERACTIVE, {"search.prior": "none", "search.prior_margin": None,
                                      "search.screening.min_keep": 2, **NO_TIE_LEVERS, **BEFORE_LEAN})
    plan = study_plan(prof)
    # today's plan: 105 windows, 63,450 driver seconds (17.6 h), 22 launches (defaults, 16 screens, 4 finals, soak)
    assert (plan.steps, round(plan.seconds), plan.launches, plan.short_steps) == (105, 63450, 22, 0)
    assert plan.gpu_hours == pytest.approx((plan.seconds + launch_seconds(plan.launches)) / 3600)
    assert plan.exhaustive_gpu_hours == pytest.approx((17 * 8 * 990 + 3690 + launch_seconds(18)) / 3600)
    assert plan.saved_gpu_hours == pytest.approx(plan.exhaustive_gpu_hours - plan.gpu_hours)
    new = study_plan(load_profile(INTERACTIVE, {**NO_TIE_LEVERS, **BEFORE_LEAN}))
    # with the prior: 4 survivors screened (4 x 4 quarter windows), 1 final, the defaults, the soak; each final ladder
    # (5 steps with the climb, 3 refinements) runs 2 steps near the predicted knee and 3 far ones short
    assert (new.launches, new.short_steps) == (7, 6)
    short_s = 30 + 900 * 0.25 + 60
    assert new.seconds == pytest.approx(16 * short_s + 2 * (5 * 990 + 3 * short_s) + 3690)


# --- the prior as the screen ------------------------------------------------------------------------------------

class _Landscape:
    """A runner whose ladders measure a fixed knee goodput per max_running_requests (the 'real' landscape)."""

    def __init__(self, real: dict[int, float]) -> None:
        self.real = real
        self.measured: list[tuple[str, int]] = []
        self.attempt: int | None = None

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final",
            ladder: Any = None, should_stop: Callable[..., bool] | None = None) -> LadderOutcome:
        mrr = int(config.max_running_requests or 0)
        self.measured.append((phase, mrr))
        g = self.real[mrr]
        point = StepPoint(concurrency=mrr, goodput_rps=g / 100, goodput_tps=g, throughput_tps=g, ttft_p99_ms=100.0,
                          retractions=0, passes=True)
        return LadderOutcome(config, len(self.measured), "completed", knee=KneeResult(0, point, "test"))


def _ranking(sim: dict[int, float], margin: float) -> list[PriorRecord]:
    order = sorted(sim.items(), key=lambda kv: -kv[1])
    top = order[0][1]
    out = []
    for i, (mrr, v) in enumerate(order, 1):
        why = prior.drop_reason(v, top, margin)
        out.append(PriorRecord(rank=i, label=f"mrr={mrr}", knobs_json=json.dumps({"max_running_requests": mrr}),
                               sim_goodput_tps=v, dropped=why is not None, margin=margin, knee_concurrency=mrr,
                               reason=why))
    return out


def test_prior_drops_far_below_its_leader_and_screens_for_real_within_its_error(tmp_path: Path) -> None:
    # The simulator ranks mrr=8 first and mrr=4 5% behind (within its error); 1 and 2 far below. The real server
    # has mrr=4 best: dropping by the prior's rank alone (its top one, what the finals take) loses the true winner.
    sim = {8: 1000.0, 4: 950.0, 2: 500.0, 1: 300.0}
    real = {8: 900.0, 4: 1000.0, 2: 600.0, 1: 300.0}
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [1, 2, 4, 8]}, "search.prior": "sim",
                                "search.prior_margin": 0.15, "search.screening.enabled": True,
                                "search.screening.min_keep": 1, "search.screening.keep": 0.25})
    ranked = _ranking(sim, 0.15)
    assert [r.dropped for r in ranked] == [False, False, True, True]
    assert "below the simulated best" in (ranked[2].reason or "")
    assert prior.needs_screen(prof, ranked)  # 2 survivors, the finals take 1: a real screen among them
    runner = _Landscape(real)
    search = Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", prior_ranking=ranked)  # type: ignore[arg-type]
    result = search.run()
    assert sorted(runner.measured) == [("final", 4), ("screen", 4), ("screen", 8)]  # 1 and 2 never measured
    winner = result.winner()
    assert winner is not None and winner.config.max_running_requests == 4


def test_prior_survivors_that_fit_the_finals_skip_the_real_screen(tmp_path: Path) -> None:
    sim = {8: 1000.0, 4: 700.0, 2: 500.0, 1: 300.0}
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [1, 2, 4, 8]}, "search.prior": "sim",
                                "search.prior_margin": 0.15, "search.screening.enabled": True,
                                "search.screening.min_keep": 1})
    ranked = _ranking(sim, 0.15)
    assert not prior.needs_screen(prof, ranked)
    runner = _Landscape({8: 900.0, 4: 1000.0, 2: 600.0, 1: 300.0})
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", prior_ranking=ranked).run()  # type: ignore[arg-type]
    assert runner.measured == [("final", 8)]  # no quarter-window screen of the whole grid: one final ladder


def test_the_prior_cannot_screen_without_a_calibrated_preset_or_with_a_knob_it_does_not_model() -> None:
    from sglang_sim.shape import choose_model

    prof = load_profile(INTERACTIVE)
    model = choose_model(ROOT / "models" / "llama3-8b-shape")
    assert prior.cannot_rank(prof, model) is None
    why = prior.cannot_rank(load_profile(INTERACTIVE, {"server.sim_gpu": "L40S"}), model)
    assert why is not None and "no calibrated preset for L40S" in why
    why = prior.cannot_rank(prof, choose_model(ROOT / "models" / "tiny-llama"))
    assert why is not None and "no calibrated preset" in why
    aliased = load_profile(INTERACTIVE, {"search.space.schedule_policy": ["lpm", "dfs-weight"]})
    why = prior.cannot_rank(aliased, model)
    assert why is not None and "dfs-weight" in why


# --- short windows far from the predicted knee --------------------------------------------------------------------

def test_a_knee_on_a_short_window_is_not_the_answer_until_measured_at_full_length() -> None:
    steps = [_step(1, 16, 1000, True, short=True), _step(2, 32, 1800, True), _step(3, 64, 2600, True, short=True),
             _step(4, 128, 2000, False, short=True)]
    naive = steps_knee([LadderStep(s.run_id, s.concurrency, s.phase, s.stats) for s in steps], 0.1)
    assert naive.index == 2  # the naive rule answers from c=64's short window
    on_short = knee_on_short(steps, 0.1)
    assert on_short is not None and on_short.concurrency == 64  # it must be measured again first
    k = steps_knee(steps, 0.1)
    assert k.index == 1 and k.point is not None and k.point.concurrency == 32  # until then: the full window
    # measured again at full length: it fails there, the answer stays c=32, and nothing is left to re-measure
    again = [*steps, _step(5, 64, 2100, False)]
    assert knee_on_short(again, 0.1) is None
    knee = ladder_knee(again, 0.1)
    assert knee is not None and knee.concurrency == 32 and knee.goodput_tps == 1800
    # measured again and passing: the full window is the knee
    passed = [*steps, _step(5, 64, 2400, True)]
    assert knee_on_short(passed, 0.1) is None
    k = steps_knee(passed, 0.1)
    assert k.index == 4 and k.point is not None and k.point.goodput_tps == 2400


def test_the_ladder_runs_far_steps_short_and_measures_a_short_knee_again(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"ladder": [2, 4, 8], "server.launcher": "sim", "search.far_windows.fraction": 0.5})
    # a predicted knee of 1: steps above 2 are far (short windows); the ladder's knee lands on one
    runner, store, study_id = virtual_runner(prof, tmp_path, 1.0, "far")
    outcome = runner.run(ServerConfig(max_running_requests=8))
    runs = [r for r in store.study_runs(study_id) if r.status == "completed"]
    plan = [(r.concurrency, r.short_window, r.planned_measure_s) for r in runs]
    assert plan[:3] == [(2, False, 3.0), (4, True, 1.5), (8, True, 1.5)]
    assert outcome.knee is not None and outcome.knee.index is not None
    knee_step = outcome.steps[outcome.knee.index]
    assert not knee_step.short and knee_step.concurrency > 2  # the answer rests on a full-length window ...
    again = [r for r in runs if r.concurrency == knee_step.concurrency]
    assert [r.short_window for r in again] == [True, False]  # ... measured again after its short one
    assert "again at full length" in outcome.stop_reason


# --- fewer relaunches -------------------------------------------------------------------------------------------

def test_a_dialect_with_a_live_knob_shares_launches_and_sglang_declares_none() -> None:
    import dataclasses

    from sweep import engines

    assert engines.SGLANG.live_knobs == ()  # SGLang 0.5.17 takes no knob without a restart
    live = dataclasses.replace(engines.SGLANG, name="live-sglang", live_knobs=("schedule_policy",),
                               live_update_path="/update_scheduler")
    engines.register(live)
    try:
        a = ServerConfig(max_running_requests=64, schedule_policy="lpm")
        b = dataclasses.replace(a, schedule_policy="fcfs")
        c = dataclasses.replace(a, max_running_requests=128)
        assert live.launch_key(a) == live.launch_key(b) != live.launch_key(c)
        assert engines.SGLANG.launch_key(a) != engines.SGLANG.launch_key(b)
        assert (live.launches([a, b, c]), engines.SGLANG.launches([a, b, c])) == (2, 3)
        over = {"search.prior": "none", "search.prior_margin": None, "search.space.schedule_policy": ["lpm", "fcfs"]}
        shared = study_plan(load_profile(INTERACTIVE, {**over, "server.engine": "live-sglang"}))
        alone = study_plan(load_profile(INTERACTIVE, over))
        assert alone.launches - shared.launches == 16  # 32 screen ladders on 16 launches
        assert shared.gpu_hours < alone.gpu_hours
    finally:
        engines.unregister("live-sglang")


# --- what a study cost --------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_a_study_cost_adds_up_and_shows_in_the_answer(tmp_path: Path) -> None:
    from sweep.store import Store
    from sweep.study.orchestrator import Orchestrator
    from sweep.views.cost import informing_runs, study_cost, window_seconds
    from sweep.views.read_model import read_study

    prof = load_profile(SMOKE, {"ladder": [2, 8, 64], "search.space": {"max_running_requests": [2, 4]}})
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="virtual").knee("cost")
    model = read_study(Store(f"sqlite:///{tmp_path / 'r.db'}"), run.study_id)
    cost = study_cost(model)
    drain = prof.window.drain_seconds
    windows = [window_seconds(r, True, drain) for r in model.runs]
    starts = sum(c.startup_s or 0.0 for c in model.configs)
    assert cost.launches == 2 and cost.clock.startswith("driver clock")
    assert cost.spent_gpu_h * 3600 == pytest.approx(sum(windows) + starts)  # every launch, window and drain
    informing = informing_runs(model.configs, model.runs, model.decision.winner.id if model.decision.winner else None,
                               prof.search.flatten_threshold)
    winner = model.decision.winner
    assert winner is not None
    knee_load = winner.knee.concurrency
    # the knee's window and the bracketing fail above it, nothing else (no refinement, no soak in smoke)
    fails = [r.concurrency for r in model.runs if r.server_config_id == winner.id and r.stats is not None
             and not r.stats.passes_sla and r.concurrency > knee_load]
    assert fails, "this ladder brackets its knee"
    assert sorted(r.concurrency for r in informing) == [knee_load, min(fails)]
    assert cost.informed_gpu_h * 3600 == pytest.approx(sum(window_seconds(r, True, drain) for r in informing))
    assert 0 < cost.informed_gpu_h < cost.spent_gpu_h
    assert cost.saved_gpu_h == pytest.approx((cost.exhaustive_gpu_h or 0) - cost.spent_gpu_h)
    assert run.answer is not None and run.answer.cost == cost
    assert "**Cost**: " in run.report.markdown.read_text()
    doc = json.loads((run.report.markdown.parent / "answer.json").read_text())
    assert doc["cost"]["launches"] == 2 and doc["cost"]["spent_gpu_h"] == pytest.approx(cost.spent_gpu_h)


@pytest.mark.integration
def test_without_a_calibrated_preset_the_prior_drops_nothing_and_says_so(tmp_path: Path) -> None:
    from sweep.store import Store
    from sweep.study.orchestrator import Orchestrator

    said: list[str] = []

    class Lines:
        def print(self, msg: str, /) -> None:
            said.append(msg)

    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [1, 8]}, "search.prior": "sim",
                                "search.prior_margin": 0.15, "server.sim_gpu": "L40S", "ladder": [2, 8]})
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="virtual", console=Lines()).knee("l40")
    assert any("no calibrated preset for L40S" in line and "screens as without a prior" in line for line in said)
    ranked = Store(f"sqlite:///{tmp_path / 'r.db'}").study_prior(run.study_id)
    assert ranked and not any(r.dropped for r in ranked)  # mrr=1 is far below, but the prior may not screen here
    assert len({c.config.max_running_requests for c in run.result.outcomes}) == 2
