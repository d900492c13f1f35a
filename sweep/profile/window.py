"""The measured window of a ladder step: warm-up, measured seconds, drain, the request timeout, cache flushing."""

from __future__ import annotations

from pydantic import Field, StrictBool

from sweep.profile.base import DAY_S, MAX_REQUESTS
from sweep.profile.base import Strict as _Strict

MIN_MEASURE_SECONDS = 1.0  # a shorter window cannot hold a step's worth of requests at any realistic latency
DEFAULT_MIN_REQUESTS = 20  # a percentile of fewer requests is noise: such a step cannot pass


class EarlyStopRule(_Strict):
    """A measured window that stops once its step cannot pass (issue 29; sweep.analysis.early_stop, docs/early-stop.md)."""

    enabled: StrictBool = Field(True, description=(
        "stop a ladder step's window as soon as one of its SLA bounds cannot pass: its requests over the bound "
        "already exceed the bound's share of all the window is projected to hold, confirmed by an anytime-valid "
        "test (the step is stored as failing, stopped early, with the reason); a passing window always runs its "
        "full length, and the soak never stops early"))
    alpha: float = Field(0.01, gt=0, lt=0.5, description=(
        "the anytime-valid test's level: alone, it stops a step whose true share over a bound is at the SLA's "
        "allowance with probability at most alpha for independent requests (docs/early-stop.md measures the whole "
        "rule under load)"))
    min_requests: int = Field(50, ge=1, le=MAX_REQUESTS, description=(
        "no window stops before this many of its measured requests are determined (ended, or already over a bound)"))
    min_seconds: float = Field(60.0, ge=0, le=DAY_S, description=(
        "no window stops before this many seconds of it were measured (a window no longer than this never stops "
        "early), so a burst at the window's opening cannot decide it alone"))


class Window(_Strict):
    warmup_requests: int = Field(100, ge=0, le=MAX_REQUESTS, description=(
        "requests that must have completed (answered or failed) before the measured window opens (0: none). The "
        "window opens once these completed, warmup_seconds passed and the step reached its load (every user had a "
        "request in flight; open loop: the arrivals ran one mean gap per user), whichever comes last; "
        "runs.window_opened_by records which"))
    warmup_seconds: float = Field(0.0, ge=0, le=DAY_S,
        description="seconds from the step's start before the measured window may open (with warmup_requests)")
    measure_seconds: float = Field(900.0, ge=MIN_MEASURE_SECONDS, le=7 * DAY_S,
        description=f"length of the measured window of each ladder step, seconds (at least {MIN_MEASURE_SECONDS:g}: "
                    "a shorter window cannot hold `min_requests` requests)")
    min_requests: int = Field(DEFAULT_MIN_REQUESTS, ge=1, le=MAX_REQUESTS, description=(
        "the fewest requests a ladder step must send in its measured window to be judged: a step with fewer "
        "cannot pass (its verdict says \"too few requests (n < min)\"), so no knee is named from it"))
    drain_seconds: float = Field(30.0, ge=0, le=DAY_S,
        description=("how long requests still in flight after the window may finish before they are cut (a cut "
                     "request is counted apart, never as an error; more than 1% cut: the why names the drain)"))
    request_timeout_s: float = Field(600.0, gt=0, le=DAY_S,
        description="a request with no complete response after this long is an error")
    early_stop: EarlyStopRule = Field(default_factory=EarlyStopRule, description=(
        "stop a failing step's window once its verdict is decided (sweep.analysis.early_stop)"))
    flush_cache: StrictBool = Field(True, description=(
        "empty the server's prefix cache (SGLang POST /flush_cache) before every ladder step, so no step "
        "inherits the previous step's cache"))
