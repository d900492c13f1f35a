"""Use a server someone else started: read its knobs, never start or stop anything.

Liveness during a window (alive()) is not /health: SGLang's /health runs a one-token generation through the
scheduler (up to 20 s under load, 503 on its timeout), so polling it adds requests to the load being measured
and reads a busy server as a dead one. alive() asks /model_info instead (answered by the HTTP front end, no
scheduler round trip, no generation): any answer below 500 means the server is up (a 404 from an older
version without /model_info too). SGLang takes its whole process tree down when the scheduler dies, so a
dead server stops answering there; a hung scheduler shows up as request timeouts. Checks are rate-limited
(one per check_interval_s, whatever the caller's rate) on one persistent client with a timeout, and the
server is declared dead only after `failures_to_die` consecutive failed checks.

A server started with an API key refuses every request without it (SGLang answers 401 on all but /health,
/ready and /metrics). The key comes from the file `server.api_key_file` names, else from the environment
variable SWEEP_API_KEY, never from argv (anyone on the host reads argv); it goes out as `Authorization: Bearer`
on every request: the drivers, /metrics, /flush_cache, /server_info and the liveness checks (ServerHandle.headers).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from sweep.core.environment import Environment, GpuSummary
from sweep.core.errors import LaunchError, ProfileError
from sweep.core.types import ServerConfig
from sweep.engines import Dialect, default
from sweep.launchers import procs
from sweep.launchers.base import (
    LauncherKind,
    ServerHandle,
    ServerInfo,
    SpawnCallback,
    StopReport,
)
from sweep.launchers.sglang import pick_server_info


def on_this_host(url: str) -> bool:
    """Whether a server URL points at this machine: a loopback address, localhost or this host's own name."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", socket.gethostname().lower()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


API_KEY_ENV = "SWEEP_API_KEY"  # the attached server's API key, when the profile names no server.api_key_file
KEY_HINT = f"set {API_KEY_ENV} or server.api_key_file"


