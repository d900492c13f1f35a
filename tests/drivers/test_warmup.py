"""Warm-up means the server reached its steady state (issue 28 §1): the window opens once warmup_requests requests
*completed*, warmup_seconds passed and the step reached its load, on every driver; how it opened is stored and shown;
`sweep plan` warns of a warm-up shorter than a request."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sweep.analysis.measure import compute_stats, in_window, ttft_ms
from sweep.core.types import RequestRecord, RequestSpec, ServerConfig, WindowResult
from sweep.drivers.http import HttpDriver
from sweep.drivers.virtual import VirtualDriver
from sweep.ladder.wiring import make_driver, make_launcher
from sweep.launchers.base import ServerHandle
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import SLA, Profile, RateArrival, Window, load_profile
from sweep.study.orchestrator import Orchestrator
from sweep.workload.requests import build_workload
from tests.simserver import sim_server

ROOT = Path(__file__).resolve().parents[2]


def readme_profile(tmp_path: Path, overrides: dict[str, object]) -> Profile:
    """The README's own example profile (its `profiles/mine.yaml`), on the simulator."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```yaml\n# profiles/mine.yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "mine.yaml").write_text(block)
    return load_profile(tmp_path / "mine.yaml", {
        "workload.dataset": None, "server.launcher": "sim", "server.extra_args": [],
        "server.model_path": str(ROOT / "models" / "llama3-8b-shape"), **overrides})


def one_step(prof: Profile, tmp_path: Path, concurrency: int) -> WindowResult:
    launcher = make_launcher(prof, "sim", "virtual", tmp_path / "logs")
    handle = launcher.start(ServerConfig(max_running_requests=concurrency))
    try:
        return make_driver(prof, "virtual", launcher).run_window(handle, build_workload(prof.workload, base_dir=ROOT),
                                                                 concurrency, prof.window)
    finally:
        launcher.stop(handle)


def ended_by(records: list[RequestRecord], t: float) -> int:
    """Requests of the window that had ended (answered) by t."""
    return sum(1 for r in records if r.finished_at is not None and r.finished_at <= t)


def test_the_readme_example_measures_its_steady_state_not_its_first_burst(tmp_path: Path) -> None:
    """c=128 >= warmup_requests (100), warmup_seconds 0: counting sends opened the window at t0 and measured the
    synchronized first burst (TTFT P99 2.4 s against 0.15 s in steady state on the simulator)."""
    prof = readme_profile(tmp_path, {"window.measure_seconds": 60})
    assert (prof.window.warmup_requests, prof.window.warmup_seconds) == (100, 0.0)
    res = one_step(prof, tmp_path, 128)
    measured = [r for r in res.records if in_window(r, res.window_start, res.window_end)]
    assert len(measured) > 500 and all(ended_by(res.records, r.sent_at) >= 100 for r in measured)
    assert (res.window_opened_by, res.warmup_requests) == ("requests", 100)
    t0 = min(r.sent_at for r in res.records)
    assert res.warmup_seconds == pytest.approx(res.window_start - t0) and res.warmup_seconds > 1.0
    stats = compute_stats(res, prof.sla, bootstrap=0)
    steady = compute_stats(one_step(prof.model_copy(update={"window": prof.window.model_copy(
        update={"warmup_requests": 0, "warmup_seconds": 60.0})}), tmp_path, 128), prof.sla, bootstrap=0)
    burst = np.percentile([ttft_ms(r) for r in res.records[:128]], 99)
    assert stats.ttft_p99_ms is not None and steady.ttft_p99_ms is not None
    assert stats.ttft_p99_ms < 1.25 * steady.ttft_p99_ms and stats.ttft_p99_ms < burst / 4
    assert stats.passes_sla, stats.sla_failures


def _long_prompts(n: int = 400) -> list[RequestSpec]:
    rng = random.Random(0)
    return [RequestSpec(index=i, input_ids=tuple(rng.randrange(3, 1000) for _ in range(rng.randint(1000, 3000))),
                        output_tokens=rng.randint(16, 64)) for i in range(n)]


@pytest.mark.parametrize("procs", [1, 2])
def test_the_http_driver_opens_after_completions_across_client_processes(procs: int) -> None:
    """The simulated server, a real process: 16 users, 8 warm-up requests. Counting sends opened the window at the
    9th dispatch of the first burst (t0); now every measured request goes after 8 completions, in every process."""
    with sim_server() as url:
        handle = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        window = Window(warmup_requests=8, measure_seconds=3.0, drain_seconds=20.0)
        res = HttpDriver(client_procs=procs).run_window(handle, _long_prompts(), 16, window)
    measured = [r for r in res.records if in_window(r, res.window_start, res.window_end)]
    assert len(measured) > 10 and all(ended_by(res.records, r.sent_at) >= 8 for r in measured)
    assert all(r.warmup == (r.scheduled_at < res.window_start) for r in res.records)
    assert res.window_opened_by == "requests" and res.warmup_requests >= 8
    first = sorted(res.records, key=lambda r: r.sent_at)[:16]
    assert not set(map(id, first)) & set(map(id, measured))  # the first burst is warm-up
    stats = compute_stats(res, SLA(), bootstrap=0)
    assert stats.ttft_p99_ms is not None and stats.ttft_p99_ms < np.percentile([ttft_ms(r) for r in first], 99)


