"""The launch's API key is in no process's argv (ps and /proc/PID/cmdline are world-readable), yet it works."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from sweep.core.errors import LaunchError
from sweep.core.types import ServerConfig
from sweep.launchers import keyshim
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import ServerSpec

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "models" / "tiny-llama")


def _cmdlines_with(secret: str) -> list[tuple[int, list[str]]]:
    """Every process on the host whose argv carries the secret."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if any(secret in arg for arg in cmd):
            found.append((p.pid, cmd))
    return found


@pytest.mark.slow
def test_the_api_key_is_in_no_process_argv_and_the_server_still_enforces_it(tmp_path: Path) -> None:
    spec = ServerSpec(launcher="sim", model_path=TINY, startup_timeout_s=60)
    launcher = SGLangLauncher(spec, tmp_path / "logs", module="sglang_sim", simulated=True, drain_s=5.0,
                              extra_env={"PYTHONPATH": str(ROOT)})
    h = launcher.start(ServerConfig(max_running_requests=4))
    try:
        assert h.api_key and h.pid
        tree = [psutil.Process(h.pid), *psutil.Process(h.pid).children(recursive=True)]
        for p in tree:
            assert not any(h.api_key in arg for arg in p.cmdline()), p.cmdline()
        assert _cmdlines_with(h.api_key) == []
        assert keyshim.KEY_ENV not in os.environ  # set for the child only, never in sweep's own environment

        with_key = httpx.get(f"{h.url}/v1/models", headers=h.headers(), timeout=10)
        without = httpx.get(f"{h.url}/v1/models", timeout=10)
        assert with_key.status_code == 200 and without.status_code == 401

        # What people are shown (and what is stored): a command one can run, with a placeholder for the key.
        shown = shlex.join(h.argv)
        assert h.api_key not in shown
        words = shlex.split(shown)
        assert words[:3] == [sys.executable, "-m", "sglang_sim"]
        assert words[words.index("--api-key") + 1] == keyshim.PLACEHOLDER
    finally:
        launcher.stop(h)


def _wrapper(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "start-server.sh"
    script.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\n{body}\n")
    return ["bash", str(script), "--"]


def _prefixed(tmp_path: Path, body: str) -> SGLangLauncher:
    spec = ServerSpec(launcher="sglang", model_path=TINY, startup_timeout_s=60, extra_args=["--sim-gpu", "H200"])
    return SGLangLauncher(spec, tmp_path / "logs", command_prefix=_wrapper(tmp_path, body), simulated=True,
                          validate=False, drain_s=5.0,
                          extra_env={"PYTHONPATH": str(ROOT), "SWEEP_TEST_PY": sys.executable,
                                     "SWEEP_TEST_MARK": str(tmp_path)})


@pytest.mark.slow
def test_a_command_wrapper_starts_the_server_through_the_shim_and_the_key_stays_off_argv(tmp_path: Path) -> None:
    launcher = _prefixed(tmp_path, 'shift; exec "$SWEEP_TEST_PY" -c "$SWEEP_SERVER_SHIM" sglang_sim "$@"')
    h = launcher.start(ServerConfig())
    try:
        assert h.api_key and _cmdlines_with(h.api_key) == []
        assert httpx.get(f"{h.url}/v1/models", headers=h.headers(), timeout=10).status_code == 200
        assert httpx.get(f"{h.url}/v1/models", timeout=10).status_code == 401
        assert h.argv[:3] == launcher.command_prefix and h.argv[-2:] == ["--api-key", keyshim.PLACEHOLDER]
    finally:
        launcher.stop(h)


@pytest.mark.slow
def test_a_command_wrapper_that_drops_the_key_is_refused_with_what_to_change(tmp_path: Path) -> None:
    launcher = _prefixed(tmp_path, 'shift; exec "$SWEEP_TEST_PY" -m sglang_sim "$@"')
    with pytest.raises(LaunchError) as err:
        launcher.start(ServerConfig())
    assert err.value.reason == "bad_flag" and keyshim.SHIM_ENV in str(err.value)
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SWEEP_TEST_MARK") == str(tmp_path) and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except psutil.Error:
            continue
    assert left == []  # the server that answered without a key was stopped
