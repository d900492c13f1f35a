"""Issue 29: a ladder step's window stops once its verdict is decided (sweep.analysis.early_stop, docs/early-stop.md).

On the simulator (virtual driver, L40S preset, the smoke workload): a step far over its TTFT bound stops at the rule's
min_seconds, is stored as stopped early with its reason and window_s, fails, and is never the knee; a step just under
its bound runs its full window. The HTTP driver against the simulated server over real sockets stops a failing window
the same way. A stopped-early window still brackets the refinement and the SLA boundary as a fail.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.boundary import sla_ratio, window_sample
from sweep.analysis.early_stop import EarlyStop, e_value, over_bound
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.measure import compute_stats
from sweep.analysis.run_stats import RunStats
from sweep.analysis.tiers import StoredRequest
from sweep.core.types import CUT, RequestRecord, RequestSpec, ServerConfig
from sweep.drivers.http import HttpDriver
from sweep.ladder.refine import step_bracket
from sweep.ladder.runner import LadderRunner
from sweep.ladder.wiring import ROOT, make_driver, make_launcher, model_path
from sweep.launchers.base import ServerHandle
from sweep.profile import SLA, RateArrival, Window, load_profile
from sweep.store import Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream
from tests.analysis.test_window_edges import ladder
from tests.simserver import sim_server

FAILING = {"server.sim_gpu": "L40S", "ladder": [8, 128], "sla": {"ttft_ms": 1000, "tpot_ms": 100,
                                                                  "max_error_rate": 0.01},
           "window.measure_seconds": 300.0, "window.warmup_requests": 20, "workload.num_requests": 4000}


def test_the_e_value_keeps_its_level_at_the_bound_and_grows_past_it() -> None:
    assert e_value(5, 100, 0.05) < 1.0  # exactly at the allowance: no evidence
    assert e_value(0, 0, 0.05) == 1.0
    assert e_value(30, 100, 0.05) > 1e6  # 30% over against 5% allowed
    assert math.isinf(e_value(1, 50, 0.0)) and e_value(0, 50, 0.0) == 1.0  # max_error_rate 0: one error decides


def test_a_running_request_older_than_the_bound_counts_as_over() -> None:
    rec = RequestRecord(index=0, concurrency=1, scheduled_at=10.0, sent_at=10.0, sent_output_tokens=101)
    assert over_bound(rec, "TTFT", 1000.0, 10.5) is None  # 0.5 s old, no first token yet: undecided
    assert over_bound(rec, "TTFT", 1000.0, 11.5) is True  # past the bound with no token: it can only end over
    assert over_bound(rec, "E2E", 1000.0, 11.5) is True
    rec.first_token_at = 10.2
    assert over_bound(rec, "TTFT", 1000.0, 11.5) is None  # its first token came in time
    assert over_bound(rec, "TPOT", 10.0, 11.0) is None  # 0.8 s over 100 tokens: 8 ms a token at least
    assert over_bound(rec, "TPOT", 5.0, 11.0) is True  # already over 5 ms a token whatever comes


def test_the_test_waits_for_its_minimums() -> None:
    test = EarlyStop([SLA(ttft_ms=100)], alpha=0.01, min_requests=50, min_seconds=10.0, measure_s=60.0)
    for i in range(40):
        rec = RequestRecord(index=i, concurrency=1, scheduled_at=float(i), sent_at=float(i), first_token_at=i + 5.0,
                            finished_at=i + 6.0, output_tokens=1)
        test.ended(rec)
    assert test.check(20.0, 0.0) is None  # 40 of 40 over, but fewer than min_requests
    running = [RequestRecord(index=100 + i, concurrency=1, scheduled_at=1.0, sent_at=1.0) for i in range(10)]
    assert test.check(5.0, 0.0, running) is None  # min_seconds not reached
    verdict = test.check(20.0, 0.0, running)  # the 10 running ones are over too (19 s without a first token)
    assert verdict is not None and verdict.label == "TTFT P95" and verdict.over == verdict.n == 50, verdict
    assert verdict.text().startswith("TTFT P95 cannot pass: 50 requests over already, of ~")


@pytest.fixture(scope="module")
def failing_ladder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Any]:
    tmp = tmp_path_factory.mktemp("early")
    store = Store(f"sqlite:///{tmp / 'r.db'}")
    _, outcome = ladder(store, tmp, FAILING, ServerConfig(max_running_requests=32, mem_fraction_static=0.85))
    return store, outcome


def test_a_clearly_failing_step_stops_early_is_stored_so_and_is_not_the_knee(failing_ladder: tuple[Store, Any]) -> None:
    store, outcome = failing_ladder
    low, top = outcome.steps
    assert top.concurrency == 128 and not top.stats.passes_sla
    assert top.stats.stopped_early_by is not None and top.stats.stopped_early_by.startswith("TTFT P95 cannot pass")
    assert 60.0 <= top.stats.window_s < 90.0, top.stats.window_s  # min_seconds 60 of a 300 s window
    assert top.stats.sla_failures.startswith("stopped early at "), top.stats.sla_failures
    run = store.get_run(top.run_id)
    assert run is not None and run.run.stats is not None
    stored = run.run.stats
    assert stored.stopped_early_by == top.stats.stopped_early_by and not stored.passes_sla
    assert stored.window_s == pytest.approx(top.stats.window_s)
    # the passing step below ran its whole window, and is the knee
    assert low.stats.passes_sla and low.stats.stopped_early_by is None and low.stats.window_s == 300.0
    assert outcome.knee is not None and outcome.knee.point is not None and outcome.knee.point.concurrency == 8
    # the refinement's bracket and the boundary read the stopped window as the fail it was decided to be
    assert step_bracket(outcome.steps) == (8, 128)


def test_a_passing_step_just_under_its_bound_runs_its_full_window(tmp_path: Path) -> None:
    """Concurrency 8's TTFT P95 is ~70 ms: a 75 ms bound is 7% above it; the window runs its 300 s."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    near = {**FAILING, "ladder": [8], "sla": {"ttft_ms": 75, "tpot_ms": 100, "max_error_rate": 0.01}}
    _, outcome = ladder(store, tmp_path, near, ServerConfig(max_running_requests=32, mem_fraction_static=0.85))
    (step,) = outcome.steps
    assert step.stats.passes_sla, step.stats.sla_failures
    assert step.stats.ttft_p95_ms is not None and step.stats.ttft_p95_ms > 0.85 * 75, step.stats.ttft_p95_ms
    assert step.stats.stopped_early_by is None and step.stats.window_s == 300.0


