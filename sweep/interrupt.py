"""SIGTERM and SIGHUP stop sweep exactly as Ctrl-C does: the server is stopped, the attempt marked aborted,
and the process exits with 128 + the signal's number (130 SIGINT, 129 SIGHUP, 143 SIGTERM).

Inside `stop_like_sigint()` a SIGTERM or SIGHUP is handed to whatever handles SIGINT at that moment: Python's
default handler raises KeyboardInterrupt where the main thread is; asyncio's runner (the HTTP driver's event
loop) cancels its main task and raises KeyboardInterrupt once the loop has unwound. So every cleanup path
that already handles Ctrl-C (the launcher's teardown, the ladder's `finally`) handles these signals too.
Signals after the first are ignored: a second SIGTERM must not cut the server's teardown short.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_received: list[signal.Signals] = []


class Interrupted(KeyboardInterrupt):
    """KeyboardInterrupt raised for SIGTERM or SIGHUP (where Python's default SIGINT handler was in place)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, frame: FrameType | None) -> None:
    if _received:
        return  # already stopping
    _received.append(signal.Signals(signum))
    on_sigint = signal.getsignal(signal.SIGINT)
    if on_sigint is signal.default_int_handler or not callable(on_sigint):
        raise Interrupted(signum)
    on_sigint(signal.SIGINT, frame)  # asyncio's runner: cancel the main task, raise KeyboardInterrupt after


@contextlib.contextmanager
def stop_like_sigint() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP act as SIGINT; the previous handlers come back after it."""
    _received.clear()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # A background job of a non-interactive shell (`sweep ... &` in a script, CI) starts with SIGINT ignored;
        # an explicit SIGINT must still stop sweep cleanly, as it does in a terminal.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def received(exc: BaseException | None = None) -> signal.Signals:
    """The signal that stopped the run: the first SIGTERM/SIGHUP seen, else SIGINT (Ctrl-C)."""
    if isinstance(exc, Interrupted):
        return signal.Signals(exc.signum)
    return _received[0] if _received else signal.SIGINT


def exit_code(sig: signal.Signals) -> int:
    """The shell's convention for a process stopped by a signal."""
    return 128 + int(sig)
