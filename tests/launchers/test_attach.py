"""AttachLauncher against a simulated server that the test starts (and stops) itself."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sweep.core.errors import LaunchError
from sweep.core.types import ServerConfig
from sweep.ladder.environment import normalise_env
from sweep.launchers import procs
from sweep.launchers.attach import AttachLauncher, config_from_server_info, on_this_host
from sweep.launchers.base import Launcher, ServerHandle
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import ServerSpec, load_profile
from tests.launchers.test_attach_timing import timed_server
from tests.launchers.test_launcher_sglang import (
    ROOT,
    TINY,
    needs_sim,
)
from tests.simserver import sim_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SGLangLauncher, ServerHandle]]:
    spec = ServerSpec(launcher="sim", model_path=TINY, startup_timeout_s=30)
    launcher = SGLangLauncher(spec, tmp_path_factory.mktemp("attach-logs"), module="sglang_sim",
                              simulated=True, extra_env={"PYTHONPATH": str(ROOT)})
    handle = launcher.start(ServerConfig(max_running_requests=12, chunked_prefill_size=1024))
    yield launcher, handle
    launcher.stop(handle)


def test_config_from_server_info() -> None:
    cfg = config_from_server_info({"max_running_requests": 64, "mem_fraction_static": 0.88,
                                   "schedule_policy": "lpm"})
    assert cfg == ServerConfig(max_running_requests=64, mem_fraction_static=0.88, schedule_policy="lpm")


def test_nothing_listening_is_a_timeout() -> None:
    port = procs.free_port()
    with pytest.raises(LaunchError) as err:
        AttachLauncher(f"http://127.0.0.1:{port}", wait_s=0.5).start(ServerConfig())
    assert err.value.reason == "timeout" and str(port) in str(err.value)


@needs_sim
@pytest.mark.slow
def test_attach_reads_knobs_and_never_stops(server: tuple[SGLangLauncher, ServerHandle]) -> None:
    owner, started = server
    attach = AttachLauncher(started.url or "", api_key=started.api_key)
    assert isinstance(attach, Launcher) and attach.kind == "attach"
    h = attach.start(ServerConfig(max_running_requests=999))  # the request cannot change a running server
    assert h.url == started.url and h.pid is None and h.process is None
    assert h.config.max_running_requests == 12 and h.config.chunked_prefill_size == 1024
    assert h.simulated is attach.simulated and attach.simulated == bool(h.server_info.get("simulated", False))
    assert attach.alive(h)
    report = attach.stop(h)
    assert report.graceful and report.killed_leftovers == []
    assert owner.alive(started)  # still running: attach never stops what it did not start
    assert httpx.get(f"{started.url}/health", timeout=5).status_code == 200
    env = attach.environment()
    assert env["kind"] == "attach" and env["url"] == started.url


def test_on_this_host() -> None:
    assert on_this_host("http://127.0.0.1:30000") and on_this_host("http://localhost:1") and on_this_host("http://[::1]:2")
    assert on_this_host(f"http://{socket.gethostname()}:30000")
    assert not on_this_host("http://10.1.2.3:30000") and not on_this_host("http://gpu-box.example:30000")


H200: list[procs.GpuRow] = [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_used_mib": 0,
         "memory_free_mib": 143771, "driver": "570.124.06"}]


def test_a_server_on_this_host_gets_this_hosts_gpus_so_the_report_can_conclude() -> None:
    # the fake server is a real local process that is not simulated; NVML's answer is what this host lacks
    with timed_server("--server-info", json.dumps({"max_running_requests": 256, "schedule_policy": "lpm"})) as url:
        attach = AttachLauncher(url, gpu_inventory=lambda: H200)
        env = attach.environment()
        no_gpu = AttachLauncher(url.replace("127.0.0.1", "localhost"), gpu_inventory=list).environment()
    assert env["gpus"] == [{"name": "NVIDIA H200", "memory_total_mib": 143771}] and env["driver_version"] == "570.124.06"
    assert "gpus" not in no_gpu  # NVML sees no GPU: nothing invented
    row = normalise_env(env, load_profile(ROOT / "profiles" / "smoke.yaml"), simulated=False)
    assert (row["gpu_name"], row["gpu_memory_mib"], row["gpu_count"], row["driver_version"]) == \
        ("NVIDIA H200", 143771, 1, "570.124.06")


@needs_sim
@pytest.mark.slow
def test_an_attached_simulator_gets_no_real_gpu(server: tuple[SGLangLauncher, ServerHandle]) -> None:
    _, started = server
    env = AttachLauncher(started.url or "", api_key=started.api_key, gpu_inventory=lambda: H200).environment()
    assert env["simulated"] is True and "gpus" not in env
    assert env["gpu_name"] == "H200 (simulated)"  # the one it models (its --sim-gpu), so the report can conclude


@needs_sim
@pytest.mark.slow
def test_ladder_on_an_attached_server_is_labelled_with_its_own_knobs(tmp_path: Path) -> None:
    with sim_server("--max-running-requests", "12", "--chunked-prefill-size", "1024") as url:
        real = config_from_server_info(httpx.get(f"{url}/server_info", timeout=10).json())
        db = tmp_path / "results.db"
        proc = subprocess.run(
            [sys.executable, "-m", "sweep.cli", "ladder", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
             "--launcher", "attach", "--set", f"server.url={url}", "--set", "ladder=[2]",
             "--set", "window.measure_seconds=1.5", "--set", "window.min_requests=5", "--db", str(db), "--out", str(tmp_path / "reports")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert real.max_running_requests == 12 and real.chunked_prefill_size == 1024 and real.schedule_policy
    con = sqlite3.connect(db)
    [row] = con.execute("SELECT max_running_requests, mem_fraction_static, chunked_prefill_size, schedule_policy "
                        "FROM server_configs").fetchall()
    assert row == (12, real.mem_fraction_static, 1024, real.schedule_policy)
    out = " ".join(proc.stderr.split())
    assert "the server's defaults" not in out and " defaults c=2" not in out  # knee line and step lines
    assert "max_running_requests=12" in out and "chunked_prefill_size=1024" in out
