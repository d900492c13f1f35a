"""What a GPU hour costs: the answer's cost per million output tokens at each winner's knee (section cost)."""

from __future__ import annotations

from pydantic import Field

from sweep.profile.base import Strict as _Strict


class Cost(_Strict):
    gpu_hour_usd: float | None = Field(None, gt=0, le=100_000, description=(
        "what one GPU costs per hour, USD: the answer block, report and answer.json then give the cost per million "
        "output tokens at the knee of each tier's winner and of SGLang's defaults (GPUs: the configuration's "
        "tp_size, else 1; the tokens: the knee's goodput, output tokens inside the SLA); none: no cost line"))
