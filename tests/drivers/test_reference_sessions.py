"""The cross-check's reference client replays sessions (issue 31 §4): against the simulated server, its session
figures agree with sweep's own driver within the cross-check's tolerance, and a replay that drops the earlier turns'
context is caught by the check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sweep.analysis.crosscheck import SESSION_FIGURES, Tolerance, compare_runs
from sweep.analysis.measure import compute_stats
from sweep.analysis.run_stats import StatValue
from sweep.analysis.sessions import session_columns
from sweep.core.errors import UsageError
from sweep.core.types import ServerConfig, WindowResult
from sweep.drivers.http import HttpDriver
from sweep.drivers.reference import H11Reference
from sweep.ladder.crosscheck_step import choose_reference, flush_cache
from sweep.launchers.base import ServerHandle
from sweep.profile import SLA, Window, Workload, load_profile
from sweep.workload.lexicon import SIM
from sweep.workload.sessions import Conversation, Reply, SessionStream
from tests.simserver import sim_server

SMOKE = Path(__file__).resolve().parents[2] / "profiles" / "smoke.yaml"
WINDOW = Window(warmup_requests=4, measure_seconds=4.0, drain_seconds=15.0, request_timeout_s=30.0)
SESSION_COLS = {c for c, _, _ in SESSION_FIGURES}


def _workload() -> Workload:
    return Workload.model_validate({
        "seed": 11, "prompt_len": {"kind": "uniform", "low": 200, "high": 400},
        "output_len": {"kind": "uniform", "low": 8, "high": 16},
        "shared_prefix": {"groups": 2, "length": 64, "share": 0.5},
        "sessions": {"turns": {"kind": "uniform", "low": 2, "high": 4}, "followup_len": {"kind": "fixed", "value": 24},
                     "think_time": {"kind": "fixed", "value": 0.05},
                     "fanout": {"kind": "uniform", "low": 1, "high": 2}}})


class Forgetful(Conversation):
    """A broken replay: each turn sends only its own message, the earlier turns' context dropped."""

    def add(self, turn: list[tuple[object, Reply]]) -> None:  # type: ignore[override]
        return None


def _columns(result: WindowResult) -> dict[str, StatValue]:
    stats = compute_stats(result, SLA(), min_requests=1)
    return replace(stats, **session_columns(result.records)).columns()


def _session_checks(ours: dict[str, StatValue], ref: dict[str, StatValue]) -> dict[str, bool | None]:
    check = compare_runs(ours, ref, Tolerance())
    return {f.column: f.agrees for f in check.figures if f.column in SESSION_COLS}


@pytest.mark.parametrize("api", ["generate", "chat"])
def test_reference_replays_the_same_sessions_and_agrees_and_a_dropped_context_is_caught(api: str) -> None:
    w = _workload()
    with sim_server("--enable-cache-report") as url:  # chat reports cached tokens only then, as SGLang
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        assert flush_cache(url, h.headers())
        ours = HttpDriver(api=api).run_window(h, SessionStream(w), 4, WINDOW)
        assert flush_cache(url, h.headers())
        ref = H11Reference(api=api).run_window(h, SessionStream(w), 4, WINDOW)
        assert flush_cache(url, h.headers())
        broken = H11Reference(api=api, conversation=Forgetful).run_window(h, SessionStream(w), 4, WINDOW)
    stream = SessionStream(w)
    for res in (ours, ref):
        assert all(r.error is None for r in res.records if r.session_turns is not None)
        done = {r.index: r.session_turns for r in res.records if r.session_turns is not None}
        assert len(done) >= 6
        for k, turns in done.items():  # the same conversations: session k ran its own turns and fan-out
            spec = stream.at(k)
            assert turns == len(spec.turns)
            rows = [r for r in res.records if r.index == k]
            assert len(rows) == sum(len(t.branches) for t in spec.turns)
            later = [r for r in rows if (r.turn or 0) > 1]
            assert all(r.context_tokens > 0 and r.prompt_tokens > r.context_tokens for r in later)
    mine, theirs, bad = _columns(ours), _columns(ref), _columns(broken)
    assert mine["sessions_completed"] and theirs["sessions_completed"]
    verdicts = _session_checks(mine, theirs)
    assert set(verdicts) == SESSION_COLS
    assert all(v is not False for v in verdicts.values()), (verdicts, {c: (mine[c], theirs[c]) for c in SESSION_COLS})
    assert verdicts["cache_hit_later"] is True and verdicts["sessions_completed"] is True
    assert verdicts["later_prompt_tokens"] is True
    caught = _session_checks(mine, bad)
    assert caught["cache_hit_later"] is False, (mine["cache_hit_later"], bad["cache_hit_later"])
    assert caught["later_prompt_tokens"] is False, (mine["later_prompt_tokens"], bad["later_prompt_tokens"])


def test_a_sessions_profile_gets_the_h11_reference_and_bench_serving_is_refused() -> None:
    """bench_serving sends single requests: auto picks the h11 reference for sessions even where bench_serving could
    run (crosscheck.command set), and reference: bench_serving is refused with the way out."""
    sessions = {"workload.sessions": {"turns": {"kind": "fixed", "value": 2}},
                "crosscheck.command": ["python3", "-m", "sglang.bench_serving"]}
    prof = load_profile(SMOKE, sessions)
    assert isinstance(choose_reference(prof, "", SIM), H11Reference)
    single = load_profile(SMOKE, {"crosscheck.command": ["python3", "-m", "sglang.bench_serving"]})
    assert not isinstance(choose_reference(single, "", SIM), H11Reference)  # unchanged for single requests
    with pytest.raises(UsageError, match="cannot replay multi-turn sessions"):
        choose_reference(load_profile(SMOKE, {**sessions, "crosscheck.reference": "bench_serving"}), "", SIM)