def test_a_stopped_early_window_is_a_fail_for_the_boundary_even_where_its_part_passes() -> None:
    rows = [StoredRequest(scheduled_at=float(i), warmup=False, error=False, finished=True, ttft_ms=10.0, tpot_ms=5.0,
                          e2e_ms=100.0, output_tokens=20) for i in range(50)]
    sla = SLA(ttft_ms=100, tpot_ms=50)
    assert sla_ratio(window_sample(16, rows, 60.0), sla) <= 1.0
    assert sla_ratio(window_sample(16, rows, 60.0, stopped_early=True), sla) > 1.0
    stats = RunStats.from_row({"passes_sla": False, "stopped_early_by": "TTFT P95 cannot pass", "window_s": 60.0})
    assert step_bracket([LadderStep(1, 8, "final", RunStats.from_row({"passes_sla": True})),
                         LadderStep(2, 16, "final", stats)]) == (8, 16)


def test_the_http_driver_stops_a_failing_window_early_against_the_simulated_server() -> None:
    """Closed loop, 16 users, a 1 ms TTFT bound nobody meets: a 60 s window stops once min_seconds (2 s) passed."""
    specs = [RequestSpec(index=i, input_ids=tuple(3 + (i * 7 + j) % 990 for j in range(64)), output_tokens=16)
             for i in range(400)]
    test = EarlyStop([SLA(ttft_ms=1, tpot_ms=100)], alpha=0.01, min_requests=20, min_seconds=2.0,
                     measure_s=60.0)
    with sim_server() as url:
        handle = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        window = Window(warmup_requests=16, measure_seconds=60.0, drain_seconds=30.0, request_timeout_s=60.0)
        t0 = time.monotonic()
        res = HttpDriver().run_window(handle, specs, 16, window, early_stop=test)
        wall = time.monotonic() - t0
    assert res.stopped_early is not None and res.stopped_early.startswith("TTFT P95 cannot pass"), res.stopped_early
    assert 2.0 <= res.measured_seconds < 20.0 and wall < 40.0, (res.measured_seconds, wall)
    st = compute_stats(res, SLA(ttft_ms=1, tpot_ms=100))
    assert not st.passes_sla and st.stopped_early_by == res.stopped_early
    assert st.sla_failures.startswith("stopped early at "), st.sla_failures
    assert all(r.error_kind == CUT for r in res.records if r.finished_at is None and r.error is not None)


