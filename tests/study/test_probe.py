"""Issue 29, the answer in one night: the probe screen (search.screening.probe). Where the simulated prior is the
screen and more configurations survive its margin than the finals take, each survivor gets one launch and one window
at the step of its predicted knee instead of a quarter-window ladder, and the cut is taken by those windows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.analysis.knee import KneeResult, StepPoint
from sweep.core.types import ServerConfig
from sweep.ladder.runner import LadderOutcome
from sweep.profile import Profile, load_profile
from sweep.profile.phases import probe_load, probe_window
from sweep.store import PriorRecord, Store
from sweep.study import prior
from sweep.study.search import Search
from sweep.views.plan import study_plan
from sweep.views.read_model import read_study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
INTERACTIVE = ROOT / "profiles" / "interactive.yaml"
PROBE = {"enabled": True, "fraction": 0.5}


class _Probed:
    """A runner whose probes measure `probe[mrr]` tok/s at their load (None: the window fails its SLA) and whose
    ladders measure `ladder[mrr]`; it records what it was asked to measure."""

    def __init__(self, ladder: dict[int, float], probe: dict[int, float | None]) -> None:
        self.ladder, self.probe = ladder, probe
        self.measured: list[tuple[str, int, int | None]] = []
        self.attempt: int | None = None

    def _outcome(self, config: ServerConfig, g: float | None, load: int) -> LadderOutcome:
        if g is None:
            return LadderOutcome(config, len(self.measured), "completed", knee=KneeResult(None, None, "none passes"))
        point = StepPoint(concurrency=load, goodput_rps=g / 100, goodput_tps=g, throughput_tps=g, ttft_p99_ms=100.0,
                          retractions=0, passes=True)
        return LadderOutcome(config, len(self.measured), "completed", knee=KneeResult(0, point, "test"))

    def run(self, config: ServerConfig, trial_number: int | None = None, phase: str = "final", ladder: object = None,
            should_stop: object = None) -> LadderOutcome:
        mrr = int(config.max_running_requests or 0)
        self.measured.append((phase, mrr, None))
        return self._outcome(config, self.ladder[mrr], mrr)

    def run_probe(self, config: ServerConfig, load: int, trial_number: int | None = None) -> LadderOutcome:
        mrr = int(config.max_running_requests or 0)
        self.measured.append(("probe", mrr, load))
        return self._outcome(config, self.probe[mrr], load)


def _profile(**over: object) -> Profile:
    return load_profile(SMOKE, {"search.space": {"max_running_requests": [2, 4, 8]}, "search.prior": "sim",
                                "search.prior_margin": 0.15, "search.screening.enabled": True,
                                "search.screening.min_keep": 1, "search.screening.keep": 0.25,
                                "search.screening.ties": True, "search.screening.probe": PROBE, **over})


def _ranking(sim: dict[int, float], knees: dict[int, float], margin: float | None = 0.15) -> list[PriorRecord]:
    order = sorted(sim.items(), key=lambda kv: -kv[1])
    top = order[0][1]
    out = []
    for i, (mrr, v) in enumerate(order, 1):
        why = prior.drop_reason(v, top, margin) if margin is not None else None
        out.append(PriorRecord(rank=i, label=f"mrr={mrr}", knobs_json=json.dumps({"max_running_requests": mrr}),
                               sim_goodput_tps=v, dropped=why is not None, margin=margin, knee_concurrency=knees[mrr],
                               reason=why))
    return out


def test_the_probe_load_is_the_ladder_step_at_or_below_the_predicted_knee() -> None:
    prof = load_profile(INTERACTIVE)  # ladder 16 32 64 128, climbing on to 256
    assert [probe_load(prof, k) for k in (None, 10.0, 16.0, 45.3, 64.0, 127.9, 181.0, 400.0)] == [
        None, 16, 16, 32, 64, 64, 128, 256]


@pytest.mark.parametrize(("probe", "finals"), [
    ({8: 900.0, 4: 990.0}, [4]),  # the probes rank 4 first: the prior's order (8) would send the other
    ({8: 900.0, 4: None}, [8]),  # 4's probe fails its SLA: it counts 0
    ({8: None, 4: None}, [8]),  # every probe fails: the prior's order
])
def test_each_survivor_is_probed_once_at_its_predicted_knee_and_the_cut_follows_the_probes(
        tmp_path: Path, probe: dict[int, float | None], finals: list[int]) -> None:
    """The prior keeps mrr 8 (its leader, predicted knee 6.5: the probe measures ladder step 4) and mrr 4 (5% behind,
    predicted knee 4); mrr 2 is dropped. The cut takes 1 of the 2 survivors by their probes, with no screen ladder
    and no re-measure of screen ties (each probe already is a window of the probe's length)."""
    prof = _profile()
    ranked = _ranking({8: 1000.0, 4: 950.0, 2: 500.0}, {8: 6.5, 4: 4.0, 2: 2.0})
    assert prior.needs_screen(prof, ranked) and prior.probes(prof, ranked)
    runner = _Probed({8: 880.0, 4: 1000.0, 2: 300.0}, probe)
    Search(prof, runner, f"sqlite:///{tmp_path / 'o.db'}", "s", prior_ranking=ranked).run()  # type: ignore[arg-type]
    assert sorted(m for m in runner.measured if m[0] == "probe") == [("probe", 4, 4), ("probe", 8, 4)]
    assert [x[1] for x in runner.measured if x[0] == "final"] == finals
    assert not [m for m in runner.measured if m[0] == "screen"]


def test_no_probe_where_the_prior_cannot_screen_or_the_probe_is_off() -> None:
    ranked = _ranking({8: 1000.0, 4: 950.0, 2: 500.0}, {8: 8.0, 4: 4.0, 2: 2.0})
    assert not prior.probes(_profile(**{"search.screening.probe": {"enabled": False}}), ranked)
    # a prior that cannot rank stores no margin: the study screens on ladders as without a prior
    assert not prior.probes(_profile(), _ranking({8: 1000.0, 4: 950.0, 2: 500.0}, {8: 8.0, 4: 4.0, 2: 2.0}, None))
    # survivors that fit the finals: no real screen, no probe
    assert not prior.probes(_profile(), _ranking({8: 1000.0, 4: 700.0, 2: 500.0}, {8: 8.0, 4: 4.0, 2: 2.0}))


def test_the_plan_bills_one_window_a_survivor_and_no_screen_re_measure() -> None:
    # the ties uncapped (search.screening.ties_max none): every survivor's re-measure in the bound
    on = load_profile(INTERACTIVE, {"search.screening.probe": PROBE, "search.screening.ties_max": None})
    off = load_profile(INTERACTIVE, {"search.screening.probe": {"enabled": False}, "search.screening.ties_max": None})
    p_on, p_off = study_plan(on), study_plan(off)
    survivors = 4  # the plan's assumption for interactive: as many as screening would promote from the grid
    assert p_on.screen_again_launches == 0 and p_off.screen_again_launches == survivors
    w = probe_window(on)
    probe_s = w.warmup_seconds + w.measure_seconds + w.drain_seconds
    screen_s = survivors * 4 * (30 + 225 + 60)  # four quarter windows each
    again_s = survivors * (70 + 990)  # a launch and a full window each, when every one ties
    assert (p_off.gpu_hours - p_on.gpu_hours) * 3600 == pytest.approx(screen_s + again_s - survivors * probe_s)
    assert p_on.steps == p_off.steps - survivors * 3 - survivors


@pytest.mark.integration
def test_a_probe_screen_on_the_simulator_stores_one_screen_window_per_survivor(tmp_path: Path) -> None:
    """A real study on the simulator (virtual driver) with the prior as the screen: every survivor measured once, a
    screen window of the probe's length at its predicted knee's step, and one final ladder from the cut."""
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]},
                                "search.prior": "sim", "search.prior_margin": 0.5, "search.screening.enabled": True,
                                "search.screening.keep": 0.25, "search.screening.min_keep": 1,
                                "search.screening.probe": PROBE, "window.measure_seconds": 8})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    from sweep.study.orchestrator import Orchestrator

    run = Orchestrator(prof, url, tmp_path, driver="virtual").knee("probe")
    with Store(url) as store:
        ranked = store.study_prior(run.study_id)
        model = read_study(store, run.study_id)
    survivors = prior.kept(ranked)
    assert len(survivors) > 1 and prior.probes(prof, ranked)
    screens = [r for r in model.runs if r.phase == "screen"]
    assert len(screens) == len(survivors)  # one window each
    assert {r.planned_measure_s for r in screens} == {4.0}
    guess = prior.predicted_knee(ranked, {"max_running_requests": [4, 8], "mem_fraction_static": [0.8, 0.85]})
    by_id = {c.id: c.config for c in model.configs}
    assert all(r.concurrency == probe_load(prof, guess(by_id[r.server_config_id])) for r in screens)
    finals = {r.server_config_id for r in model.runs if r.phase == "final"}
    assert len(finals) == 1 and model.winner is not None
