"""Issue 28 §2: one knee rule for every ladder (the passing window with the highest goodput), ranked by that goodput
everywhere; each case is one where the old rules (the refined ladder's "highest passing concurrency", the flattening
rule's lower step) pick another configuration or another figure."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from sweep.analysis.ladder_steps import LadderStep, ladder_knee, same_windows
from sweep.analysis.run_stats import RunStats
from sweep.analysis.winner import pick_winner
from sweep.core.types import Placement, ServerConfig
from sweep.profile import load_profile
from sweep.report.answer import tier_lines
from sweep.store import Store
from sweep.study.orchestrator import Orchestrator
from sweep.views.answer import build_answer
from sweep.views.context import study_context

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _step(run_id: int, c: int, goodput: float, passes: bool, phase: str = "final", tput: float | None = None,
          ttft_p99: float = 100.0) -> LadderStep:
    """A window with a goodput interval of ±2% (requests/s at 100 tokens a request)."""
    stats = RunStats.from_row({"n_started": 500, "n_completed": 500, "goodput_tps": goodput,
                               "goodput_rps": goodput / 100, "output_tps": tput or goodput, "ttft_p99_ms": ttft_p99,
                               "retractions": 0, "passes_sla": passes, "goodput_rps_ci_low": goodput / 100 * 0.98,
                               "goodput_rps_ci_high": goodput / 100 * 1.02, "client_bound": False})
    return LadderStep(run_id, c, phase, stats)


@dataclasses.dataclass(frozen=True)
class _Row:
    id: int
    config: ServerConfig
    placement: Placement = Placement()


def _winner(ladders: dict[int, Sequence[LadderStep]]) -> int | None:
    knees = {cid: k for cid, steps in ladders.items() if (k := ladder_knee(steps, 0.10)) is not None}
    rows = [_Row(cid, ServerConfig(max_running_requests=cid)) for cid in ladders]
    w, _ = pick_winner(rows, knees)
    return w.id if w is not None else None


def test_a_refined_ladder_is_ranked_by_its_goodput_peak_not_its_highest_pass() -> None:
    # A: c=64 passes at 935 tok/s; the refined c=80 still passes, at 569; c=96 fails. B: 800 at c=64, 128 fails.
    # The old refined rule gave A the knee c=80 (569) and the win to B; A serves more inside the SLA.
    a = [_step(1, 32, 700, True), _step(2, 64, 935, True), _step(3, 128, 400, False),
         _step(4, 96, 450, False, "refine"), _step(5, 80, 569, True, "refine")]
    b = [_step(6, 32, 500, True), _step(7, 64, 800, True), _step(8, 128, 300, False)]
    knee = ladder_knee(a, 0.10)
    assert knee is not None and (knee.concurrency, knee.goodput_tps) == (64, 935)
    assert _winner({10: a, 20: b}) == 10


def test_a_ladder_passing_to_its_top_is_not_ranked_by_the_step_before_the_flattening() -> None:
    # The shipped agent profile's contradiction: the defaults pass their top step c=64 at 2,300 tok/s, but throughput
    # flattens there, so the old rule ranked them by c=32 (2,100) against a refined winner's 2,260 at c=40.
    defaults = [_step(1, 16, 1200, True, ttft_p99=100), _step(2, 32, 2100, True, ttft_p99=200),
                _step(3, 64, 2300, True, ttft_p99=900)]  # +9.5% over one doubling: "flattens" at 10%
    other = [_step(4, 32, 2000, True), _step(5, 64, 900, False), _step(6, 40, 2260, True, "refine"),
             _step(7, 48, 1500, False, "refine")]
    assert ladder_knee(defaults, 0.10).goodput_tps == 2300  # type: ignore[union-attr]
    assert _winner({1: defaults, 2: other}) == 1


def test_a_stricter_tier_never_shows_more_goodput_than_a_looser_one() -> None:
    # The same windows judged by a stricter SLA: a subset passes, each with no more SLA-meeting goodput. Under the old
    # refined rule the looser tier's knee was its highest pass (c=80, 569 tok/s) and the stricter tier's c=64 (900).
    loose = [_step(1, 32, 700, True), _step(2, 64, 935, True), _step(3, 128, 300, False),
             _step(4, 80, 569, True, "refine"), _step(5, 96, 450, False, "refine")]
    strict = [_step(1, 32, 690, True), _step(2, 64, 900, True), _step(3, 128, 100, False),
              _step(4, 80, 500, False, "refine"), _step(5, 96, 200, False, "refine")]
    kl, ks = ladder_knee(loose, 0.10), ladder_knee(strict, 0.10)
    assert kl is not None and ks is not None and ks.goodput_tps <= kl.goodput_tps


@pytest.mark.integration
def test_configurations_that_measured_alike_are_one_answer(tmp_path: Path) -> None:
    # On the simulator a memory fraction whose pool never fills measures exactly alike: not a winner and a loser.
    prof = load_profile(SMOKE, {"ladder": [2, 4], "search.baseline": False,
                                "search.space": {"max_running_requests": [8], "mem_fraction_static": [0.8, 0.85]}})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("alike")
    with Store(url) as store:
        ctx = study_context(store, run.study_id)
        answer = build_answer(store, ctx)
    (tier,) = answer.tiers
    assert tier.winner_id is not None and len(tier.same_as) == 1
    assert tier.label == "mrr=8, mem 0.8 or 0.85: no difference measured"
    assert tier.same_as[0] not in tier.tied  # one answer, not a tie
    text = "\n".join(tier_lines(answer, tier))
    assert "no difference measured" in text


def test_same_windows_needs_every_window_equal() -> None:
    a = [_step(1, 32, 700, True), _step(2, 64, 935, True)]
    b = [_step(3, 32, 700, True), _step(4, 64, 935, True)]
    assert same_windows(a, b)
    assert not same_windows(a, [b[0], _step(4, 64, 936, True)])
    assert not same_windows(a, b[:1]) and not same_windows([], [])


@pytest.mark.integration
def test_the_defaults_tie_with_a_winner_the_data_do_not_rank_above_them(tmp_path: Path) -> None:
    # chunk 4096 measures exactly what SGLang's defaults measure on the simulator; its stored windows are then read
    # 1% higher: it wins, by less than the data can tell, so the ties line must name the defaults (the old answer
    # and report left the defaults out of the ties whatever P(winner higher) was).
    prof = load_profile(SMOKE, {"search.baseline": True, "search.space": {"chunked_prefill_size": [512, 4096]}})
    url = f"sqlite:///{tmp_path / 'r.db'}"
    run = Orchestrator(prof, url, tmp_path / "out", driver="virtual").knee("tie")
    with Store(url) as store:
        configs = store.server_configs(run.study_id)
    defaults = next(c.id for c in configs if not c.config.knobs())
    chunk = next(c.id for c in configs if c.config.chunked_prefill_size == 4096)
    with sqlite3.connect(tmp_path / "r.db") as conn:
        conn.execute("UPDATE runs SET goodput_tps = goodput_tps * 1.01, goodput_rps = goodput_rps * 1.01, "
                     "goodput_rps_ci_low = goodput_rps_ci_low * 1.01, goodput_rps_ci_high = goodput_rps_ci_high * 1.01 "
                     "WHERE server_config_id = ?", (chunk,))
        conn.execute("DELETE FROM study_winners")  # the winner is decided again from these rows
    with Store(url) as store:
        ctx = study_context(store, run.study_id)
        answer = build_answer(store, ctx)
    (tier,) = answer.tiers
    assert tier.winner_id == chunk and tier.win_prob[defaults] < 0.9
    assert defaults in tier.tied and defaults in ctx.view.ties
    assert "SGLang defaults" in "\n".join(tier_lines(answer, tier)).split("**Ties**")[1]


def test_a_refinement_that_stopped_wider_than_its_tolerance_says_so() -> None:
    from sweep.ladder.refine import refine
    from sweep.profile import SLA, Refine

    steps = [_step(1, 16, 900, True), _step(2, 64, 300, False)]
    ran: list[LadderStep] = []

    def one(load: float) -> tuple[list[LadderStep], None]:
        s = _step(10 + len(ran), int(load), 950, load < 30)
        ran.append(s)
        return [s], None

    r = refine(Refine(enabled=True, tolerance=0.1, max_steps=1), SLA(), steps, one, lambda _: [])
    assert len(r.steps) == 1 and "refinement stopped above its tolerance" in r.note  # bracket 16-40: 150% wide
    r = refine(Refine(enabled=True, tolerance=0.1, max_steps=8), SLA(), steps, one, lambda _: [])
    assert "above its tolerance" not in r.note


def test_not_bracketed_only_when_the_knee_is_the_top_window(tmp_path: Path) -> None:
    from sweep.analysis.knee import ConfigKnee
    from sweep.profile import SLA
    from sweep.views.answer import Answer, TierAnswer

    knee = ConfigKnee(32, 1000.0, 10.0, 950.0, 1050.0, "final", "t")
    below = TierAnswer("t", True, SLA(), 1, "mrr=64", {}, knee, False, (32, None), None, None, None,
                       knee_at_top=False)
    top = dataclasses.replace(below, knee_at_top=True)
    answer = Answer("s", True, "m", (), (below,))
    assert "goodput falls above it" in "\n".join(tier_lines(answer, below))
    assert "not bracketed" not in "\n".join(tier_lines(answer, below))
    assert "top of the ladder: not bracketed" in "\n".join(tier_lines(answer, top))
