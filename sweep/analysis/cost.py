"""The cost per token at a knee: what serving a million output tokens inside the SLA costs on the GPUs it takes.

Spec: usd_per_million = gpu_hour_usd x gpus / 3600 / goodput_tps x 1e6, where goodput_tps is the knee's goodput
(output tokens per second of requests that met the SLA) and gpus the server's GPU count (its tensor-parallel size;
1 without one). None when there is no price, no knee or no goodput. Pure: no I/O.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


def usd_per_million_output(gpu_hour_usd: float | None, gpus: int, goodput_tps: float | None) -> float | None:
    """USD per million output tokens served inside the SLA at `goodput_tps` on `gpus` GPUs at `gpu_hour_usd` each."""
    if gpu_hour_usd is None or goodput_tps is None or goodput_tps <= 0 or gpus < 1:
        return None
    return gpu_hour_usd * gpus / SECONDS_PER_HOUR / goodput_tps * 1e6
