"""Waiting on a condition with a deadline (the tests never sleep a fixed time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    """Poll cond() until truthy (returned); cond is asked once more at the deadline before the AssertionError
    naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)
