"""What the simulator accepts but does not model: one line per such flag, for the log and /server_info.

Every sglang.launch_server flag the simulator parses is either modelled (it changes the engine, the cost model
or the HTTP front), has no bearing on timing (--host, --log-level, --load-format, --trust-remote-code, ...), or
is listed here when set, so a study that depends on it is told that the simulator ignored it. It accepts every
other flag of SGLang 0.5.17 (sglang_flags.txt) and lists each one set as not modelled.
Modelled (MODELLED_FLAGS, a test each in tests/sim/test_sim_flags.py): --disable-cuda-graph
(sglang_sim.params.Efficiency.no_cuda_graph_decode) and --cuda-graph-max-bs (decode batches above it run without a
graph: each such forward pays the 11.4 ms of launches the one H200 point measured, sglang_sim.cost.EAGER_LAUNCH_S); --tp-size (weights and KV heads split
over the GPUs, per-step compute divided, two all-reduces per layer: sglang_sim.cost.CostModel); --kv-cache-dtype
(bytes per KV token: the pool, the memory plan and the KV traffic; sglang_sim.params.with_kv_dtype);
--max-prefill-tokens with --chunked-prefill-size (the extend budget: sglang_sim.schedule_policy.schedule_prefill);
--schedule-conservativeness (the new-token ratio admission reserves against the pool); --enable-mixed-chunk;
--disable-radix-cache; --max-running-requests, --mem-fraction-static, --schedule-policy, --context-length.
Timing it does not model at all (docs/calibration.md, the matrix held out by shape): one-off server pauses (a real
window of seconds can hold one of 0.3-0.7 s), the latency jitter that makes a real TTFT P99 2-4x its P50 below the
knee, batched long-prompt (4k-token) extends that cost more than the roofline prefill, and a host loop (tokenizer
manager, detokenizer) that saturates at high request rates (per-request work is charged to the extend batch instead).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from sglang_sim.params import ModelPreset


@dataclass(frozen=True)
class HeldOut:
    """How far the simulator was from real SGLang on workload shapes its fit never saw (issue 21 §2): the worst
    error, whole percent, over the held-out steps at or below each ladder's knee (tools/calibrate.py
    --holdout-shapes, docs/calibration.md; tests/sim/test_sim_calibration.py keeps these equal to the replay)."""

    throughput_pct: int
    ttft_p50_pct: int
    ttft_p99_pct: int  # windows without a server stall (the simulator models no one-off pauses)
    where: str = "SGLang 0.5.17 on one H200, the Llama-3-8B shape, triton attention, CUDA graphs on"

    def sentence(self) -> str:
        return (f"on workload shapes held out of its fit it was within {self.throughput_pct}% of real throughput, "
                f"{self.ttft_p50_pct}% of TTFT P50 and {self.ttft_p99_pct}% of TTFT P99 below the knee ({self.where}; "
                "docs/calibration.md); other GPUs, models and backends are extrapolations")


HELD_OUT = HeldOut(throughput_pct=23, ttft_p50_pct=31, ttft_p99_pct=77)

# The (GPU preset, model shape) pairs the simulator was calibrated on against real SGLang 0.5.17
# (docs/calibration.md): models/llama3-8b-shape's config.json (Llama-3-8B's shape with its 7.0e9 counted params).
# A model whose shape and weights agree with one (sglang_sim.shape.differences) counts as calibrated.
CALIBRATED: tuple[tuple[str, ModelPreset], ...] = (
    ("H200", ModelPreset("llama3-8b-shape", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128,
                         params=6987710464.0, context_len=32768)),
)

# the flags (by name) that change what the simulator computes: a search over any other flag is not ranked by it
MODELLED_FLAGS = frozenset({
    "max_running_requests", "mem_fraction_static", "chunked_prefill_size", "schedule_policy", "tp_size",
    "kv_cache_dtype", "max_prefill_tokens", "schedule_conservativeness", "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode", "enable_mixed_chunk", "disable_radix_cache", "disable_cuda_graph", "context_length"})
UNMODELLED_PREFIX = "unmodelled__"  # the argparse dest of a real SGLang flag the simulator accepts and does not model

FITTED_ATTENTION = "triton"  # the attention and sampling backends of the calibration runs (docs/calibration.md)
FITTED_SAMPLING = "pytorch"
# schedule policies the engine orders as another one (sglang_sim.schedule_policy.order_queue)
POLICY_AS = {"priority": "fcfs", "routing-key": "fcfs", "hrrn": "fcfs", "shortest-prefill-first": "fcfs",
             "dfs-weight": "lpm"}
# The fault flags of the simulated server process (sim-only): the virtual driver has no process to fault.
FAULT_FLAGS = {"sim_crash_after_s": None, "sim_crash_after_requests": None, "sim_hang_after_s": None,
               "sim_slow_start_s": 0.0, "sim_malformed_sse_rate": 0.0, "sim_http500_rate": 0.0,
               "sim_slow_metrics_s": 0.0, "sim_ignore_sigterm": False, "sim_spawn_orphan": False}


def unmodelled_flags(args: argparse.Namespace, schedule_policy: str) -> list[str]:
    """Flags set on this launch that the simulator accepts but does not model, each with what it does instead.
    schedule_policy: the engine's (an in-process engine takes its knobs from its caller, not from args)."""
    out: list[str] = []
    if args.attention_backend not in (None, FITTED_ATTENTION):
        out.append(f"--attention-backend {args.attention_backend}: step times are fitted with "
                   f"{FITTED_ATTENTION} attention; other backends are not modelled")
    if args.sampling_backend not in (None, FITTED_SAMPLING):
        out.append(f"--sampling-backend {args.sampling_backend}: step times are fitted with {FITTED_SAMPLING} "
                   "sampling; other backends are not modelled")
    if args.mm_attention_backend is not None:
        out.append(f"--mm-attention-backend {args.mm_attention_backend}: not modelled (one ViT efficiency for "
                   "every backend)")
    if schedule_policy in POLICY_AS:
        out.append(f"--schedule-policy {schedule_policy}: scheduled as {POLICY_AS[schedule_policy]} "
                   "(its own ordering is not modelled)")
    for dest, value in sorted(vars(args).items()):
        if dest.startswith(UNMODELLED_PREFIX) and value not in (None, False):
            option = "--" + dest.removeprefix(UNMODELLED_PREFIX).replace("_", "-")
            shown = option if value is True else f"{option} {' '.join(value) if isinstance(value, list) else value}"
            out.append(f"{shown}: accepted, not modelled (the simulator runs as if it were not given)")
    return out


def fault_flags(args: argparse.Namespace) -> list[str]:
    """The simulated-process fault flags set in args, as command-line spellings."""
    return ["--" + k.replace("_", "-") for k, default in FAULT_FLAGS.items() if getattr(args, k) != default]


def calibrated_preset(gpu: str, model: ModelPreset) -> str | None:
    """The calibrated preset a GPU name and model shape fall under ("H200 / llama3-8b-shape"), None when none
    does: then the simulator's figures are extrapolations, not calibrated ones."""
    from sglang_sim.shape import differences

    for gpu_name, shape in CALIBRATED:
        if gpu.lower() == gpu_name.lower() and not differences(model, shape):
            return f"{gpu_name} / {shape.name}"
    return None
