"""Test helper: start the simulated SGLang server as a subprocess on a free port and wait until healthy."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


class Url(str):
    """A base URL that also carries the server process."""

    proc: subprocess.Popen[bytes]

    def __new__(cls, url: str, proc: subprocess.Popen[bytes]) -> Url:
        obj = super().__new__(cls, url)
        obj.proc = proc
        return obj


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(proc: subprocess.Popen[Any], url: str, deadline_s: float = 30.0) -> None:
    """Poll /health until 200 (a condition with a deadline); fail if the process exits first."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} during start-up")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)  # polling interval of a condition with a deadline, not a fixed wait
    raise AssertionError("server not healthy before the deadline")


@contextlib.contextmanager
def sim_server(*extra: str, timeout_s: float = 60.0) -> Iterator[Url]:
    """Run `python -m sglang_sim --enable-metrics` with extra flags; yields its base URL (.proc: the process)."""
    port = free_port()
    argv = [sys.executable, "-m", "sglang_sim", "--model-path", str(ROOT / "models" / "llama3-8b-shape"),
            "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", *extra]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, timeout_s)
        yield Url(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
