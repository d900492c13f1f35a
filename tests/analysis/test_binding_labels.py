"""Issue 28 §4: labels and units that match what happened. The binding constraint is read from the first failing
window above the knee of the knee's own ladder, by load; `kv` needs KV evidence (retractions, or a full pool that
requests waited for); a failure on TPOT alone is `decode`; an open-loop rate ladder names its knee, its "why", its
tables and its live page in req/s, never by ladder position; SGLang's defaults' "next" hint reads the values the
server resolved (/server_info), not the search space's. On the simulator (virtual driver) where a real window shows
it, on hand-made windows where the rule is one comparison."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.analysis.binding import binding
from sweep.analysis.knee import ConfigKnee
from sweep.analysis.ladder_steps import LadderStep
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.report.answer import answer_lines, why_lines
from sweep.report.tables import configs_table
from sweep.store import Store
from sweep.views.answer import build_answer
from sweep.views.context import study_context
from sweep.views.live import read_state
from sweep.views.study import StudyView
from tests.analysis.test_window_edges import ladder

NO_SHARING = {"groups": 1, "length": 1, "share": 0.0}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'r.db'}")


def test_a_tpot_only_failure_is_decode_though_the_kv_cache_filled(store: Store, tmp_path: Path) -> None:
    """3,000-token prompts on a KV cache of ~11 of them (mem 0.13): at 16 users the pool is full and a few requests
    are retracted, yet only the TPOT bound fails (TTFT P95 2.5 s of a 10 s bound): decode, not kv."""
    study_id, outcome = ladder(store, tmp_path, {
        "ladder": [4, 8, 16], "sla": {"ttft_ms": 10000, "tpot_ms": 9, "max_error_rate": 0.01},
        "window.measure_seconds": 20.0, "window.drain_seconds": 30.0, "workload.shared_prefix": NO_SHARING,
        "workload.prompt_len": {"kind": "fixed", "value": 3000}, "workload.output_len": {"kind": "fixed", "value": 200}},
        ServerConfig(max_running_requests=256, mem_fraction_static=0.13))
    top = next(s.stats for s in outcome.steps if s.concurrency == 16)
    assert (top.kv_usage_max or 0) >= 0.95 and top.retractions > 0, top  # the old rule read this as kv
    assert top.sla_failures.startswith("TPOT") and "TTFT" not in top.sla_failures, top.sla_failures
    (b,) = build_answer(store, study_context(store, study_id)).tiers[0].bindings.values()
    assert (b.constraint, b.concurrency) == ("decode", 16), b
    assert "lower max_running_requests" in b.next_step


def _stats(**kw: object) -> RunStats:
    return RunStats.from_row({"n_started": 200, "n_completed": 200, "n_errors": 0, "n_cut": 0, "retractions": 0,
                              "passes_sla": False, "sla_failures": "TTFT P95 1500 ms > 1000 ms", "client_bound": False,
                              "queue_len_mean": 0.2, "running_mean": 40.0, **kw})


@pytest.mark.parametrize(("kw", "label"), [
    ({"kv_usage_max": 0.97}, "prefill"),  # a full pool that nobody waited for is no KV evidence
    ({"kv_usage_max": 0.97, "queue_len_mean": 3.0}, "kv"),  # requests waited while the pool was full
    ({"kv_usage_max": 0.60, "retractions": 2}, "kv"),  # the scheduler evicted running requests for room
    ({"kv_usage_max": 0.99, "retractions": 5, "sla_failures": "TPOT P95 12 ms > 9 ms"}, "decode"),
    ({"kv_usage_max": 0.99, "retractions": 5, "sla_failures": "TTFT P95 1500 ms > 1000 ms; TPOT P95 12 ms > 9 ms"},
     "kv"),
])
def test_kv_needs_kv_evidence_and_tpot_alone_is_decode(kw: dict[str, object], label: str) -> None:
    knee = ConfigKnee(8, 900.0, 9.0, None, None, "final", "test")
    steps = [LadderStep(1, 8, "final", _stats(passes_sla=True, sla_failures="")), LadderStep(2, 16, "final", _stats(**kw))]
    b = binding(steps, knee, ServerConfig(max_running_requests=256), {})
    assert b is not None and (b.constraint, b.concurrency) == (label, 16), b


def test_the_first_failing_window_above_the_knee_is_of_the_knee_s_own_ladder() -> None:
    """A screened configuration has two ladders; the live page handed both to the binding, which read whichever
    failing window sorted first: the screen's KV-full window instead of the final ladder's TTFT one."""
    knee = ConfigKnee(8, 900.0, 9.0, None, None, "final", "test")
    passing = _stats(passes_sla=True, sla_failures="")
    steps = [LadderStep(1, 8, "screen", passing), LadderStep(2, 16, "screen", _stats(retractions=9)),
             LadderStep(3, 8, "final", passing), LadderStep(4, 32, "final", passing),
             LadderStep(5, 16, "final", _stats()), LadderStep(6, 64, "final", _stats(retractions=3)),
             LadderStep(7, 16, "soak", _stats(retractions=4))]
    b = binding(steps, knee, ServerConfig(max_running_requests=256), {})
    assert b is not None and (b.constraint, b.concurrency) == ("prefill", 16), b


def test_the_defaults_next_hint_reads_what_sglang_resolved(store: Store, tmp_path: Path) -> None:
    """SGLang's defaults KV-bound on an L40S: SGLang resolved mem_fraction_static to 0.8, above the space's top
    (0.7). The hint said "a larger mem_fraction_static (the space goes up to 0.7)": a smaller value than it ran."""
    study_id, outcome = ladder(store, tmp_path, {
        "server.sim_gpu": "L40S", "ladder": [16, 64], "sla": {"ttft_ms": 3000, "tpot_ms": 200, "max_error_rate": 0.01},
        "window.measure_seconds": 240.0, "window.warmup_requests": 16, "window.drain_seconds": 300.0, "window.request_timeout_s": 600,
        "workload.shared_prefix": NO_SHARING, "workload.prompt_len": {"kind": "fixed", "value": 500},
        "workload.output_len": {"kind": "fixed", "value": 3000},
        "search.space": {"mem_fraction_static": [0.6, 0.7], "max_running_requests": [16, 64]}}, ServerConfig())
    ctx = study_context(store, study_id)
    (b,) = build_answer(store, ctx).tiers[0].bindings.values()
    assert b.constraint == "kv", b
    assert "the space goes up to" not in b.next_step, b.next_step
    assert "mem_fraction_static is 0.8 as SGLang resolved it, at or above the top of the space (0.7)" in b.next_step
    (row,) = ctx.configs
    assert row.config == ServerConfig() and row.resolved().mem_fraction_static == 0.8


def test_a_rate_ladder_names_every_knee_why_table_and_live_window_in_req_s(store: Store, tmp_path: Path) -> None:
    """An open-loop rate ladder (5, 10, 20, 40 req/s at ladder positions 1-4) refined between 20 and 40 req/s: its
    refinement windows carry the position of the step below (3), so by concurrency the knee and the windows above it
    could not be told apart. Everything a person reads names the rate."""
    study_id, outcome = ladder(store, tmp_path, {
        "ladder": [1, 2, 3, 4], "refine.enabled": True, "workload.num_requests": 5000, "window.measure_seconds": 10.0,
        "window.drain_seconds": 5.0,
        "arrival": {"kind": "constant", "rate": 1.0, "rates": [5.0, 10.0, 20.0, 40.0], "max_in_flight": 1024}},
        ServerConfig(max_running_requests=8, mem_fraction_static=0.85))
    ctx = study_context(store, study_id)
    (cid,) = ctx.knees
    assert outcome.knee is not None and outcome.knee.point is not None
    rate = outcome.knee.point.offered_rps
    assert rate is not None and 20.0 < rate < 40.0 and any(s.phase == "refine" for s in outcome.steps)
    failing = min(s.load for s in outcome.steps if s.load > rate and not s.stats.passes_sla)
    answer = build_answer(store, ctx)
    text = "\n".join(answer_lines(answer) + why_lines(answer))
    assert f"- **Knee**: {rate:,.2f} req/s ({failing:,.2f} req/s fails)" in text, text
    assert f"| {rate:,.2f} req/s, goodput" in text and f"({failing:,.2f} req/s) |" in text
    assert "concurrency 3" not in text and "c=3" not in text and "c=4" not in text
    b = answer.tiers[0].bindings[cid]
    assert b.line().startswith(f"{b.constraint} at {failing:,.2f} req/s: ") and b.offered_rps == failing, b.line()
    assert ctx.knees[cid].offered_rps == rate
    configs = "\n".join(configs_table(ctx, StudyView()))
    assert f"| final | {rate:,.2f} req/s |" in configs and "after concurrency" not in configs, configs
    state = read_state(store, study_id)
    (curve,) = state.curves
    assert curve.unit == "req/s" and curve.load == sorted(s.load for s in outcome.steps), curve
    assert curve.binding.startswith(f"{b.constraint} at {failing:,.2f} req/s")
    assert sorted(w.load for w in state.windows) == sorted(f"{s.load:,.2f} req/s" for s in outcome.steps)
