"""A stop signal is never lost: a KeyboardInterrupt that CPython swallows (raised inside a `__del__` or a weakref
callback) is raised again by `interrupt.check()`, and is not printed as a traceback."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from sweep.core import interrupt


class _SignalsWhenCollected:
    def __init__(self, sig: signal.Signals):
        self.sig = sig

    def __del__(self) -> None:
        signal.raise_signal(self.sig)  # the handler's KeyboardInterrupt is raised here, where CPython ignores it


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_swallowed_in_del_is_raised_by_the_next_check(sig: signal.Signals,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    hook = sys.unraisablehook
    with interrupt.stop_like_sigint():
        _SignalsWhenCollected(sig)  # collected at once: the raise inside __del__ is lost
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
        assert interrupt.received() == sig
    assert "KeyboardInterrupt" not in capsys.readouterr().err
    assert sys.unraisablehook is hook
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_check_is_quiet_when_no_signal_came() -> None:
    with interrupt.stop_like_sigint():
        interrupt.check()


def test_asyncio_keeps_its_own_sigint_handling_and_a_second_ctrl_c_is_ignored_after() -> None:
    async def interrupted() -> None:
        signal.raise_signal(signal.SIGINT)  # asyncio's handler cancels this task; the runner raises after unwinding
        await asyncio.sleep(5)

    with interrupt.stop_like_sigint():
        with pytest.raises(KeyboardInterrupt), interrupt.for_asyncio():
            asyncio.run(interrupted())
        signal.raise_signal(signal.SIGINT)  # during the teardown: ignored
        assert interrupt.received() == signal.SIGINT


def test_a_signal_of_a_finished_run_does_not_stop_later_work() -> None:
    # The virtual driver and the ladder call check(): a run interrupted earlier in the same process (a test, a
    # library caller) must not stop them once its stop_like_sigint() block is over.
    with pytest.raises(KeyboardInterrupt), interrupt.stop_like_sigint():
        signal.raise_signal(signal.SIGINT)
    assert interrupt.received() == signal.SIGINT  # still known to the error mapper after the block
    interrupt.check()
