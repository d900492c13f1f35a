"""Before a launch: will this configuration's server start, with what KV pool, after how long (no GPU touched).

The accounting is the simulator's own (`sglang_sim.params.plan_memory`, its spec in that docstring), so a
simulated server's pool is the predicted one; here a configuration's knobs and the launch flags become its
inputs, and the GPU is the launcher's (a sim preset, or the real GPU's name and memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sglang_sim.params import (
    GPUS,
    MIB,
    GpuPreset,
    MemoryPlan,
    ModelPreset,
    default_chunked_prefill,
    default_mem_fraction,
    plan_memory,
    with_kv_dtype,
)
from sweep.core.environment import Environment
from sweep.core.errors import PREDICTED_INFEASIBLE
from sweep.core.types import ServerConfig

MAX_PREFILL_TOKENS = 16384  # SGLang's --max-prefill-tokens default: the extend batch when chunking is off


@dataclass(frozen=True)
class Predictor:
    """What a study's launches share: the model (sglang_sim.shape.choose_model), the GPU, the launch flags."""

    model: ModelPreset
    gpu: GpuPreset
    extra_args: tuple[str, ...] = ()

    def __call__(self, config: ServerConfig) -> MemoryPlan:
        return predict_launch(self.model, self.gpu, config, self.extra_args)


def _flag(args: Sequence[str], name: str) -> str | None:
    """The value of `name` in argv (`--x v` or `--x=v`), or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _setting(config: ServerConfig, extra_args: Sequence[str], name: str) -> str | None:
    """A flag's value for this launch: the configuration's own (a searched flag), else the launch flags'."""
    own = config.flag_value(name)
    return str(own) if own is not None else _flag(extra_args, "--" + name.replace("_", "-"))


def predict_launch(model: ModelPreset, gpu: GpuPreset, config: ServerConfig,
                   extra_args: Sequence[str] = ()) -> MemoryPlan:
    """The memory plan of launching `config` with `extra_args` on `gpu` (sglang_sim.params.plan_memory).

    Inputs as SGLang resolves them: mem_fraction_static (else SGLang's default for the GPU and model),
    chunked_prefill_size (else the GPU's default; -1 = off, then --max-prefill-tokens bounds one extend batch),
    the TP size (knob, else --tp-size, else the model's own), the KV cache's dtype (kv_cache_dtype: fp8 halves the
    bytes per KV token, so the pool doubles), CUDA graphs unless --disable-cuda-graph, and weight loading skipped
    under --load-format dummy. Pure: no I/O. ValueError for a kv_cache_dtype the accounting does not know.
    """
    tp = config.tp_size or int(_flag(extra_args, "--tp-size") or _flag(extra_args, "--tensor-parallel-size") or 0)
    if tp and tp != model.tp:
        model = replace(model, tp=tp)
    model = with_kv_dtype(model, _setting(config, extra_args, "kv_cache_dtype"))
    frac = (config.mem_fraction_static if config.mem_fraction_static is not None
            else default_mem_fraction(gpu, model))
    max_prefill = int(_setting(config, extra_args, "max_prefill_tokens") or MAX_PREFILL_TOKENS)
    chunk = config.chunked_prefill_size if config.chunked_prefill_size is not None else default_chunked_prefill(gpu)
    extend = max_prefill if chunk <= 0 else min(chunk, max_prefill)
    return plan_memory(gpu, model, frac, extend, cuda_graph="--disable-cuda-graph" not in extra_args,
                       dummy_weights=_flag(extra_args, "--load-format") == "dummy")


def gpu_of(environment: Environment, sim_gpu: str | None) -> GpuPreset | None:
    """The GPU a launcher's servers get: the sim preset `sim_gpu`, else the real GPU (environment's gpu_name
    matched to a preset for its context size, with the memory nvidia-smi reports); None when unknown."""
    if sim_gpu is not None:
        return GPUS.get(sim_gpu) or next((g for k, g in GPUS.items() if k.lower() == sim_gpu.lower()), None)
    name, mib = environment.get("gpu_name"), environment.get("gpu_memory_mib")
    if not isinstance(name, str) or not isinstance(mib, int | float):
        return None
    base = next((g for k, g in GPUS.items() if k.split("-")[0].lower() in name.lower()), GPUS["H200"])
    return replace(base, name=name, mem_bytes=float(mib) * MIB)


def infeasible_reason(plan: MemoryPlan) -> str:
    """The failure reason of a skipped configuration: `predicted infeasible`, why, and the numbers."""
    return f"{PREDICTED_INFEASIBLE}: {plan.failure} ({plan.describe()})"
