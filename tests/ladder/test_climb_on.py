"""Issue 28 §2 and §5 on the simulator (virtual driver): a final ladder that passes its top step climbs on until a step
fails (capped), and a passing peak that the client's self-check flagged is measured again before it can be the knee."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from sweep.core.types import ClientSamples, ServerConfig, WindowResult
from sweep.ladder.climb_on import next_climb
from sweep.profile import load_profile
from sweep.profile.phases import climb_steps, ladder_windows
from sweep.store import Store
from tests.ladder.test_ladder import _runner

ROOT = Path(__file__).resolve().parents[2]


def _loads(store: Store) -> list[tuple[int, str | None]]:
    return [(r.concurrency, r.phase) for r in store.study_runs(1)]


def test_a_final_ladder_passing_its_top_climbs_on_until_a_step_fails(sqlite_store: Store, tmp_path: Path) -> None:
    # max_running_requests 64 against a 2-4 ladder: every step passes; the old ladder stopped at 4 and called the
    # knee "top of the ladder". It doubles on until c=128 fails the 500 ms TTFT bound (128 = 2 x 64, also the cap).
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4], "ladder_max": 1024, "sla.ttft_ms": 500})
    outcome = runner.run(ServerConfig(max_running_requests=64))
    assert [s.concurrency for s in outcome.steps] == [2, 4, 8, 16, 32, 64, 128]
    assert all(s.stats.passes_sla for s in outcome.steps[:-1]) and not outcome.steps[-1].stats.passes_sla
    assert "climbed on past the ladder's top to concurrency 128 (fails)" in outcome.stop_reason
    assert outcome.knee is not None and outcome.knee.point is not None
    assert outcome.knee.point.goodput_tps == max(s.stats.goodput_tps or 0 for s in outcome.steps[:-1])
    assert _loads(sqlite_store) == [(c, "final") for c in (2, 4, 8, 16, 32, 64, 128)]


def test_climbing_on_stops_at_twice_max_running_requests_and_at_ladder_max(sqlite_store: Store,
                                                                           tmp_path: Path) -> None:
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2], "ladder_max": 1024})
    outcome = runner.run(ServerConfig(max_running_requests=3))
    assert [s.concurrency for s in outcome.steps][:3] == [2, 4, 6]  # 2 x 3 = 6 caps the doubling
    assert max(s.concurrency for s in outcome.steps) == 6
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"ladder": [2, 4], "ladder_max": 12})
    assert climb_steps(prof) == 2  # 8, then 12
    assert ladder_windows(prof, "final") == 4 and ladder_windows(prof, "screen") == 2
    coupled = load_profile(ROOT / "profiles" / "smoke.yaml", {"search.mode": "coupled", "ladder_max": 64})
    assert climb_steps(coupled) == 0
    assert next_climb(prof, [], None) is None


class _StallsOnce:
    """The virtual driver, but its client's event loop stalls 400 ms inside the first window at `concurrency`."""

    def __init__(self, inner: object, concurrency: int):
        self.inner, self.concurrency, self.stalled = inner, concurrency, False

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def run_window(self, handle: object, specs: object, concurrency: int, window: object,
                   **kw: object) -> WindowResult:
        result: WindowResult = self.inner.run_window(handle, specs, concurrency, window, **kw)  # type: ignore[attr-defined]
        if concurrency != self.concurrency or self.stalled:
            return result
        self.stalled = True
        mid = (result.window_start + result.window_end) / 2
        ticks = np.array([[mid, 0.4, 0.0], [mid + 0.1, 0.001, 0.0]])
        return dataclasses.replace(result, client=(ClientSamples(np.zeros(0), np.zeros(0), ticks),))


def test_a_flagged_peak_is_measured_again_before_it_can_be_the_knee(sqlite_store: Store, tmp_path: Path) -> None:
    # c=8 is the ladder's goodput peak, but the client's loop stalled 400 ms inside its window: the old knee rested on
    # it. Now the ladder measures c=8 again, and the knee is the unflagged window.
    runner = _runner(sqlite_store, tmp_path, {"ladder": [2, 4, 8], "ladder_max": 8})
    runner.driver = _StallsOnce(runner.driver, 8)  # type: ignore[assignment]
    outcome = runner.run(ServerConfig(max_running_requests=8))
    eights = [s for s in outcome.steps if s.concurrency == 8]
    assert [bool(s.stats.client_bound) for s in eights] == [True, False]
    assert outcome.knee is not None and outcome.knee.point is not None and not outcome.knee.point.flagged
    assert outcome.knee.index == outcome.steps.index(eights[1])
    assert "measured concurrency 8 again: its window was flagged" in outcome.stop_reason
    assert _loads(sqlite_store) == [(2, "final"), (4, "final"), (8, "final"), (8, "final")]
