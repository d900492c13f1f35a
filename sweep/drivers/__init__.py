"""Drivers: what sends one measured window of requests to a server and records what came back.

`HttpDriver` (sweep.drivers.http) talks to a real server over sockets; `VirtualDriver` (sweep.drivers.virtual)
runs the simulator's engine on a virtual clock. The ladder sees only the `Driver` protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sweep.analysis.early_stop import EarlyStop
    from sweep.core.types import RecordSink, WindowResult
    from sweep.launchers.base import ServerHandle
    from sweep.profile import ArrivalProcess, Window
    from sweep.workload.stream import Requests

__all__ = ["Driver"]


class Driver(Protocol):
    """Runs one window: closed loop with `concurrency` users, or the open-loop `arrival` process. With `early_stop`
    (sweep.analysis.early_stop), every ended request of the window is handed to it and the window stops (its result's
    stopped_early says why) once it decides the step cannot pass."""

    simulated: bool
    streams: bool  # run_window hands each ended request to `sink` while the window runs (issue 23 §2)

    def run_window(self, handle: ServerHandle, specs: Requests, concurrency: int, window: Window,
                   arrival: ArrivalProcess | None = None, sink: RecordSink | None = None,
                   early_stop: EarlyStop | None = None) -> WindowResult: ...

    def flush_cache(self, handle: ServerHandle) -> str | None: ...

    def window_elapsed(self) -> float | None:
        """Seconds into the current window on the driver's clock (the terminal's bar follows it); None between
        windows or where the driver cannot say."""
        ...