def _specs(n: int = 60) -> list[RequestSpec]:
    rng = random.Random(1)
    return [RequestSpec(index=i, input_ids=tuple(rng.randrange(3, 1000) for _ in range(rng.randint(100, 600))),
                        output_tokens=rng.randint(32, 200)) for i in range(n)]


def test_an_open_loop_opens_after_its_completions_and_its_load() -> None:
    """Open loop: the window opens when the warmup_requests-th request *completed* (was: at the next send after
    warmup_requests sends, from the schedule alone), and never before the arrivals ran one mean gap per user."""
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig())
    window = Window(warmup_requests=10, measure_seconds=20.0, drain_seconds=60.0)
    res = VirtualDriver(seed=2).run_window(handle, _specs(), 4, window, arrival=RateArrival(kind="poisson", rate=8.0))
    t0 = res.records[0].scheduled_at
    done = sorted(r.finished_at for r in res.records if r.finished_at is not None)
    sends = sorted(r.scheduled_at for r in res.records)
    assert res.window_start == pytest.approx(done[9])  # the 10th completion
    assert done[9] > sends[10]  # which came after the 11th send, where the schedule alone opened the window
    assert all(r.warmup == (r.scheduled_at < res.window_start) for r in res.records)
    assert res.window_opened_by == "requests" and res.warmup_requests == 10
    assert res.warmup_seconds == pytest.approx(done[9] - t0)
    # the load: 40 users (the step's label) at 8 req/s is one mean gap per user, 5 s, longer than 10 completions
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig())
    res = VirtualDriver(seed=2).run_window(handle, _specs(), 40, window, arrival=RateArrival(kind="poisson", rate=8.0))
    t0 = res.records[0].scheduled_at
    assert res.window_start - t0 == pytest.approx(5.0) and res.window_opened_by == "load"
    assert res.window_end - res.window_start == pytest.approx(20.0)


def test_the_rule_names_the_condition_met_last_and_ends_at_its_bound() -> None:
    from sweep.profile.warmup import WarmupRule

    w = Window(warmup_requests=100, warmup_seconds=30.0, request_timeout_s=60.0)
    rule = WarmupRule.closed(w, 16, 16)
    assert rule.bound == 7 * 60.0  # ceil(100 / 16) rounds of the request timeout: a count is honoured in full
    assert rule.due(0.0, 29.0, 12.0, 0.1) is None  # 100 done, every user in, 30 s not yet
    assert rule.due(0.0, 31.0, 12.0, 0.1) == (30.0, "seconds")
    assert rule.due(0.0, 50.0, 45.0, 0.1) == (45.0, "requests")
    assert rule.due(0.0, 400.0, None, 0.1) is None
    assert rule.due(0.0, 420.0, None, 0.1) == (420.0, "bound")  # the warm-up stalled: the window opens anyway
    idle = WarmupRule.closed(Window(warmup_requests=0), 8, 8)
    assert idle.due(0.0, 0.2, None, None) is None and idle.due(0.0, 0.2, None, 0.1) == (0.1, "load")
    assert WarmupRule.closed(Window(warmup_requests=0), 8, 0).due(5.0, 5.0, None, None) == (5.0, "load")


def test_a_warm_up_whose_every_request_is_refused_opens_by_its_bound() -> None:
    handle = VirtualLauncher("H200", "llama3-8b").start(ServerConfig(max_running_requests=8))
    huge = [RequestSpec(index=0, input_ids=tuple(range(3, 300_003)), output_tokens=8)]
    res = VirtualDriver().run_window(handle, huge, 2, Window(warmup_requests=50, measure_seconds=2.0,
                                                             drain_seconds=1.0))
    assert res.window_opened_by == "bound" and res.warmup_requests == 2


@pytest.mark.integration
def test_how_each_window_opened_is_stored_and_reported(tmp_path: Path) -> None:
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.launcher": "sim", "soak.enabled": False,
                                                           "search.space": {"max_running_requests": [8]}})
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "out", driver="virtual").knee("opened")
    con = sqlite3.connect(tmp_path / "r.db")
    rows = con.execute("SELECT concurrency, window_opened_by, warmup_requests, warmup_s FROM runs "
                       "WHERE status = 'completed' ORDER BY id").fetchall()
    assert rows and all(by == "requests" and done >= 4 and s > 0 for _, by, done, s in rows), rows
    report = run.report.markdown.read_text()
    steps = report.split("## Every configuration and step", 1)[1].split("\n## ", 1)[0]
    assert "| window opened |" in steps
    c, _, done, s = rows[0]
    assert f"requests after {s:,.1f} s, {done:,} done" in steps


def _plan(*sets: str) -> str:
    args = [a for s in sets for a in ("--set", s)]
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "plan", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
                           *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_plan_warns_of_a_warm_up_shorter_than_a_request() -> None:
    assert "warning" not in _plan()  # smoke waits for 4 completed requests: at least one request long
    out = _plan("window.warmup_requests=0")
    warned = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "c=2, 4, 8" in warned[0] and "less than one request" in warned[0], out
    assert "warning" not in _plan("window.warmup_requests=0", "window.warmup_seconds=5")