def test_the_soak_never_stops_early(tmp_path: Path) -> None:
    """A soak offered far more than the server takes (Poisson at 120 req/s against 32 running requests) fails its TTFT
    bound from its first minute, and still runs its whole window: its verdict is the soak's own judge."""
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.launcher": "sim", **FAILING})
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    study_id = store.create_study("soak-early", prof.name, prof.model_dump_json(), prof.fingerprint(), "grid", True,
                                  "virtual", None)
    launcher = make_launcher(prof, "sim", "virtual", tmp_path / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    runner = LadderRunner(prof, launcher, make_driver(prof, "virtual", launcher), store, study_id, specs, "virtual")
    window = prof.window.model_copy(update={"measure_seconds": 120.0})
    out = runner.run_judged(ServerConfig(max_running_requests=32, mem_fraction_static=0.85), 256, window,
                            RateArrival(kind="poisson", rate=120.0), lambda result, stats: "judged by the soak", "soak ran")
    (step,) = out.steps
    assert step.phase == "soak" and not step.stats.passes_sla, step.stats.sla_failures
    assert step.stats.stopped_early_by is None and step.stats.window_s == 120.0


def test_a_running_request_that_had_its_first_token_is_not_over_the_ttft_bound(tmp_path: Path) -> None:
    """The virtual driver's running requests carry their first token's time into the test: a passing step whose
    requests decode for seconds (far longer than the TTFT bound) is not stopped for requests still decoding. Before,
    every running request older than the TTFT bound counted as over it (its first token was only recorded at the
    end), so a 12 s window with the early stop's minimums lowered stopped at its first check: the H200 night stage's
    dry run stopped every window of a passing configuration at 4 s."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    long_decode = {**FAILING, "server.sim_gpu": "H200", "ladder": [16],
                   "sla": {"ttft_ms": 300, "tpot_ms": 100, "max_error_rate": 0.01},
                   "workload.output_len": {"kind": "uniform", "low": 300, "high": 400},
                   "window.measure_seconds": 20.0, "window.early_stop.min_seconds": 2.0,
                   "window.early_stop.min_requests": 10}
    _, outcome = ladder(store, tmp_path, long_decode, ServerConfig(max_running_requests=64, mem_fraction_static=0.85))
    (step,) = outcome.steps
    assert step.stats.ttft_p95_ms is not None and step.stats.ttft_p95_ms < 300, step.stats.ttft_p95_ms
    assert step.stats.stopped_early_by is None, step.stats.stopped_early_by
    assert step.stats.passes_sla and step.stats.window_s == 20.0


def _ended(i: int, at: float, ttft_s: float) -> RequestRecord:
    return RequestRecord(index=i, concurrency=1, scheduled_at=at, sent_at=at, first_token_at=at + ttft_s,
                         finished_at=at + ttft_s + 0.1, output_tokens=1)


def test_a_slow_first_minute_does_not_stop_a_window_that_passes_over_its_length() -> None:
    """The window's first minute runs slow (10% of its requests over the TTFT bound: a cold cache, users in phase),
    the rest is fast: 60 overs of ~9,000 requests, a window that passes. The e-process alone (no count, measure_s 0)
    stops it at once; the rule waits, because 60 overs are far fewer than 5% of what the window will hold."""
    rule = EarlyStop([SLA(ttft_ms=1000)], alpha=0.01, min_requests=50, min_seconds=60.0, measure_s=900.0)
    alone = EarlyStop([SLA(ttft_ms=1000)], alpha=0.01, min_requests=50, min_seconds=60.0, measure_s=0.0)
    for i in range(600):  # 10 a second for 60 s, every tenth over the bound
        rec = _ended(i, i / 10, 2.0 if i % 10 == 0 else 0.1)
        rule.ended(rec)
        alone.ended(rec)
    assert alone.check(62.0, 0.0) is not None  # the naive rule: 60 of 600 over "decides" the window
    assert rule.check(62.0, 0.0) is None
    for i in range(600, 9000):  # the rest of the window, fast: the rule never stops it
        rule.ended(_ended(i, i / 10, 0.1))
        if i % 600 == 0:
            assert rule.check(i / 10 + 1, 0.0) is None
