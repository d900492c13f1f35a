"""The Launcher protocol: a ServerConfig goes in, a ServerHandle comes out; callers never branch on the kind."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from sweep.core.environment import Environment
from sweep.core.types import JSON, ServerConfig
from sweep.engines import Dialect, default

if TYPE_CHECKING:  # the simulator is a separate package; only the virtual launcher builds one of its engines
    from sglang_sim.engine import Engine

# What a launcher started (stored as server_configs.launcher): real SGLang, the simulated server process,
# someone else's server, or the simulator's engine in-process.
LauncherKind = Literal["sglang", "sim", "attach", "virtual"]

# The knobs and facts a server reports at /server_info (sweep.launchers.sglang.pick_server_info keeps a few),
# plus what sweep adds beside them (the launch record, the GPU group it gave the server). JSON: narrow to read.
ServerInfo = dict[str, JSON]


@dataclass
class ServerHandle:
    """A running (or in-process simulated) server that a driver can load."""

    config: ServerConfig
    url: str | None  # base URL for the HTTP driver; None for an in-process virtual engine
    argv: list[str] = field(default_factory=list)
    pid: int | None = None
    pgid: int | None = None
    log_path: str | None = None
    api_key: str | None = None  # never stored in results.db or logs
    startup_s: float = 0.0
    simulated: bool = False
    version: str = ""
    server_info: ServerInfo = field(default_factory=dict)  # resolved args from /server_info
    engine: Engine | None = None  # the in-process simulator engine (VirtualLauncher; the virtual driver runs it)
    process: subprocess.Popen[bytes] | None = None  # where the launcher started a server process
    dialect: Dialect = field(default_factory=default)  # what the server speaks: its paths and metric names

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass
class StopReport:
    """What stopping a server took and whether anything had to be cleaned up."""

    graceful: bool
    seconds: float
    killed_leftovers: list[int] = field(default_factory=list)
    gpu_mem_released: bool | None = None  # None where no GPU is visible
    exit_code: int | None = None


@dataclass(frozen=True)
class LaunchRecord:
    """Who a spawned server process is, written down the moment it exists (long before it is ready), so a
    later resume can find and kill it exactly: pid + create time (a pid can be reused), its process group
    and session, the host it runs on (a pid means nothing elsewhere) and its log file."""

    pid: int
    pgid: int
    sid: int
    create_time: float
    host: str
    log_path: str | None = None
    port: int | None = None  # several workers on one host: never a port twice at once
    cuda_visible_devices: str | None = None  # ... nor a GPU (the group the server was given)
    # sha256 of the launch's random API key (never the key): the resume of a kill -9 finds the key wherever the
    # dead run's server printed it into its log (SGLang prints server_args, api_key included) and scrubs it.
    credential_digest: str | None = None

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)

    @staticmethod
    def this_host() -> str:
        return socket.gethostname()


SpawnCallback = Callable[[LaunchRecord], None]


@runtime_checkable
class Launcher(Protocol):
    kind: LauncherKind
    simulated: bool

    def start(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        """Start one configuration and wait until it is ready. A launcher that spawns a process calls
        on_spawn(record) right after the spawn (again for a retried spawn), before waiting for readiness."""
        ...

    def stop(self, handle: ServerHandle) -> StopReport: ...

    def alive(self, handle: ServerHandle) -> bool: ...

    def environment(self) -> Environment:
        """Versions, GPU and host facts stored with each study."""
        ...

    def exit_detail(self, handle: ServerHandle) -> str | None:
        """Why a server that died during a window exited (status, classified reason, last log lines), for the run's
        stored reason; None while it runs, or where the launcher has no process of its own to ask."""
        ...
