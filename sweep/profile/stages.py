"""The stages of a study around its ladders, each a profile section: refinement of a final ladder's knee, the
independent client's cross-check of every step, and the winner's soak."""

from __future__ import annotations

from pydantic import Field, StrictBool

from sweep.core.types import ReferenceKind
from sweep.profile.base import DAY_S, MAX_CONCURRENCY
from sweep.profile.base import Strict as _Strict


class Soak(_Strict):
    """The article's regression step: the winner under Poisson arrivals at its knee rate, for an hour or more."""

    enabled: bool = Field(False, description="soak the winner after the search")
    duration_s: float = Field(3600.0, gt=0, le=7 * DAY_S, description="length of the soak window, seconds")
    rate_fraction: float = Field(0.85, gt=0, le=2, description="share of the knee's request rate to offer")
    max_in_flight: int = Field(1024, ge=1, le=MAX_CONCURRENCY, description="cap on requests in flight during the soak")
    storm_slope_per_min: float = Field(1.0, ge=0, description="retractions/min growth that makes a storm")
    queue_slope_per_min: float = Field(0.5, ge=0, description="queue growth (requests/min) that fails the soak")
    mem_slope_mib_per_min: float = Field(50.0, ge=0, description="GPU memory growth that fails the soak")


class CrossCheck(_Strict):
    """An independent reference client measured right after sweep's own window at every step (sweep crosscheck)."""

    enabled: bool = Field(False, description="measure every step again with the reference client")
    reference: ReferenceKind = Field("auto", description=(
        "auto: SGLang's bench_serving where sglang is importable or `command` is set, else the h11 client "
        "(sweep.drivers.reference)"))
    command: list[str] | None = Field(None, description=(
        "argv prefix that runs `sglang.bench_serving` (e.g. the GPU host's bundle wrapper with SGLANG_MODULE set)"))
    reference_url: str | None = Field(None, description=(
        "where the reference client sends its requests (default: the server's own URL)"))
    tolerance_pct: float = Field(10.0, ge=0, description="relative tolerance, percent of the larger figure")
    tolerance_ms: float = Field(20.0, ge=0, description=(
        "absolute tolerance of a per-request latency (TTFT, E2E); the looser of it and tolerance_pct counts"))
    tolerance_token_ms: float = Field(2.0, ge=0, description=(
        "absolute tolerance of a per-token latency (TPOT, ITL: 5-25 ms, where tolerance_ms would never flag); "
        "the looser of it and tolerance_pct counts"))
    min_tail: int = Field(5, ge=1, description="a percentile is judged when this many requests lie beyond it")


class Refine(_Strict):
    """Finding the boundary, not the ladder step: after a final ladder brackets its knee (a passing step below a
    failing one), more windows on the same warm server bisect the concurrency between the two (the offered rate,
    req/s, for an open-loop arrival.rates ladder)."""

    enabled: StrictBool = Field(False, description=(
        "bisect the concurrency between a final ladder's last passing and first failing step; an open-loop "
        "arrival.rates ladder bisects its offered rate instead, and its SLA boundary (server_configs.boundary_*, "
        "the report) is in req/s, not concurrency (screening ladders and coupled mode never refine)"))
    tolerance: float = Field(0.10, gt=0, le=1, description=(
        "stop when the bracket is at most this share of its passing concurrency (or rate) wide (0.10: within "
        "10%)"))
    max_steps: int = Field(3, ge=1, le=16, description="at most this many refinement windows per configuration")
