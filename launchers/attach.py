"""Use a server someone else started: read its knobs, never start or stop anything."""

from __future__ import annotations

import socket
import time
from typing import Any

import httpx

from launchers.base import ServerHandle, SpawnCallback, StopReport
from launchers.sglang import pick_server_info
from sweep.errors import LaunchError
from sweep.types import ServerConfig

_KNOBS = ("max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy")


def config_from_server_info(info: dict[str, Any]) -> ServerConfig:
    """The ServerConfig a running server actually has, from its (picked) /server_info."""
    values = {k: info.get(k) for k in _KNOBS}
    return ServerConfig(
        max_running_requests=int(values["max_running_requests"]) if values["max_running_requests"] is not None else None,
        mem_fraction_static=float(values["mem_fraction_static"]) if values["mem_fraction_static"] is not None else None,
        chunked_prefill_size=int(values["chunked_prefill_size"]) if values["chunked_prefill_size"] is not None else None,
        schedule_policy=str(values["schedule_policy"]) if values["schedule_policy"] is not None else None,
    )


class AttachLauncher:
    """A Launcher for an already running server at `url` (the knobs are whatever it was started with)."""

    kind = "attach"

    def __init__(self, url: str, api_key: str | None = None, wait_s: float = 10.0):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.wait_s = wait_s
        self.simulated = False
        self._info: dict[str, Any] | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        with httpx.Client(headers=self._headers(), timeout=timeout) as client:
            return client.get(f"{self.url}{path}")

    def _server_info(self) -> dict[str, Any]:
        last: Exception | None = None
        for _ in range(2):  # one retry on a fresh connection: idle keep-alives get dropped
            try:
                r = self._get("/server_info", timeout=30.0)
                if r.status_code in (401, 403):
                    raise LaunchError(f"{self.url}/server_info refused the API key (HTTP {r.status_code})",
                                      reason="crash")
                r.raise_for_status()
                return pick_server_info(dict(r.json()))  # only the knobs: raw server_args may carry keys
            except (httpx.HTTPError, ValueError) as exc:
                last = exc
        raise LaunchError(f"{self.url}/server_info unreadable: {last}", reason="crash")

    def start(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        """Check /health (waiting up to wait_s) and describe the server; `config` is ignored, it cannot change.
        Nothing is spawned, so on_spawn is never called."""
        t0 = time.monotonic()
        status: str = "no answer"
        while True:
            try:
                code = self._get("/health").status_code
                if code == 200:
                    break
                status = f"HTTP {code}"
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            if time.monotonic() - t0 >= self.wait_s:
                raise LaunchError(f"no healthy server at {self.url} within {self.wait_s:g} s ({status})",
                                  reason="timeout")
            time.sleep(0.2)
        info = self._server_info()
        self._info = info
        self.simulated = bool(info.get("simulated", False))
        return ServerHandle(config=config_from_server_info(info), url=self.url, api_key=self.api_key,
                            startup_s=0.0, simulated=self.simulated, version=str(info.get("version", "")),
                            server_info=info)

    def stop(self, handle: ServerHandle) -> StopReport:
        """Nothing to stop: the server belongs to someone else."""
        return StopReport(graceful=True, seconds=0.0)

    def alive(self, handle: ServerHandle) -> bool:
        """No process to watch here, so alive means /health answers 200."""
        try:
            return self._get("/health", timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    def environment(self) -> dict[str, Any]:
        """What the server reports about itself; the GPU side is unknown from here."""
        info = self._info
        if info is None:
            try:
                info = self._server_info()
            except LaunchError:
                info = {}
        return {"kind": self.kind, "url": self.url, "simulated": bool(info.get("simulated", False)),
                "sglang": info.get("version"), "model_path": info.get("model_path"),
                "host": socket.gethostname()}
