"""The decode step fitted to SGLang's own `Decode batch` log lines (tools/calibrate.py's stage 1).

A line's gen throughput covers the 40 steps since the previous line; with no queue and no prefill line between two
lines, those steps were pure decode, so one step took (mean batch / throughput) at the mean `#token`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from sglang_sim.params import Efficiency, ModelPreset, SimParams

DECODE_RE = re.compile(r"Decode batch, #running-req: (\d+), #token: (\d+),.*gen throughput \(token/s\): ([\d.]+), "
                       r"#queue-req: (\d+)")
# The KV-read slope and the per-request cost are collinear in the log (context grows with the batch), so the
# bandwidth share is fixed at a typical achieved HBM share and the log fits the two fixed costs around it.
DECODE_BANDWIDTH = 0.80


def drain_steps(paths: list[Path]) -> Iterator[tuple[float, float, float]]:
    """(mean batch, mean #token, seconds per decode step) of every pair of consecutive `Decode batch` lines with no
    queue and no `Prefill batch` line between them: the 40 steps a line's gen throughput covers were pure decode."""
    for path in paths:
        prev: tuple[int, int, float, int] | None = None
        for line in path.read_text().splitlines():
            if "Prefill batch" in line:
                prev = None
                continue
            m = DECODE_RE.search(line)
            if m is None:
                continue
            cur = (int(m[1]), int(m[2]), float(m[3]), int(m[4]))
            if prev is not None and cur[3] == 0 and prev[3] == 0 and cur[2] > 0:
                n = (cur[0] + prev[0]) / 2
                yield n, (cur[1] + prev[1]) / 2, n / cur[2]
            prev = cur


def decode_log_fit(paths: list[Path], eff: Efficiency, model: ModelPreset) -> tuple[Efficiency, int, float]:
    """Least squares of per-step decode time on drain-phase `Decode batch` lines: (eff, n lines, rms ms).

    A line's gen throughput covers the 40 steps since the previous line; with no queue and no prefill line
    between, those steps were pure decode, so step time = mean batch / throughput at the mean context.
    """
    p = SimParams(model=model, eff=replace(eff, bandwidth=DECODE_BANDWIDTH))
    bw = p.gpu.bandwidth * DECODE_BANDWIDTH
    fixed_w, kv = p.model.params * p.model.dtype_bytes / bw, p.model.kv_bytes_per_token / (p.gpu.bandwidth * eff.kv_bandwidth)
    # (batch, step seconds left after the bandwidth terms)
    xs = [(n, step - fixed_w - ctx * kv) for n, ctx, step in drain_steps(paths)]
    if len(xs) < 3:
        return eff, len(xs), float("nan")
    k = len(xs)  # ordinary least squares of residual = step + n * per_req (two unknowns, closed form)
    mx, my = sum(x for x, _ in xs) / k, sum(y for _, y in xs) / k
    slope = sum((x - mx) * (y - my) for x, y in xs) / sum((x - mx) ** 2 for x, _ in xs)
    icpt = my - slope * mx
    rms = math.sqrt(sum((y - icpt - slope * x) ** 2 for x, y in xs) / k) * 1e3
    return replace(eff, bandwidth=DECODE_BANDWIDTH, step_overhead_s=icpt, per_req_overhead_s=slope), k, rms


def decode_log_fit_kv(paths: list[Path], eff: Efficiency, model: ModelPreset) -> tuple[Efficiency, int, float]:
    """decode_log_fit with the KV cache's own HBM share as a third unknown (least squares of the step time left
    after the weights on 1, batch and #token): identifiable on logs whose contexts span 200-4,400 tokens per
    request. Only logs of workloads without shared prefixes: #token counts a shared prefix once, while every
    request reads it (the decode step's KV read is the sum of the contexts)."""
    import numpy as np

    p = SimParams(model=model, eff=eff)
    fixed_w = p.model.params * p.model.dtype_bytes / (p.gpu.bandwidth * eff.bandwidth)
    rows = [(n, ctx, step - fixed_w) for n, ctx, step in drain_steps(paths)]
    if len(rows) < 10:
        return eff, len(rows), float("nan")
    x = np.array(rows)
    a = np.c_[np.ones(len(x)), x[:, 0], x[:, 1]]
    (step, per_req, per_ctx), *_ = np.linalg.lstsq(a, x[:, 2], rcond=None)
    rms = float(np.sqrt(np.mean((a @ np.array([step, per_req, per_ctx]) - x[:, 2]) ** 2))) * 1e3
    kv_share = p.model.kv_bytes_per_token / per_ctx / p.gpu.bandwidth
    return replace(eff, step_overhead_s=float(step), per_req_overhead_s=float(per_req),
                   kv_bandwidth=float(kv_share)), len(rows), rms
