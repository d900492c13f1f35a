"""The winner (sweep.analysis.winner.pick_winner / rank_by_hardware): the highest knee goodput among eligible final
ladders, screens only when no final ran, and never across GPU models unless asked."""

from __future__ import annotations

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.winner import hardware_lines, pick_winner, rank_by_hardware
from sweep.core.types import ServerConfig
from sweep.store import ConfigRecord


def _knee(goodput: float, phase: str = "final") -> ConfigKnee:
    return ConfigKnee(16, goodput, goodput / 100, goodput - 50, goodput + 50, phase, "test")


CONFIGS = [ConfigRecord.from_row(row) for row in (
    {"id": 1, "max_running_requests": 8, "gpu_name": "H200", "gpu_memory_mib": 143771},
    {"id": 2, "max_running_requests": 16, "gpu_name": "H200", "gpu_memory_mib": 143771},
    {"id": 3, "max_running_requests": 32, "gpu_name": "A100", "gpu_memory_mib": 81920})]


def test_a_final_ladder_beats_a_better_screen_and_the_winner_carries_its_knobs() -> None:
    winner, pool = pick_winner(CONFIGS, {1: _knee(900.0), 2: _knee(1500.0, "screen")})
    assert winner is not None and (winner.id, winner.screen_only, winner.knee.goodput_tps) == (1, False, 900.0)
    assert winner.config == ServerConfig(max_running_requests=8) and set(pool) == {1}


def test_screens_win_only_when_no_final_ran_and_an_ineligible_config_never_wins() -> None:
    winner, _ = pick_winner(CONFIGS, {1: _knee(900.0, "screen"), 2: _knee(1500.0, "screen")}, lambda i: i != 2)
    assert winner is not None and (winner.id, winner.screen_only) == (1, True)
    assert pick_winner(CONFIGS, {2: _knee(1500.0)}, lambda i: i != 2) == (None, {})


def test_knees_on_two_gpu_models_are_ranked_apart_unless_asked() -> None:
    knees = {1: _knee(900.0), 2: _knee(1000.0), 3: _knee(2000.0)}
    apart = rank_by_hardware(CONFIGS, knees)
    assert apart.mixed and apart.reason is not None and "2 GPU models" in apart.reason
    assert {k: w.id if w else None for k, w in apart.winners.items()} == {"H200, 140 GiB": 2, "A100, 80 GiB": 3}
    assert "| H200, 140 GiB | mrr=16 | 16 | 1000 |" in hardware_lines(apart, {1: "mrr=8", 2: "mrr=16", 3: "mrr=32"})
    together = rank_by_hardware(CONFIGS, knees, rank_mixed=True)
    assert together.reason is None and together.ranked_anyway
