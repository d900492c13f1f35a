"""AttachLauncher against a simulated server that the test starts (and stops) itself."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from test_launcher_sglang import ROOT, TINY, needs_sim  # pytest puts tests/ on sys.path (rootdir import mode)

from launchers import procs
from launchers.attach import AttachLauncher, config_from_server_info
from launchers.base import Launcher, ServerHandle
from launchers.sglang import SGLangLauncher
from sweep.errors import LaunchError
from sweep.profile import ServerSpec
from sweep.types import ServerConfig


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SGLangLauncher, ServerHandle]]:
    spec = ServerSpec(launcher="sim", model_path=TINY, startup_timeout_s=30)
    launcher = SGLangLauncher(spec, tmp_path_factory.mktemp("attach-logs"), module="launchers.sim",
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
