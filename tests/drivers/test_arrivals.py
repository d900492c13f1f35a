"""Open-loop arrival schedules (seeded, sharded, traces) and the virtual driver's open loop."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from sweep.analysis.measure import ttft_ms
from sweep.core.errors import ProfileError
from sweep.core.types import RequestSpec, ServerConfig
from sweep.drivers import arrivals
from sweep.drivers.virtual import VirtualDriver
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import ClosedArrival, GammaArrival, Profile, RateArrival, TraceArrival, Window

ROOT = Path(__file__).resolve().parents[2]


def test_schedules_are_seeded_per_step_and_start_at_zero() -> None:
    p = RateArrival(kind="poisson", rate=10.0)
    a = arrivals.schedule(p, 100.0, seed=7, step=16)
    assert np.array_equal(a, arrivals.schedule(p, 100.0, seed=7, step=16))
    assert not np.array_equal(a[:50], arrivals.schedule(p, 100.0, seed=7, step=32)[:50])
    assert not np.array_equal(a[:50], arrivals.schedule(p, 100.0, seed=8, step=16)[:50])
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0) and a[-1] < 100.0


def test_constant_poisson_and_gamma_gap_statistics() -> None:
    c = arrivals.schedule(RateArrival(kind="constant", rate=4.0), 10.0)
    assert np.allclose(np.diff(c), 0.25) and len(c) == 40
    n = 200_000.0 / 50.0
    for arr, cv in ((RateArrival(kind="poisson", rate=50.0), 1.0), (GammaArrival(rate=50.0, cv=3.0), 3.0),
                    (GammaArrival(rate=50.0, shape=4.0), 0.5)):
        gaps = np.diff(arrivals.schedule(arr, n, seed=1))
        assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)


def test_gamma_needs_exactly_one_of_shape_or_cv_and_profile_parses_every_kind(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        GammaArrival(rate=1.0)
    with pytest.raises(ValidationError):
        GammaArrival(rate=1.0, shape=2.0, cv=0.5)
    assert GammaArrival(rate=1.0, cv=0.5).k == pytest.approx(4.0)
    for arrival, cls in (({"kind": "closed"}, ClosedArrival), ({"kind": "constant", "rate": 2}, RateArrival),
                         ({"kind": "gamma", "rate": 2, "cv": 2}, GammaArrival),
                         ({"kind": "trace", "path": "t.txt"}, TraceArrival)):
        assert isinstance(Profile.model_validate({"name": "x", "arrival": arrival}).arrival, cls)


def test_trace_replay_comments_header_scale_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("timestamp,prompt\n# comment\n100.5,a\n101.0,b\n\n103.5,c  # late\n")
    assert arrivals.load_trace(f).tolist() == [0.0, 0.5, 3.0]
    assert arrivals.load_trace(f, 0.5).tolist() == [0.0, 0.25, 1.5]
    assert arrivals.schedule(TraceArrival(path=str(f)), 1.0).tolist() == [0.0, 0.5, 3.0]
    f.write_text("2\n1\n")
    with pytest.raises(ValueError, match="non-decreasing"):
        arrivals.load_trace(f)
    f.write_text("1\nx\n")
    with pytest.raises(ValueError, match=":2: not a timestamp"):
        arrivals.load_trace(f)


def test_plan_window_and_disjoint_shards() -> None:
    w = Window(warmup_requests=10, warmup_seconds=0.0, measure_seconds=5.0)
    sched = RateArrival(kind="constant", rate=10.0).schedule(w)
    # the window opens at the earliest after the 10th send (0.9 s; each warm-up request must complete), its load
    # (1 user x 0.1 s) and warmup_seconds; at the latest when the 10th send's request timed out (0.9 + 600 s)
    assert sched.earliest == pytest.approx(0.9) and sched.warmup.load_s == pytest.approx(0.1)
    assert sched.warmup.bound == pytest.approx(600.9) and sched.needed() == 59
    offs = sched.offsets  # the sends run to the window's latest end
    assert len(offs) == 6059 and offs[-1] < sched.warmup.bound + 5.0
    later = RateArrival(kind="constant", rate=10.0).schedule(w.model_copy(update={"warmup_seconds": 3}))
    assert later.earliest == 3.0
    parts = [arrivals.shard(len(offs), 3, i) for i in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(offs)))
    assert [arrivals.split_int(10, 3, i) for i in range(3)] == [4, 3, 3]


def _specs(n: int = 40) -> list[RequestSpec]:
    rng = random.Random(0)
    return [RequestSpec(index=i, input_ids=tuple(rng.randrange(3, 1000) for _ in range(rng.randint(100, 600))),
                        output_tokens=rng.randint(32, 200)) for i in range(n)]


def test_virtual_open_loop_sends_on_schedule_and_keeps_latency_honest_under_the_cap() -> None:
    w = Window(warmup_requests=5, measure_seconds=30.0, drain_seconds=600.0, request_timeout_s=3600.0)
    light = RateArrival(kind="poisson", rate=2.0)
    res = VirtualDriver(seed=3).run_window(VirtualLauncher("H200", "llama3-8b").start(ServerConfig()), _specs(), 1,
                                          w, arrival=light)
    sched = light.schedule(w, 3, 1)
    start = res.records[0].scheduled_at
    # every send up to the window's end, on schedule; the window opened once 5 requests completed (all sent before)
    assert [r.scheduled_at - start for r in res.records] == pytest.approx(sched.offsets[:len(res.records)].tolist())
    assert start + sched.offsets[len(res.records)] >= res.window_end > res.records[-1].scheduled_at
    assert res.window_start >= start + sched.earliest and res.window_end == pytest.approx(res.window_start + 30.0)
    assert all(r.warmup == (r.scheduled_at < res.window_start) for r in res.records)
    assert all(r.error is None and r.sent_at >= r.scheduled_at for r in res.records)
    # overload: 40 req/s against 4 slots; queueing shows in latency counted from the scheduled time
    heavy = RateArrival(kind="constant", rate=40.0, max_in_flight=4)
    res = VirtualDriver().run_window(VirtualLauncher("H200", "llama3-8b").start(ServerConfig()), _specs(), 1, w,
                                     arrival=heavy)
    events = sorted([(r.sent_at, 1) for r in res.records if r.finished_at] +
                    [(r.finished_at, -1) for r in res.records if r.finished_at])
    assert max(np.cumsum([e for _, e in events])) <= 4
    done = [r for r in res.records if r.finished_at is not None and not r.warmup]
    early, late = done[: len(done) // 4], done[-len(done) // 4:]
    assert np.median([ttft_ms(r) for r in late]) > 3 * np.median([ttft_ms(r) for r in early])
    assert max(r.sent_at - r.scheduled_at for r in late) > 1.0


@pytest.mark.integration
def test_an_open_loop_ladder_offers_each_steps_own_rate(tmp_path: Path) -> None:
    """With arrival.rates, step i of the ladder offers rates[i] req/s (a request-rate sweep)."""
    import sqlite3

    from sweep.profile import load_profile
    from sweep.study.orchestrator import Orchestrator

    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {
        "arrival": {"kind": "poisson", "rate": 1.0, "rates": [2.0, 8.0], "max_in_flight": 64},
        "ladder": [2, 4], "window.measure_seconds": 30, "window.warmup_requests": 0,
        "search.space": {"max_running_requests": [8]}})
    Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="virtual").knee("rates")
    con = sqlite3.connect(tmp_path / "r.db")
    started = dict(con.execute("SELECT concurrency, n_started FROM runs WHERE phase != 'soak'").fetchall())
    assert 30 <= started[2] <= 95  # ~60 requests at 2 req/s for 30 s (Poisson)
    assert 180 <= started[4] <= 310  # ~240 at 8 req/s
    with pytest.raises(ProfileError, match="arrival.rates has 1 values for a ladder of 2 steps"):
        load_profile(ROOT / "profiles" / "smoke.yaml", {"arrival": {"kind": "poisson", "rate": 1.0, "rates": [2.0]},
                                                        "ladder": [2, 4]})
