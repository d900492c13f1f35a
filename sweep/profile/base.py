"""What every profile model shares: the strict base model, the sane bounds on counts and durations, safe names."""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict

from sweep.core.errors import UsageError

# Sane bounds: far beyond any real study, small enough that nothing downstream overflows or exhausts memory.
MAX_CONCURRENCY = 100_000  # ladder steps, in-flight caps, max_running_requests
MAX_TOKENS = 2_097_152  # any length in tokens (prompt, output, chunk, shared prefix)
MAX_REQUESTS = 1_000_000  # the generated request pool, warm-up requests
MAX_GRID = 100_000  # configurations one search space may expand to (Optuna's grid enumerates them)
MAX_RATE = 10_000.0  # an open-loop offered rate, requests/s: beyond what one client host sends or any server serves
DAY_S = 86_400.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def check_name(value: str, what: str = "name") -> str:
    """A profile or study name becomes a folder under --out: letters, digits and . _ + - only, no path."""
    if not _NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {value!r} must be 1-100 letters, digits, '.', '_', '+' or '-' "
                         "(it names a folder under --out), starting with a letter or digit")
    return value


def check_study_name(value: str, what: str = "--study") -> str:
    """--study (or a worker's --label: both name a folder under --out) as a UsageError (exit 2) when not a safe name."""
    try:
        return check_name(value, what)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def is_loopback(host: str) -> bool:
    """localhost or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Strict(BaseModel):
    """Unknown fields refused, frozen, strict types (a boolean is not an integer), finite numbers."""


    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
