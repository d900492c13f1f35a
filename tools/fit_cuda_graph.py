"""Fit Efficiency.no_cuda_graph_decode to the one real H200 point with and without CUDA graphs.

Usage: .venv/bin/python tools/fit_cuda_graph.py

The point (SGLang 0.5.17, llama3-8b shape, dummy weights, triton attention, one H200): closed loop at
concurrency 16, prompts of ~1,050 tokens (80% start with one of 16 shared 512-token prefixes), outputs
U(64, 256) with ignore_eos, `--max-running-requests 256 --mem-fraction-static 0.14 --chunked-prefill-size 4096
--schedule-policy lpm`, 5 s warm-up + 20 s window: TPOT P50 7.4 ms with CUDA graphs, 18.8 ms with
--disable-cuda-graph. The multiplier slows decode forwards only (prefill forwards run without graphs either
way), so it is bisected until the simulator's own TPOT P50 ratio at that point is 18.8 / 7.4.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sglang_sim.engine import Engine  # noqa: E402
from sglang_sim.params import Efficiency, EngineKnobs, SimParams, model_preset  # noqa: E402
from sweep.analysis.measure import compute_stats  # noqa: E402
from sweep.core.types import ServerConfig  # noqa: E402
from sweep.drivers.virtual import VirtualDriver  # noqa: E402
from sweep.launchers.base import ServerHandle  # noqa: E402
from sweep.profile import SLA, Window, load_profile  # noqa: E402
from sweep.workload.requests import build_workload  # noqa: E402

REAL_TPOT_P50_MS = {True: 7.4, False: 18.8}  # CUDA graphs on / off
KNOBS = EngineKnobs(max_running_requests=256, mem_fraction_static=0.14, chunked_prefill_size=4096,
                    schedule_policy="lpm")
WINDOW = Window(warmup_requests=0, warmup_seconds=5.0, measure_seconds=20.0, drain_seconds=30.0)


def specs() -> list:  # type: ignore[type-arg]
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {
        "workload.num_requests": 4000, "workload.prompt_len": {"kind": "uniform", "low": 1000, "high": 1100},
        "workload.output_len": {"kind": "uniform", "low": 64, "high": 256},
        "workload.shared_prefix": {"groups": 16, "length": 512, "share": 0.8}})
    return build_workload(prof.workload)


def tpot_p50(factor: float, cuda_graph: bool, sp: list) -> float:  # type: ignore[type-arg]
    params = SimParams(model=model_preset("llama3-8b-shape"), eff=replace(Efficiency(), no_cuda_graph_decode=factor),
                       cuda_graph=cuda_graph)  # the shape the real point ran (vocab 1024)
    handle = ServerHandle(config=ServerConfig(), url=None, simulated=True, engine=Engine(params, KNOBS))
    res = VirtualDriver(seed=1).run_window(handle, sp, 16, WINDOW)
    return float(compute_stats(res, SLA(ttft_ms=1e9, tpot_ms=1e9)).tpot_p50_ms or 0.0)


def main() -> int:
    sp = specs()
    base = tpot_p50(1.0, True, sp)
    target = REAL_TPOT_P50_MS[False] / REAL_TPOT_P50_MS[True]
    lo, hi = 1.0, 6.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if tpot_p50(mid, False, sp) / base < target:
            lo = mid
        else:
            hi = mid
    factor = (lo + hi) / 2
    print(f"simulated TPOT P50 with CUDA graphs: {base:.2f} ms (real {REAL_TPOT_P50_MS[True]} ms)")
    print(f"target ratio {target:.3f}; decode multiplier {factor:.3f} gives "
          f"{tpot_p50(factor, False, sp):.2f} ms (real {REAL_TPOT_P50_MS[False]} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
