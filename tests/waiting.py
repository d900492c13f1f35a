"""Waiting on a condition with a deadline (the tests never sleep a fixed time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    """Poll cond() until truthy (returned) or the deadline passes (AssertionError naming `what`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")
