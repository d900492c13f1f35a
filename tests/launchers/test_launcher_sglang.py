"""SGLangLauncher lifecycle: the simulated server launched through the real launcher, faults included."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from sweep.core.errors import LaunchError, ServerDied
from sweep.core.types import JSON, ServerConfig
from sweep.launchers import procs
from sweep.launchers import sglang as sg
from sweep.launchers.base import Launcher
from sweep.profile import ServerSpec
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "models" / "tiny-llama")
FIXTURES = Path(__file__).parents[1] / "fixtures"


def sim_available() -> bool:
    """The colleague's simulated server answers --help (it is built concurrently)."""
    try:
        r = subprocess.run([sys.executable, "-m", "sglang_sim", "--help"], cwd=ROOT, capture_output=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


needs_sim = pytest.mark.skipif(not sim_available(), reason="sglang_sim not runnable yet")


def marked(mark: str) -> list[psutil.Process]:
    """Live processes carrying this test's marker in their environment (orphans inherit it too)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SWEEP_TEST_MARK") == mark and procs.is_live(p):
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.fixture
def mark() -> Iterator[str]:
    m = uuid.uuid4().hex
    yield m
    stray = marked(m)
    procs.kill_all(stray)  # never let a failing test leak processes into the next one
    assert not stray, f"processes left running: {[p.pid for p in stray]}"


@pytest.fixture
def make(tmp_path: Path, mark: str) -> Callable[..., sg.SGLangLauncher]:
    def _make(extra: list[str] | None = None, timeout_s: float = 30.0, drain_s: float = 5.0,
              validate: bool = True, model_path: str = TINY) -> sg.SGLangLauncher:
        spec = ServerSpec(launcher="sim", model_path=model_path, extra_args=extra or [], startup_timeout_s=timeout_s)
        return sg.SGLangLauncher(spec, tmp_path / "logs", module="sglang_sim", simulated=True,
                                 validate=validate, drain_s=drain_s,
                                 extra_env={"SWEEP_TEST_MARK": mark, "PYTHONPATH": str(ROOT)})
    return _make


# ------------------------------------------------------------------ classifier (no processes)

@pytest.mark.parametrize(("text", "rc", "reason"), [
    ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
     "address already in use", 1, "port_in_use"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 1, "oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", 1, "oom"),
    ("RuntimeError: KV cache pool too small: max_total_num_tokens=3", 1, "oom"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", 1, "cuda"),
    ("usage: sglang serve [-h] --model-path MODEL_PATH\nsglang serve: error: unrecognized arguments: --foo", 2,
     "bad_flag"),
    ("launch_server.py: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
     "--cuda-graph-max-bs-prefill", 2, "bad_flag"),
    ("OSError: [Errno 28] No space left on device: '/srv/reports/logs/x.log'", 1, "disk_full"),
    ("Traceback (most recent call last):\nValueError: something odd", 1, "crash"),
    ("", -9, "crash"),
])
def test_classify_failure(text: str, rc: int, reason: str) -> None:
    got, line = sg.classify_failure(text, rc)
    assert got == reason
    assert "\n" not in line and line


def test_real_log_excerpt_is_not_misclassified() -> None:
    # A healthy 0.5.17 run (retractions, warnings, shutdown) must not look like an OOM or CUDA failure.
    text = (FIXTURES / "sglang-0.5.17-server-log-excerpt.txt").read_text()
    assert sg.classify_failure(text, 0)[0] == "crash"


def test_pick_server_info_keeps_knobs_only() -> None:
    raw: dict[str, JSON] = {"version": "0.5.23", "api_key": "secret", "mem_fraction_static": 0.9, "schedule_policy": "fcfs",
           "internal_states": [{"max_total_num_tokens": 1000, "max_running_requests": 64}]}
    info = sg.pick_server_info(raw)
    assert info == {"version": "0.5.23", "mem_fraction_static": 0.9, "schedule_policy": "fcfs",
                    "max_total_num_tokens": 1000, "max_running_requests": 64}


def test_protocol_and_environment(tmp_path: Path) -> None:
    launcher = sg.SGLangLauncher(ServerSpec(model_path=TINY), tmp_path, module="sglang_sim", simulated=True)
    assert isinstance(launcher, Launcher) and launcher.kind == "sim" and launcher.simulated
    env = launcher.environment()
    assert env["model_path"] == TINY and env["versions"]["python"] and "sglang" in env["versions"]
    assert isinstance(env["gpus"], list)


# ------------------------------------------------------------------ the simulated server, end to end

@needs_sim
@pytest.mark.slow
def test_ready_server_info_and_clean_stop(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    launcher = make()
    h = launcher.start(ServerConfig(max_running_requests=8, schedule_policy="fcfs"))
    try:
        assert h.startup_s > 0 and h.url and h.pid and launcher.alive(h)
        assert h.server_info.get("max_running_requests") == 8
        assert h.server_info.get("schedule_policy") == "fcfs"
        assert h.api_key and h.api_key not in h.argv and "***" in h.argv
        assert httpx.get(f"{h.url}/health", headers=h.headers(), timeout=5).status_code == 200
        sg.check_alive(h)  # running: no exception
    finally:
        report = launcher.stop(h)
    assert report.graceful and report.killed_leftovers == [] and report.exit_code is not None
    assert not launcher.alive(h) and not marked(mark)
    assert h.log_path and h.api_key not in Path(h.log_path).read_text()


@needs_sim
@pytest.mark.slow
def test_startup_timeout_kills_the_group(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    launcher = make(["--sim-slow-start-s", "60"], timeout_s=2.0)
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as err:
        launcher.start(ServerConfig())
    assert err.value.reason == "timeout" and time.monotonic() - t0 < 20
    assert err.value.log_path and err.value.log_path in str(err.value)
    assert not marked(mark)


@needs_sim
@pytest.mark.slow
def test_oom_at_start(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    # tiny-llama's weights fit in any fraction; the 8B shape's 13 GiB do not fit in 5% of an H200.
    with pytest.raises(LaunchError) as err:
        make(model_path=str(ROOT / "models" / "llama3-8b-shape")).start(ServerConfig(mem_fraction_static=0.05))
    assert err.value.reason == "oom", str(err.value)
    assert not marked(mark)


@needs_sim
@pytest.mark.slow
def test_crash_mid_window_raises_server_died(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    launcher = make(["--sim-crash-after-s", "1"])
    h = launcher.start(ServerConfig())
    try:
        def died() -> ServerDied | None:
            try:
                sg.check_alive(h)
            except ServerDied as exc:
                return exc
            return None
        exc = wait_for(died, 15, "the simulated crash")
        assert isinstance(exc, sg.ServerExited) and exc.log_path == h.log_path and str(h.pid) in str(exc)
        assert not launcher.alive(h)
    finally:
        launcher.stop(h)
    assert not marked(mark)


@needs_sim
@pytest.mark.slow
def test_sigterm_ignored_is_killed_after_drain(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    launcher = make(["--sim-ignore-sigterm"], drain_s=1.0)
    h = launcher.start(ServerConfig())
    report = launcher.stop(h)
    assert not report.graceful and report.seconds >= 1.0
    assert h.process is not None and h.process.poll() is not None and not marked(mark)


@needs_sim
@pytest.mark.slow
def test_orphan_child_is_found_and_killed(make: Callable[..., sg.SGLangLauncher], mark: str) -> None:
    launcher = make(["--sim-spawn-orphan"])
    h = launcher.start(ServerConfig())
    # The orphan runs in its own session, so a process-group kill alone would miss it.
    orphans = wait_for(lambda: [p for p in marked(mark) if os.getsid(p.pid) != h.pid], 10, "the orphan")
    report = launcher.stop(h)
    assert {p.pid for p in orphans} <= set(report.killed_leftovers)
    assert not marked(mark)


@needs_sim
@pytest.mark.slow
def test_port_collision_is_retried(make: Callable[..., sg.SGLangLauncher], mark: str,
                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = socket.socket()  # bound, not listening: the server's bind fails, our health probe is refused fast
    blocker.bind(("127.0.0.1", 0))
    taken = blocker.getsockname()[1]
    ports = iter([taken])
    real = procs.free_port
    monkeypatch.setattr(sg.procs, "free_port",
                        lambda host="127.0.0.1", within=None: next(ports, None) or real(host, within))
    launcher = make()
    try:
        h = launcher.start(ServerConfig())
        try:
            assert h.url and not h.url.endswith(f":{taken}")
        finally:
            launcher.stop(h)
        logs = sorted((tmp_path / "logs").glob("*.log"))
        assert len(logs) == 2  # one failed launch, one retry, each with its own log
        reasons = {sg.classify_failure(p.read_text(), 1)[0] for p in logs}
        assert "port_in_use" in reasons
    finally:
        blocker.close()
    assert not marked(mark)


@needs_sim
def test_unknown_flag_rejected_before_launch(make: Callable[..., sg.SGLangLauncher], tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as err:
        make(["--no-such-flag", "1"]).start(ServerConfig())
    assert err.value.reason == "bad_flag" and "--no-such-flag" in str(err.value)
    assert not list((tmp_path / "logs").glob("*.log"))  # nothing was launched


@needs_sim
@pytest.mark.slow
def test_unknown_flag_without_validation_is_classified(make: Callable[..., sg.SGLangLauncher]) -> None:
    with pytest.raises(LaunchError) as err:
        make(["--no-such-flag", "1"], validate=False).start(ServerConfig())
    assert err.value.reason == "bad_flag", str(err.value)

