"""SIGTERM and SIGHUP stop sweep exactly as Ctrl-C does: the server is stopped, the attempt marked aborted,
and the process exits with 128 + the signal's number (130 SIGINT, 129 SIGHUP, 143 SIGTERM).

Inside `stop_like_sigint()` a SIGTERM or SIGHUP is handed to whatever handles SIGINT at that moment: Python's
default handler raises KeyboardInterrupt where the main thread is; asyncio's runner (the HTTP driver's event
loop) cancels its main task and raises KeyboardInterrupt once the loop has unwound. So every cleanup path
that already handles Ctrl-C (the launcher's teardown, the ladder's `finally`) handles these signals too.
Signals after the first are ignored: a second SIGTERM must not cut the server's teardown short.

A KeyboardInterrupt raised by a signal handler is lost when it lands inside a `__del__` or a weakref callback
(CPython prints "Exception ignored in ..." and goes on): the simulator's tight loop collects garbage all the
time, so a Ctrl-C there was swallowed and the study ran on. So SIGINT is handled here too, every signal is
recorded before anything is raised, and the long synchronous loops call `check()`, which raises again for a
signal whose first raise was lost (and `sys.unraisablehook` keeps that lost one off stderr). asyncio keeps its
own SIGINT handling (cancel the main task, raise once the loop has unwound): `for_asyncio()` puts Python's
default handler back for the event loop's run.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import NoReturn

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_received: list[signal.Signals] = []
# The unraisable hook each running stop_like_sigint() block replaced (innermost last): non-empty inside a block.
_hooks: list[Callable[[sys.UnraisableHookArgs], object]] = []


class Interrupted(KeyboardInterrupt):
    """KeyboardInterrupt raised for SIGTERM or SIGHUP (where Python's default SIGINT handler was in place)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_for(sig: signal.Signals) -> NoReturn:
    if sig == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(sig)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _received:
        return  # already stopping
    sig = signal.Signals(signum)
    _received.append(sig)
    on_sigint = signal.getsignal(signal.SIGINT)
    if sig == signal.SIGINT or on_sigint in (signal.default_int_handler, _handler) or not callable(on_sigint):
        _raise_for(sig)
    on_sigint(signal.SIGINT, frame)  # asyncio's runner: cancel the main task, raise KeyboardInterrupt after


def _quiet_lost_interrupt(unraisable: sys.UnraisableHookArgs) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _received:
        return  # raised again by the next check(); not a traceback on stderr
    (_hooks[-1] if _hooks else sys.__unraisablehook__)(unraisable)


def check() -> None:
    """Inside stop_like_sigint(): raise for a stop signal already received (its first KeyboardInterrupt may have
    been swallowed). Outside it (a library caller, a test after an interrupted run) nothing is raised."""
    if _received and _hooks:
        _raise_for(_received[0])


@contextlib.contextmanager
def for_asyncio() -> Iterator[None]:
    """Within the block SIGINT has Python's default handler, so asyncio's runner installs its own."""
    if signal.getsignal(signal.SIGINT) is not _handler or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        if not _received:
            _received.append(signal.SIGINT)  # so a second Ctrl-C is ignored during the teardown, as documented
        raise
    finally:
        signal.signal(signal.SIGINT, _handler)
    check()  # a SIGINT asyncio's handler saw only shows as the KeyboardInterrupt raised above; SIGTERM is here


@contextlib.contextmanager
def stop_like_sigint() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP act as SIGINT; the previous handlers come back after it."""
    _received.clear()
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    on_sigint = signal.getsignal(signal.SIGINT)
    if on_sigint in (signal.default_int_handler, signal.SIG_IGN):
        # SIG_IGN: a background job of a non-interactive shell (`sweep ... &` in a script, CI) starts with SIGINT
        # ignored; an explicit SIGINT must still stop sweep cleanly, as it does in a terminal.
        previous[signal.SIGINT] = signal.default_int_handler
        signal.signal(signal.SIGINT, _handler)
    _hooks.append(sys.unraisablehook)
    sys.unraisablehook = _quiet_lost_interrupt
    try:
        yield
    finally:
        sys.unraisablehook = _hooks.pop()
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