def attach_api_key(key_file: str | None, environ: os._Environ[str] | dict[str, str] | None = None) -> str | None:
    """The attached server's API key: the first line of `key_file` when given (ProfileError when it cannot be
    read or is empty), else $SWEEP_API_KEY; None when neither is set."""
    if key_file:
        try:
            lines = Path(key_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"server.api_key_file {key_file}: cannot read it "
                               f"({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
        key = lines[0].strip() if lines else ""
        if not key:
            raise ProfileError(f"server.api_key_file {key_file}: empty (the key is its first line)")
        return key
    return (environ if environ is not None else os.environ).get(API_KEY_ENV) or None


def refused(url: str, status: int, key_sent: bool) -> str:
    """The line for a 401/403: whether a key was sent at all decides what the reader has to fix."""
    if key_sent:
        return f"{url}: the API key sent was refused (HTTP {status}); check {API_KEY_ENV} or server.api_key_file"
    return f"{url}: the server refused the request: no API key was sent ({KEY_HINT} to the server's key; HTTP {status})"


def config_from_server_info(info: ServerInfo) -> ServerConfig:
    """The ServerConfig a running server actually has, from its (picked) /server_info."""
    return ServerConfig.from_mapping(info)


class AttachLauncher:
    """A Launcher for an already running server at `url` (the knobs are whatever it was started with)."""

    kind: LauncherKind = "attach"

    LIVENESS_PATH = "/model_info"

    def __init__(self, url: str, api_key: str | None = None, wait_s: float = 10.0, check_interval_s: float = 1.0,
                 check_timeout_s: float = 5.0, failures_to_die: int = 3,
                 gpu_inventory: Callable[[], list[procs.GpuRow]] = procs.gpu_inventory,
                 dialect: Dialect | None = None):
        self.url = url.rstrip("/")
        self.dialect = dialect or default()  # what the server speaks: its paths
        self.api_key = api_key
        self.wait_s = wait_s
        self.check_interval_s = check_interval_s
        self.check_timeout_s = check_timeout_s
        self.failures_to_die = failures_to_die
        self.gpu_inventory = gpu_inventory
        self.simulated = False
        self._info: ServerInfo | None = None
        self._live_lock = threading.Lock()  # alive() may be called from the driver's liveness thread
        self._live_client: httpx.Client | None = None
        self._checked_at = -float("inf")
        self._failures = 0

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        with httpx.Client(headers=self._headers(), timeout=timeout) as client:
            return client.get(f"{self.url}{path}")

    def _server_info(self) -> ServerInfo:
        last: Exception | None = None
        for _ in range(2):  # one retry on a fresh connection: idle keep-alives get dropped
            try:
                r = self._get(self.dialect.paths.server_info, timeout=30.0)
                if r.status_code in (401, 403):
                    raise LaunchError(refused(f"{self.url}{self.dialect.paths.server_info}", r.status_code,
                                              bool(self.api_key)), reason="crash")
                r.raise_for_status()
                raw = r.json()
                if not isinstance(raw, dict):
                    raise ValueError(f"not a JSON object: {type(raw).__name__}")
                info = pick_server_info(raw)  # only the knobs: raw server_args may carry keys
                if raw.get("simulated") and raw.get("sim_gpu"):
                    info["sim_gpu"] = str(raw["sim_gpu"])  # the GPU the simulator models
                return info
            except (httpx.HTTPError, ValueError) as exc:
                last = exc
        raise LaunchError(f"{self.url}{self.dialect.paths.server_info} unreadable: {last}", reason="crash")

    def start(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        """Check /health (waiting up to wait_s) and describe the server; `config` is ignored, it cannot change.
        Nothing is spawned, so on_spawn is never called."""
        t0 = time.monotonic()
        status: str = "no answer"
        while True:
            try:
                code = self._get(self.dialect.paths.health).status_code
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
                            server_info=info, dialect=self.dialect)

    def stop(self, handle: ServerHandle) -> StopReport:
        """Nothing to stop: the server belongs to someone else (only the liveness client is closed)."""
        with self._live_lock:
            if self._live_client is not None:
                self._live_client.close()
                self._live_client = None
            self._checked_at, self._failures = -float("inf"), 0
        return StopReport(graceful=True, seconds=0.0)

    def alive(self, handle: ServerHandle) -> bool:
        """False once `failures_to_die` checks in a row failed; at most one check per check_interval_s.

        Blocks for one check at most (check_timeout_s): call it off the event loop (the HTTP driver does).
        """
        with self._live_lock:
            if time.monotonic() - self._checked_at >= self.check_interval_s:
                self._failures = 0 if self._ping() else self._failures + 1
                self._checked_at = time.monotonic()  # after the check: a slow answer does not cause a burst
            return self._failures < self.failures_to_die

    def _ping(self) -> bool:
        """One liveness check on the persistent client: any answer below 500 from LIVENESS_PATH."""
        if self._live_client is None:
            self._live_client = httpx.Client(headers=self._headers(), timeout=self.check_timeout_s)
        try:
            return self._live_client.get(f"{self.url}{self.LIVENESS_PATH}").status_code < 500
        except httpx.HTTPError:
            return False

    def exit_detail(self, handle: ServerHandle) -> str | None:
        """None: an attached server is not sweep's process: its exit is not sweep's to read."""
        return None

    def environment(self) -> Environment:
        """What the server reports about itself; plus this host's GPUs (NVML) when the server listens here.

        A server on another host: its GPUs are unknown from here. A simulated server (its /server_info says
        so) gets no real GPU, only the one it models, labelled simulated.
        """
        info = self._info
        if info is None:
            try:
                info = self._server_info()
            except LaunchError:
                info = {}
        simulated = bool(info.get("simulated", False))
        version, model_path = info.get("version"), info.get("model_path")
        env: Environment = {"kind": self.kind, "engine": self.dialect.name, "url": self.url, "simulated": simulated,
                            "sglang_version": None if version is None else str(version),
                            "model_path": None if model_path is None else str(model_path),
                            "host": socket.gethostname()}
        if simulated and info.get("sim_gpu"):
            env["gpu_name"], env["gpu_count"] = f"{info['sim_gpu']} (simulated)", 1
        if not simulated and on_this_host(self.url):
            gpus = self.gpu_inventory()
            if gpus:
                env["gpus"] = [GpuSummary(name=g["name"], memory_total_mib=g["memory_total_mib"]) for g in gpus]
                env["driver_version"] = gpus[0]["driver"]
                env["gpu_scope"] = "every GPU of this host (the attached server listens here)"
        return env
