"""The SLA a ladder step must meet, and the named SLO tiers a profile may judge its windows by."""

from __future__ import annotations

from pydantic import Field, field_validator

from sweep.profile.base import DAY_S, check_name
from sweep.profile.base import Strict as _Strict

__all__ = ["DEFAULT_TIER", "SLA", "Tier"]


class SLA(_Strict):
    """Percentile bounds a ladder step must meet, and the per-request bounds behind goodput."""

    ttft_ms: float = Field(1000, gt=0, le=DAY_S * 1000, description="per-request TTFT bound (goodput) and percentile bound")
    tpot_ms: float = Field(100, gt=0, le=DAY_S * 1000,
        description=("per-request TPOT bound (goodput) and percentile bound, ms per output token "
                     "after the first"))
    e2e_ms: float | None = Field(None, gt=0, le=DAY_S * 1000,
        description="optional end-to-end latency bound per request, ms (none: not judged)")
    ttft_percentile: float = Field(95, gt=0, le=100,
        description="the TTFT percentile a step must keep under ttft_ms")
    tpot_percentile: float = Field(95, gt=0, le=100,
        description="the TPOT percentile a step must keep under tpot_ms")
    e2e_percentile: float = Field(95, gt=0, le=100,
        description="the end-to-end percentile a step must keep under e2e_ms")
    max_error_rate: float = Field(0.01, ge=0, le=1,
        description="largest share of failed requests a passing step may have")
    session_s: float | None = Field(None, gt=0, le=DAY_S, description=(
        "sessions (workload.sessions): optional bound on the time of a whole conversation, first send to last "
        "reply, seconds (none: not judged; every turn is still held to the TTFT and TPOT bounds)"))
    session_percentile: float = Field(90, gt=0, le=100,
        description="the session-time percentile a step must keep under session_s (completed sessions)")


class Tier(SLA):
    """One named SLA tier of a multi-tier profile: its bounds, and whether it is the primary (the one that steers
    search, pruning and refinement). Every tier is judged on the same stored windows (sweep.analysis.tiers)."""

    name: str = Field(description="the tier's name, e.g. strict, interactive, batch")
    primary: bool = Field(False, description="this tier steers the search (exactly one; none marked: the first)")

    @field_validator("name")
    @classmethod
    def _safe_tier_name(cls, v: str) -> str:
        return check_name(v, "tier name")

    def bounds(self) -> SLA:
        """The tier's bounds as a plain SLA."""
        return SLA(**self.model_dump(exclude={"name", "primary"}))



DEFAULT_TIER = "default"  # the one tier of a profile with a single `sla` block
