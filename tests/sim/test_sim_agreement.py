"""HTTP mode (a real `python -m sglang_sim` process) and virtual mode agree on the same seeded window."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sweep.analysis.crosscheck import FigureKind, Tolerance
from sweep.analysis.measure import compute_stats
from sweep.analysis.run_stats import RunStats
from sweep.core.types import ServerConfig
from sweep.ladder.wiring import ROOT, make_driver, make_launcher
from sweep.profile import Profile, load_profile
from sweep.workload.requests import build_workload

# Low concurrency so a loaded 2-core CI machine's Python keeps up with the simulated GPU's wall clock:
# at 4 streams the HTTP sim spends well under a tenth of each ~6 ms decode step on its own work.
CONCURRENCY = 4
CONFIG = ServerConfig(max_running_requests=8, mem_fraction_static=0.85)


def _profile() -> Profile:
    """The smoke profile with one longer window and longer prompts; launcher pinned to the sim.

    Longer prompts make TTFT ~60 ms (with the 8 ms host stage), so the few milliseconds of real socket and
    event-loop work that only the HTTP mode pays stay a small share of it.
    """
    return load_profile(ROOT / "profiles" / "smoke.yaml", {
        "server.launcher": "sim", "window.measure_seconds": 6, "window.warmup_requests": 8,
        "window.drain_seconds": 10, "workload.prompt_len": {"kind": "uniform", "low": 1024, "high": 2048}})


def _quiet(deadline_s: float = 90.0) -> bool:
    """Whether the 1-minute load average falls to 1.5x the cores within `deadline_s` (polled each second): a slow
    test that follows other load on the same machine waits for it to pass instead of measuring it."""
    limit = 1.5 * (os.cpu_count() or 1)
    end = time.monotonic() + deadline_s
    while os.getloadavg()[0] > limit and time.monotonic() < end:
        time.sleep(1.0)
    return os.getloadavg()[0] <= limit


def _measure(profile: Profile, driver_name: str, log_dir: Path) -> RunStats:
    """One window at CONCURRENCY through the app's own launcher/driver wiring; the stats of that window."""
    launcher = make_launcher(profile, "sim", driver_name, log_dir)
    driver = make_driver(profile, driver_name, launcher)
    specs = build_workload(profile.workload, base_dir=ROOT)
    handle = launcher.start(CONFIG)
    try:
        result = driver.run_window(handle, specs, CONCURRENCY, profile.window)
    finally:
        launcher.stop(handle)
    return compute_stats(result, profile.sla, bootstrap=0)


@pytest.mark.slow
def test_http_and_virtual_modes_agree_on_throughput_and_ttft(tmp_path: Path) -> None:
    profile = _profile()
    virtual = _measure(profile, "virtual", tmp_path / "logs")
    # A wall-clock window on a starved machine measures the machine, not the sim (with two CPU hogs on two
    # cores the server's sleeps overshoot and TTFT P50 rose 20-40%): sweep's client_bound verdict or a load
    # average above 1.5x the cores says so. Each attempt first waits (up to 90 s) for the load to settle; one retry,
    # then a skip that names the reason, except in CI (SWEEP_REQUIRE_TIMING=1, set by .ci/run), where a skipped
    # comparison would pass silently: there it fails.
    for attempt in range(2):
        _quiet()
        http = _measure(profile, "http", tmp_path / f"logs{attempt}")
        if not http.client_bound and os.getloadavg()[0] <= 1.5 * (os.cpu_count() or 1):
            break
    else:
        reason = "machine too loaded for a wall-clock comparison (client-bound or load average above 1.5x cores)"
        if os.environ.get("SWEEP_REQUIRE_TIMING") == "1":
            pytest.fail(reason + "; SWEEP_REQUIRE_TIMING=1 makes this a failure, not a skip")
        pytest.skip(reason)
    assert http.n_errors == 0 and virtual.n_errors == 0
    assert http.n_completed >= 50 and virtual.n_completed >= 50  # enough requests for stable medians
    # "Agree" is sweep's one definition (the cross-check's Tolerance): within 10%, or 20 ms for a latency. Since
    # the host stage was refitted to 8 ms (docs/calibration.md) TTFT P50 is ~60 ms here, and the few ms of real
    # socket and event-loop work only the HTTP mode pays are ~10% of it.
    tol = Tolerance()
    figures: tuple[tuple[str, FigureKind], ...] = (("output_tps", "rate"), ("ttft_p50_ms", "request"))
    for key, kind in figures:
        h, v = getattr(http, key), getattr(virtual, key)
        assert v > 0 and abs(h - v) <= tol.allowed(h, v, kind), \
            f"{key}: http {h:.1f} vs virtual {v:.1f} ({h / v - 1:+.1%})"


@pytest.mark.slow
def test_agreement_is_sensitive_to_a_slower_simulated_gpu(tmp_path: Path) -> None:
    """The comparison can fail: a 3x slower GPU in virtual mode falls far outside the 10% band."""
    profile = _profile()
    slow = profile.model_copy(update={"server": profile.server.model_copy(
        update={"extra_args": [*profile.server.extra_args, "--sim-speed", "3"]})})
    base = _measure(profile, "virtual", tmp_path / "logs")
    slowed = _measure(slow, "virtual", tmp_path / "logs")
    assert slowed.output_tps is not None and base.output_tps is not None
    assert slowed.output_tps < 0.8 * base.output_tps
