"""Issue 29, the same winner: finals the tie rule cannot rank apart are measured again before one wins
(search.tie_break), a load measured twice counts as the mean of its windows, and screen ties go to the finals
(search.screening.ties)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sweep.analysis.knee import ConfigKnee, KneeResult, StepPoint
from sweep.analysis.ladder_steps import LadderStep, ladder_knee, pooled
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import Profile, load_profile
from sweep.store import PriorRecord, Store
from sweep.study.orchestrator import Orchestrator
from sweep.study.search import Search
from sweep.study.tiebreak import Measured, recut, tied_with_leader
from sweep.views.plan import again_launches, study_plan
from sweep.views.read_model import read_study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"


def _step(run_id: int, c: int, goodput: float, passes: bool = True, flagged: bool = False) -> LadderStep:
    stats = RunStats.from_row({"n_started": 500, "n_completed": 500, "goodput_tps": goodput,
                               "goodput_rps": goodput / 100, "output_tps": goodput, "ttft_p99_ms": 100.0,
                               "retractions": 0, "passes_sla": passes, "goodput_rps_ci_low": goodput / 100 * 0.98,
                               "goodput_rps_ci_high": goodput / 100 * 1.02, "client_bound": flagged})
    return LadderStep(run_id, c, "final", stats)


def _knee(goodput: float, half: float) -> ConfigKnee:
    return ConfigKnee(64, goodput, goodput / 100, goodput - half, goodput + half, "final", "test")


# --- a load measured twice ----------------------------------------------------------------------------------------

def test_a_load_measured_twice_is_the_mean_of_its_windows_and_the_knee_moves_off_a_lucky_one() -> None:
    """The first ladder's knee is its lucky 1100 at c=64; measured again at 900, the load's mean (1000) is below c=32's
    1050: the knee rule, on the pooled windows, moves to c=32."""
    first = [_step(1, 16, 600.0), _step(2, 32, 1050.0), _step(3, 64, 1100.0), _step(4, 128, 500.0, passes=False)]
    assert (k := ladder_knee(first, 0.10)) is not None and (k.concurrency, k.goodput_tps) == (64, 1100.0)
    both = [*first, _step(5, 64, 900.0)]
    merged = pooled(both)
    assert [s.concurrency for s in merged] == [16, 32, 64, 128]
    assert merged[2].stats.goodput_tps == pytest.approx(1000.0) and merged[2].stats.passes_sla
    assert (k := ladder_knee(both, 0.10)) is not None and (k.concurrency, k.goodput_tps) == (32, 1050.0)


def test_a_load_that_fails_once_fails_and_a_flagged_window_is_never_averaged_in() -> None:
    merged = pooled([_step(1, 64, 1100.0), _step(2, 64, 1200.0, passes=False)])
    assert len(merged) == 1 and not merged[0].stats.passes_sla
    flagged = pooled([_step(1, 64, 400.0, flagged=True), _step(2, 64, 1000.0)])
    assert sorted(s.stats.goodput_tps or 0 for s in flagged) == [400.0, 1000.0]  # measured again: not a mean
    assert pooled([_step(1, 32, 700.0), _step(2, 64, 900.0)]) == [_step(1, 32, 700.0), _step(2, 64, 900.0)]


# --- who is measured again ----------------------------------------------------------------------------------------

def test_the_leader_and_what_the_tie_rule_cannot_rank_below_it_are_measured_again() -> None:
    a, b, c = (ServerConfig(max_running_requests=m) for m in (32, 64, 128))
    knees = [Measured(a, _knee(1000.0, 100.0)), Measured(b, _knee(1020.0, 100.0)), Measured(c, _knee(600.0, 20.0))]
    assert [m.config for m in tied_with_leader(knees)] == [b, a]  # the leader first; c is ranked apart
    assert tied_with_leader([knees[1], knees[2]]) == []  # nothing tied: no re-measure
    assert tied_with_leader([Measured(a, _knee(1000.0, 1.0)), Measured(b, _knee(1020.0, 1.0))]) == []
    # the screen's ties measured again: the cut's untied members keep their places, the tied fill the rest by their
    # full-length windows
    assert recut([b.knobs()], [(b.knobs(), 900.0), (a.knobs(), 990.0)]) == [a.knobs()]
    assert recut([b.knobs(), c.knobs()], [(b.knobs(), 900.0), (a.knobs(), 990.0)]) == [c.knobs(), a.knobs()]


def test_the_plan_names_the_most_a_tie_break_can_add() -> None:
    prof = load_profile(INTERACTIVE)
    assert prof.search.tie_break.enabled and prof.search.screening.ties
    plan = study_plan(prof)
    off_plan = study_plan(load_profile(INTERACTIVE, {"search.tie_break.enabled": False, "search.screening.ties": False}))
    assert plan.gpu_hours == pytest.approx(off_plan.gpu_hours + plan.tie_break_gpu_hours + plan.screen_again_gpu_hours)
    assert plan.tie_break_launches == 2  # the one final and SGLang's defaults
    assert plan.tie_break_gpu_hours == pytest.approx(2 * (70 + 30 + 900 + 60) / 3600)
    assert "measured again (search.tie_break): of the plan's 2 finals at most" in plan.cost_line()
    # of the screen's 4 survivors, the 2 its cap measures again at their knee load (search.screening.ties_max)
    assert plan.screen_again_launches == 2
    assert plan.screen_again_gpu_hours == pytest.approx(2 * (70 + 30 + 900 + 60) / 3600)
    assert "the screen's ties measured again (search.screening.ties): of the plan's 2 screened" in plan.cost_line()
    uncapped = study_plan(load_profile(INTERACTIVE, {"search.screening.ties_max": None}))
    assert uncapped.screen_again_launches == 4
    off = load_profile(INTERACTIVE, {"search.tie_break.enabled": False, "search.screening.ties": False})
    assert again_launches(off, 4, 2) == (0, 0) and "measured again" not in study_plan(off).cost_line()
    assert again_launches(prof, 1, 1) == (0, 0)  # one of each: nothing to tie with


# --- on the simulator ---------------------------------------------------------------------------------------------


def _drift_pair(drift: float, seeds: list[int], levers: dict[str, object]) -> Profile:
    """The smoke profile on one configuration under two drift seeds (--random-seed, --sim-speed-drift): a pair whose
    knees tie within the window noise; ladder 4 -> 8, 20 s windows, no defaults; `levers` on top."""
    return load_profile(SMOKE, {
        "ladder": [4, 8], "search.baseline": False,
        "window.measure_seconds": 20, "window.drain_seconds": 5, "window.warmup_seconds": 10,
        "window.warmup_requests": 20,
        "server.extra_args": ["--load-format", "dummy", "--sim-speed-drift", str(drift),
                              "--sim-speed-drift-period-s", "30"],
        "search.space": {"max_running_requests": [8], "random_seed": seeds}, **levers})

@pytest.mark.integration
def test_a_tie_break_on_the_simulator_names_the_winner_the_one_noisy_final_knee_did_not(tmp_path: Path) -> None:
    """One server configuration under two drift seeds (--random-seed, --sim-speed-drift 20%): a pair whose knees tie
    within the window noise. Their first final ladders rank seed 436 first (987 against 976 tok/s at c=8: the naive
    rule, one noisy final knee); the tie-break measures c=8 again on a fresh launch of each (1217 and 921), and by the
    mean of each load's windows seed 435 wins. The re-measured windows are stored like any window (final, on launches
    of their own) and the answer says what the tie-break decided."""
    prof = _drift_pair(0.2, [435, 436], {"search.tie_break": {"enabled": True}})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("tie")
    with Store(url) as store:
        model = read_study(store, run.study_id)
    seed = {c.id: c.config.flags["random_seed"] for c in model.configs}
    first = {seed[c.id]: c.id for c in sorted(model.configs, key=lambda c: c.id) if seed[c.id] not in
             {seed[x.id] for x in model.configs if x.id < c.id}}
    at8 = {c.id: [r.stats.goodput_tps or 0.0 for r in model.runs
                  if r.server_config_id == c.id and r.concurrency == 8 and r.stats is not None] for c in model.configs}
    assert len(model.configs) == 4 and all(len(v) == 1 for v in at8.values())  # two ladders, two re-measures
    again = {seed[c.id]: c.id for c in model.configs if c.id not in first.values()}
    naive = max(first, key=lambda s: at8[first[s]][0])
    assert naive == 436  # the one noisy final knee picks 436
    assert model.winner is not None and seed[model.winner.id] == 435  # the re-measure rule picks 435
    assert model.winner.knee.goodput_tps == pytest.approx((at8[first[435]][0] + at8[again[435]][0]) / 2, rel=1e-6)
    assert run.answer is not None and run.answer.tie_break is not None
    tb = run.answer.tie_break
    assert (tb.first_winner, tb.winner, tb.changed) == (first[436], first[435], True)
    assert set(tb.remeasured) == set(first.values())
    report = run.report.markdown.read_text()
    assert "**Tie-break**" in report and "changed the winner from mrr=8 random_seed=436 to mrr=8 random_seed=435" in report
    doc = json.loads((run.report.markdown.parent / "answer.json").read_text())
    assert doc["tie_break"] == {"remeasured": sorted(first.values()), "first_winner": first[436], "winner": first[435]}


# --- screen ties ------------------------------------------------------------------------------------------------------

class _Screened:
    """A runner whose screen ladders measure a fixed knee per max_running_requests (`real`) and whose full-length
    windows measured again measure `again`; the screen knees, with an interval of +-half, are what the study's store
    would give (`knees_of`)."""

    def __init__(self, real: dict[int, float], again: dict[int, float], half: float) -> None:
        self.real, self.again_of, self.half = real, again, half
        self.measured: list[tuple[str, int]] = []
        self.attempt: int | None = None

    def _outcome(self, config: ServerConfig, g: float) -> LadderOutcome:
        mrr = int(config.max_running_requests or 0)
        point = StepPoint(concurrency=mrr, goodput_rps=g / 100, goodput_tps=g, throughput_tps=g, ttft_p99_ms=100.0,
                          retractions=0, passes=True)
        return LadderOutcome(config, len(self.measured), "completed", knee=KneeResult(0, point, "test"))

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final", ladder: object = None,
            should_stop: object = None) -> LadderOutcome:
        self.measured.append((phase, int(config.max_running_requests or 0)))
        return self._outcome(config, self.real[int(config.max_running_requests or 0)])

    def run_again(self, config: ServerConfig, loads: list[int], trial_number: int | None = None,
                  phase: str = "final") -> LadderOutcome:
        self.measured.append((f"{phase} again at {loads[0]}", int(config.max_running_requests or 0)))
        return self._outcome(config, self.again_of[int(config.max_running_requests or 0)])

    def knees_of(self, phase: str) -> list[Measured]:
        return [Measured(ServerConfig(max_running_requests=m), replace(_knee(self.real[m], self.half), concurrency=m))
                for p, m in self.measured if p == phase]


@pytest.mark.parametrize(("ties", "half", "finals", "again"), [
    (False, 100.0, [8], []), (True, 100.0, [4], [("screen again at 4", 4), ("screen again at 8", 8)]),
    (True, 5.0, [8], [])])
def test_the_screens_ties_are_measured_again_at_full_length_and_the_cut_is_taken_by_those_windows(
        tmp_path: Path, ties: bool, half: float, finals: list[int], again: list[tuple[str, int]]) -> None:
    """mrr 8 and 4 are screened and the cut takes 1: 1000 against 960 tok/s on quarter windows, so the naive cut sends
    8. With intervals of +-100 the tie rule cannot rank 4 below 8: with screening.ties each is measured again at its
    knee load at full length (8: 900, 4: 990) and 4 goes to the finals; +-5 ranks them apart: the cut stands."""
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8]},
                                "search.screening": {"enabled": True, "keep": 0.25, "min_keep": 1, "ties": ties}})
    runner = _Screened({8: 1000.0, 4: 960.0}, {8: 900.0, 4: 990.0}, half)
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", knees_of=runner.knees_of).run()  # type: ignore[arg-type]
    assert [m for p, m in runner.measured if p == "final"] == finals
    assert sorted(x for x in runner.measured if "again" in x[0]) == again


def test_the_ties_cap_keeps_the_leader_and_the_ties_closest_to_it() -> None:
    """search.screening.ties_max: of three configurations tied with the leader, a cap of 2 measures the leader and the
    closest one again; a cap by the screen's order (or the prior's) would keep the first listed, here the farthest."""
    a, b, c, d = (ServerConfig(max_running_requests=m) for m in (16, 32, 64, 128))
    knees = [Measured(a, _knee(940.0, 100.0)), Measured(b, _knee(980.0, 100.0)), Measured(c, _knee(1000.0, 100.0)),
             Measured(d, _knee(960.0, 100.0))]
    assert [m.config for m in tied_with_leader(knees)] == [c, b, d, a]
    assert [m.config for m in tied_with_leader(knees, 2)] == [c, b]
    assert [m.config for m in tied_with_leader(knees, 3)] == [c, b, d]
    assert tied_with_leader(knees[:1], 2) == []


def test_a_capped_screen_measures_again_only_the_leader_and_its_closest_tie(tmp_path: Path) -> None:
    """mrr 2, 4 and 8 screened within each other's noise; ties_max 2: the leader (8) and the closest (4) are measured
    again, 2 is not; the cut is then taken by those windows (4: 990 against 8: 900)."""
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8]},
                                "search.screening": {"enabled": True, "keep": 0.25, "min_keep": 1, "ties": True,
                                                     "ties_max": 2}})
    runner = _Screened({8: 1000.0, 4: 960.0, 2: 930.0}, {8: 900.0, 4: 990.0, 2: 2000.0}, 100.0)
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", knees_of=runner.knees_of).run()  # type: ignore[arg-type]
    assert sorted(x for x in runner.measured if "again" in x[0]) == [("screen again at 4", 4), ("screen again at 8", 8)]
    assert [m for p, m in runner.measured if p == "final"] == [4]


def test_a_cap_filled_by_the_screen_and_the_prior_keeps_the_tie_the_prior_ranks_high() -> None:
    """ties_order screen_and_prior: of 3 ties behind the leader (1000), 4 is closest on the screen (980) but the prior
    puts it 30% below the best simulated; 2 trails on the screen (930) and the prior ranks it best: the mean of the
    two ratios (4: 0.84, 2: 0.965) keeps 2 under a cap of 2, where the screen alone keeps 4."""
    a, b, c = (ServerConfig(max_running_requests=m) for m in (2, 4, 8))
    knees = [Measured(c, _knee(1000.0, 100.0)), Measured(b, _knee(980.0, 100.0)), Measured(a, _knee(930.0, 100.0))]
    sim = {2: 1000.0, 4: 700.0, 8: 950.0}

    def prior_of(config: ServerConfig) -> float | None:
        return sim[int(config.max_running_requests or 0)]

    assert [m.config for m in tied_with_leader(knees, 2)] == [c, b]
    assert [m.config for m in tied_with_leader(knees, 2, prior_of)] == [c, a]
    assert [m.config for m in tied_with_leader(knees, None, prior_of)] == [c, b, a]  # no cap: every tie, as before
    assert [m.config for m in tied_with_leader(knees, 2, lambda _c: None)] == [c, b]  # no prior value: the screen


def test_a_study_fills_its_ties_cap_by_the_screen_and_the_prior(tmp_path: Path) -> None:
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8]},
                                "search.screening": {"enabled": True, "keep": 0.25, "min_keep": 1, "ties": True,
                                                     "ties_max": 2, "ties_order": "screen_and_prior"}})
    ranked = [PriorRecord(rank=i, label=f"mrr={m}", knobs_json=json.dumps({"max_running_requests": m}),
                          sim_goodput_tps=v, knee_concurrency=float(m))
              for i, (m, v) in enumerate([(2, 1000.0), (8, 950.0), (4, 700.0)], 1)]
    runner = _Screened({8: 1000.0, 4: 980.0, 2: 930.0}, {8: 900.0, 4: 990.0, 2: 1100.0}, 100.0)
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", knees_of=runner.knees_of,  # type: ignore[arg-type]
           prior_ranking=ranked).run()
    assert sorted(x for x in runner.measured if "again" in x[0]) == [("screen again at 2", 2), ("screen again at 8", 8)]
    assert [m for p, m in runner.measured if p == "final"] == [2]


@pytest.mark.integration
def test_the_screens_ties_measured_again_on_the_simulator_are_screen_windows_and_the_answer_names_them(
        tmp_path: Path) -> None:
    """Two drift seeds of one configuration tie on the screen's quarter windows: each one's screen knee load (c=8) is
    measured again on a fresh launch with the final window's length, stored as a screen window, and the answer says
    which went on to the finals."""
    prof = _drift_pair(0.1, [501, 502], {"search.screening": {"enabled": True, "keep": 0.25, "min_keep": 1,
                                                               "ties": True}})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("screen-tie")
    with Store(url) as store:
        model = read_study(store, run.study_id)
    again = [r for r in model.runs if r.phase == "screen" and r.planned_measure_s == 20]
    assert sorted(r.concurrency for r in again) == [8, 8]  # the screen knee's load, at the final window's length
    screens = sorted(c.id for c in model.configs if c.id not in {r.server_config_id for r in again}
                     and all(r.phase == "screen" for r in model.runs if r.server_config_id == c.id))
    finals = [c for c in model.configs if any(r.phase == "final" for r in model.runs if r.server_config_id == c.id)]
    assert len(finals) == 1  # the cut (1) taken among the ties by their full-length windows
    assert run.answer is not None and run.answer.screen_again is not None
    assert run.answer.screen_again.remeasured == tuple(screens)
    promoted = next(c for c in model.configs if c.id in screens and c.config.key() == finals[0].config.key())
    assert run.answer.screen_again.promoted == (promoted.id,)
    assert "**Screen ties**" in run.report.markdown.read_text()
