"""Typed parameter sets of the simulator: GPU and model presets, efficiency constants, knobs, resolution."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

GIB = 1024**3
MIB = 1024**2


class SimOOM(RuntimeError):
    """The KV pool left after weights is empty or too small: the server refuses to start."""


@dataclass(frozen=True)
class GpuPreset:
    """One GPU: memory as CUDA reports it, HBM bandwidth and dense bf16 peak."""

    name: str
    mem_bytes: float
    bandwidth: float  # bytes/s
    flops: float  # dense bf16 FLOP/s
    context_bytes: float = 1.27 * GIB  # CUDA context + NCCL before weights load
    link_bandwidth: float = 450e9  # NVLink per direction, bytes/s (TP all-reduce)


# Memory is nvidia-smi's total (MiB): the real H200 log shows "avail mem=139.13 GB" (GiB) after a
# ~1.27 GiB CUDA context, i.e. 143771 MiB total. Bandwidth/FLOPs are NVIDIA datasheet values
# (H200 SXM 4.8 TB/s, 989 TFLOP/s dense bf16; H100 SXM 80GB 3.35 TB/s, 989; A100 80GB SXM 2.039 TB/s,
# 312; L40S 864 GB/s, 362 dense bf16). L40S has no NVLink (PCIe 4.0 x16, ~25 GB/s effective).
GPUS: dict[str, GpuPreset] = {
    "H200": GpuPreset("H200", 143771 * MIB, 4.8e12, 989e12),
    "H100-80G": GpuPreset("H100-80G", 81559 * MIB, 3.35e12, 989e12),
    "A100-80G": GpuPreset("A100-80G", 81920 * MIB, 2.0e12, 312e12, link_bandwidth=300e9),
    "L40S": GpuPreset("L40S", 46068 * MIB, 0.864e12, 362e12, link_bandwidth=25e9),
}


@dataclass(frozen=True)
class ModelPreset:
    """Transformer shape; params are the LLM's, vision_params the encoder's (0 = text-only)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    params: float
    context_len: int
    vision_params: float = 0.0
    tp: int = 1
    dtype_bytes: int = 2
    kv_dtype_bytes: float | None = None  # --kv-cache-dtype's width (kv_dtype_bytes()); None: the model's dtype

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V for every layer, split across TP ranks (KV heads shard over TP), at the KV cache's dtype."""
        width = self.dtype_bytes if self.kv_dtype_bytes is None else self.kv_dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * width / self.tp

    @property
    def weight_bytes(self) -> float:
        """Weights resident on one TP rank (LLM plus encoder)."""
        return (self.params + self.vision_params) * self.dtype_bytes / self.tp

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim


# llama3-8b: Meta-Llama-3-8B config.json (32 layers, hidden 4096, 32 heads, 8 KV heads, head_dim 128,
#   vocab 128256, context 8192); 8.03e9 params from the model card.
# llama3-8b-shape: models/llama3-8b-shape/config.json, the shape the H200 proofs run with dummy weights: Llama-3-8B
#   layers and heads but vocab 1024 and context 32768, so 6.99e9 params (13.0 GiB, not 15.0): at
#   --mem-fraction-static 0.14 its KV pool is ~52k tokens (the real log: 52,275), not the 37k of llama3-8b.
# llama3-70b: Meta-Llama-3-70B config.json (80 layers, hidden 8192, 64 heads, 8 KV heads); 70.6e9 params; TP 4.
# qwen2.5-vl-7b: Qwen2.5-VL-7B-Instruct config.json (28 layers, hidden 3584, 28 heads, 4 KV heads,
#   context 128000); LLM ~7.6e9 params, ViT (depth 32, hidden 1280, intermediate 3420 + merger) ~0.67e9.
# tiny-llama: models/tiny-llama/config.json in this repo (2 layers, hidden 256, vocab 1024) ~1.7e6 params.
MODELS: dict[str, ModelPreset] = {
    "llama3-8b": ModelPreset("llama3-8b", 32, 4096, 32, 8, 128, 8.03e9, 8192),
    "llama3-8b-shape": ModelPreset("llama3-8b-shape", 32, 4096, 32, 8, 128, 6.98771e9, 32768),
    "llama3-70b": ModelPreset("llama3-70b", 80, 8192, 64, 8, 128, 70.6e9, 8192, tp=4),
    "qwen2.5-vl-7b": ModelPreset("qwen2.5-vl-7b", 28, 3584, 28, 4, 128, 7.6e9, 128000, vision_params=0.67e9),
    "tiny-llama": ModelPreset("tiny-llama", 2, 256, 4, 2, 64, 1.7e6, 4096),
}


# --kv-cache-dtype (SGLang 0.5.17's choices) -> bytes per stored K or V element; "auto" is the model's dtype. The
# nominal widths: per-block scales of mxfp8 / the fp4 recipes (1 byte per 16-32 elements) are not counted.
KV_DTYPE_BYTES: dict[str, float | None] = {
    "auto": None, "bf16": 2, "bfloat16": 2, "fp8_e5m2": 1, "fp8_e4m3": 1, "mxfp8": 1,
    "nvfp4": 0.5, "fp4_mx_block16": 0.5, "fp4_e2m1": 0.5}


def kv_dtype_bytes(name: str | None) -> float | None:
    """Bytes per KV element of a --kv-cache-dtype value (None: the model's own dtype); ValueError for another."""
    if name is None:
        return None
    if name not in KV_DTYPE_BYTES:
        raise ValueError(f"kv_cache_dtype {name!r}: expected one of {', '.join(KV_DTYPE_BYTES)}")
    return KV_DTYPE_BYTES[name]


def with_kv_dtype(model: ModelPreset, name: str | None) -> ModelPreset:
    """The model with its KV cache stored as `name` (--kv-cache-dtype): fp8 halves the bytes per KV token, so the
    same static memory holds twice the pool, and a decode step reads half the KV bytes."""
    width = kv_dtype_bytes(name)
    return model if width == model.kv_dtype_bytes else replace(model, kv_dtype_bytes=width)


@dataclass(frozen=True)
class Efficiency:
    """Fractions of roofline reached and fixed costs, fitted to SGLang 0.5.17 on one H200 (docs/calibration.md)."""

    # Fitted by `tools/calibrate.py --fit S` (docs/calibration.md, 2026-12-02): the decode step (fixed cost, per request,
    # the KV cache's HBM share) on the Decode batch lines of the calibration matrix's training shapes without shared
    # prefixes, then the host stage, per-request extend work and prefill shares on the training windows (kv-calib,
    # session 1, 14 of the matrix's 18 workload shapes); four whole shapes held out. CUDA graphs
    # on, triton attention, models/llama3-8b-shape. Other GPUs and models reuse these shares: an extrapolation.
    bandwidth: float = 0.80  # achieved HBM bandwidth share streaming the weights, pinned (collinear with the log fit)
    # Achieved HBM share reading (decode) and writing (extend) the KV cache: the triton attention kernels run further
    # from the roofline than the weight GEMMs; separable from the weights only with contexts of 200-4,400 tokens
    # (the calibration matrix, docs/calibration.md).
    kv_bandwidth: float = 0.621
    flops: float = 0.74  # achieved tensor-core share in prefill GEMMs
    attention_flops: float = 0.35  # attention kernels run further from peak than GEMMs (not identifiable here)
    encoder_flops: float = 0.30  # ViT runs small, unfused batches (ViT time is ~3 ms of a 448px image: unfitted)
    step_overhead_s: float = 0.001155  # scheduler + launch cost of one forward (CUDA graphs on)
    per_req_overhead_s: float = 1.7e-6  # per-request batch bookkeeping of a decode step
    prefill_overhead_s: float = 0.008  # extra host work of an extend batch (no CUDA graph)
    # Scheduler work per request of an extend batch (admission, radix match, batch assembly): what short outputs at a
    # high request rate pay; the decode log's per-request cost does not carry it.
    prefill_per_req_s: float = 0.0002
    allreduce_latency_s: float = 8e-6  # per all-reduce (two per layer) under TP (no TP data: unfitted)
    host_latency_s: float = 0.008  # HTTP + tokenizer manager + scheduler receive, before a request can be scheduled
    # The host stage as one CPU loop shared with output streaming: its delay grows with the requests in flight when a
    # request arrives. Fitted with host_latency_s on the calibration matrix's training shapes (split S, 2026-12-02:
    # real TTFT P50 of short prompts grows 26 -> 83 ms from 16 to 128 clients where the prefill alone does not).
    host_s_per_inflight: float = 0.0002
    media_host_s_per_token: float = 0.00035  # CPU media preprocessing (resize, normalise) per media token
    # --disable-cuda-graph: every decode forward launches its kernels one by one. Multiplies the decode forward
    # time; fitted on ONE H200 point only (llama3-8b shape, concurrency 16, prompts ~1,050, outputs U(64,256):
    # real TPOT P50 18.8 ms without CUDA graphs vs 7.4 ms with them, 2.54x). Prefill forwards, which run without
    # graphs either way, are not slowed, so decode needs 3.09x for the simulator's own TPOT P50 to move 2.54x
    # at that point (tools/fit_cuda_graph.py, llama3-8b-shape, current constants). Other batch sizes, models and GPUs: an extrapolation.
    no_cuda_graph_decode: float = 3.09


@dataclass(frozen=True)
class SimParams:
    """Everything physical about the simulated server."""

    gpu: GpuPreset = GPUS["H200"]
    model: ModelPreset = MODELS["llama3-8b"]
    eff: Efficiency = Efficiency()
    speed: float = 1.0  # multiplies every step time (e.g. 4.0 = a GPU four times slower)
    page_size: int = 16  # radix cache granularity; SGLang uses 1, pages keep the tree small
    cuda_graph: bool = True  # False = --disable-cuda-graph (decode forwards slowed by eff.no_cuda_graph_decode)
    # --sim-speed-drift CV / --sim-speed-drift-period-s S (off by default): window-to-window noise, a seeded speed
    # factor that changes every S simulated seconds (sglang_sim.drift)
    speed_drift_cv: float = 0.0
    speed_drift_period_s: float = 60.0

    @classmethod
    def preset(cls, gpu: str = "H200", model: str = "llama3-8b", speed: float = 1.0) -> SimParams:
        return cls(gpu=gpu_preset(gpu), model=model_preset(model), speed=speed)


@dataclass(frozen=True)
class EngineKnobs:
    """Server flags the engine honours (None = SGLang's auto default)."""

    max_running_requests: int | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0
    disable_radix_cache: bool = False
    context_length: int | None = None
    max_prefill_tokens: int = 16384
    enable_mixed_chunk: bool = False
    tp_size: int | None = None  # tensor parallel GPUs (None: the model preset's own, 1 but for llama3-70b's 4)
    kv_cache_dtype: str = "auto"  # bytes per KV token (with_kv_dtype): the pool and the KV traffic
    cuda_graph_max_bs: int | None = None  # decode batches above it run without a graph (None: default_cuda_graph_max_bs)


@dataclass(frozen=True)
class Resolved:
    """Knobs after SGLang's auto rules, plus the KV pool size; what /server_info reports."""

    max_total_num_tokens: int
    max_running_requests: int
    mem_fraction_static: float
    chunked_prefill_size: int
    context_len: int
    schedule_policy: str
    available_gpu_mem_gb: float
    extra: dict[str, float] = field(default_factory=dict)
    cuda_graph_max_bs: int = 0  # decode batches of more requests run without a CUDA graph (0: no graphs at all)


# SGLang 0.5.17's start-up accounting on one H200 (docs/calibration.md, "Predicting the KV pool before launch").
# Memory it holds beyond weights and KV when it sizes the pool (rotary caches, sampler buffers, allocator slack):
# 80-84 MiB on the three logged launches (llama3-8b-shape, mem 0.14 twice and 0.17); 82 MiB fits all within 0.03%.
RUNTIME_OVERHEAD_BYTES = 82 * MIB
POST_POOL_BYTES = 0.16 * GIB  # allocated after the pool is sized (req_to_token pool...): 126.09 - 6.38 -> 119.55 GB
CUDA_GRAPH_BYTES = 0.5 * GIB  # captured graphs' memory pool (unfitted: no stored launch measured it)
ACT_BUFFERS_PER_TOKEN = 20  # hidden-size bf16 activation buffers per token of one extend batch (a rough figure)
STARTUP_BASE_S = 40.0  # spawn to ready without CUDA graphs, dummy weights (the 0.5.17 log: ~37 s after its first line)
STARTUP_CUDA_GRAPH_S = 35.0  # graph capture and its warm-up (62-94 s warm with graphs on, docs/h200-sample)
WEIGHT_LOAD_BYTES_PER_S = 2e9  # reading real weights from local disk (unfitted; dummy weights load in ~0.2 s)


@dataclass(frozen=True)
class MemoryPlan:
    """SGLang's memory accounting for one launch, predicted before it (bytes on one TP rank), and its start-up."""

    avail_bytes: float  # free after the CUDA context: "Load weight begin. avail mem=..."
    mem_fraction: float
    weight_bytes: float
    overhead_bytes: float
    kv_bytes_per_token: float
    pool_tokens: int  # max_total_num_tokens; <= 0 when the weights do not fit in the static share
    headroom_bytes: float  # outside the static share: avail x (1 - mem_fraction)
    reserve_bytes: float  # what the running server needs there: activations, CUDA graphs, post-pool buffers
    startup_s: float
    failure: str = ""  # why the server would not start ("" = it starts)

    @property
    def starts(self) -> bool:
        return not self.failure

    def describe(self) -> str:
        """The numbers in one line, GiB and tokens."""
        return (f"mem_fraction {self.mem_fraction}: static {self.avail_bytes * self.mem_fraction / GIB:.2f} GiB, "
                f"weights {self.weight_bytes / GIB:.2f} GiB, KV pool {self.pool_tokens} tokens; outside the static "
                f"share {self.headroom_bytes / GIB:.2f} GiB for {self.reserve_bytes / GIB:.2f} GiB of activations "
                f"and CUDA graphs; start-up ~{self.startup_s:.0f} s")


def activation_bytes(model: ModelPreset, extend_tokens: int) -> float:
    """Activation workspace of one extend batch of `extend_tokens` tokens (ACT_BUFFERS_PER_TOKEN hidden-size buffers)."""
    return extend_tokens * model.hidden * model.dtype_bytes * ACT_BUFFERS_PER_TOKEN  # replicated over TP ranks


def plan_memory(gpu: GpuPreset, model: ModelPreset, mem_fraction: float, extend_tokens: int,
                cuda_graph: bool = True, dummy_weights: bool = True) -> MemoryPlan:
    """Predict what SGLang's start-up does with the GPU's memory (model_runner.profile_max_num_token).

    - avail = the GPU's memory less the CUDA context (`gpu.context_bytes`), as "Load weight begin" logs it;
    - weights = the model's parameters x dtype bytes / TP (`ModelPreset.weight_bytes`);
    - pool_tokens = floor((avail x mem_fraction - weights - RUNTIME_OVERHEAD_BYTES) / KV bytes per token),
      SGLang's `rest = avail_after_weights - avail x (1 - mem_fraction)`; KV bytes per token = 2 x layers x
      KV heads x head_dim x dtype / TP;
    - reserve = activations of one extend batch (`extend_tokens`, i.e. min(chunked_prefill_size,
      max_prefill_tokens)) + CUDA_GRAPH_BYTES when CUDA graphs are on + POST_POOL_BYTES;
    - it does not start when pool_tokens <= 0 (SGLang: "Not enough memory. Please try to increase
      --mem-fraction-static") or when reserve > avail x (1 - mem_fraction) (CUDA out of memory while capturing
      graphs or in the first long prefill);
    - startup_s = STARTUP_BASE_S + STARTUP_CUDA_GRAPH_S (graphs on) + weights / WEIGHT_LOAD_BYTES_PER_S (real
      weights), a coarse figure (warm machine; a cold one JIT-compiles kernels for another ~60 s).
    Fitted on SGLang 0.5.17, one H200, llama3-8b-shape (three logged pools); other GPUs and models extrapolate.
    """
    avail = gpu.mem_bytes - gpu.context_bytes
    weights = model.weight_bytes
    rest = avail * mem_fraction - weights - RUNTIME_OVERHEAD_BYTES
    tokens = int(rest // model.kv_bytes_per_token) if rest > 0 else 0
    headroom = avail * (1 - mem_fraction)
    reserve = activation_bytes(model, extend_tokens) + (CUDA_GRAPH_BYTES if cuda_graph else 0.0) + POST_POOL_BYTES
    startup = STARTUP_BASE_S + (STARTUP_CUDA_GRAPH_S if cuda_graph else 0.0)
    startup += 0.0 if dummy_weights else weights / WEIGHT_LOAD_BYTES_PER_S
    failure = ""
    if tokens <= 0:
        failure = (f"Not enough memory. Please try to increase --mem-fraction-static. (weights {weights / GIB:.2f} GiB "
                   f"> {mem_fraction} x {avail / GIB:.2f} GiB)")
    elif reserve > headroom:
        failure = (f"CUDA out of memory: {headroom / GIB:.2f} GiB outside --mem-fraction-static {mem_fraction} for "
                   f"{reserve / GIB:.2f} GiB of activations and CUDA graphs; decrease --mem-fraction-static")
    return MemoryPlan(avail, mem_fraction, weights, RUNTIME_OVERHEAD_BYTES, model.kv_bytes_per_token, tokens,
                      headroom, reserve, startup, failure)


def gpu_preset(name: str) -> GpuPreset:
    key = {k.lower(): k for k in GPUS}.get(name.lower())
    if key is None:
        raise ValueError(f"unknown sim GPU {name!r} (known: {', '.join(GPUS)})")
    return GPUS[key]


def model_preset(name: str) -> ModelPreset:
    if name not in MODELS:
        raise ValueError(f"unknown sim model {name!r} (known: {', '.join(MODELS)})")
    return MODELS[name]


def default_mem_fraction(gpu: GpuPreset, model: ModelPreset) -> float:
    """SGLang reserves ~10 GiB on big GPUs (memory_hook.py); VLMs get 0.95x for the ViT activations."""
    gib = gpu.mem_bytes / GIB
    # approximations of handle_gpu_memory_settings' results: ~0.88 on H200-size, ~0.83 on 80 GB
    frac = 0.88 if gib >= 120 else 0.83 if gib >= 60 else 0.80 if gib >= 35 else 0.75
    if model.vision_params > 0:
        frac = round(frac * 0.95, 3)
    return frac


def default_chunked_prefill(gpu: GpuPreset) -> int:
    """The auto table of memory_hook.py by GPU capacity."""
    gib = gpu.mem_bytes / GIB
    if gib < 20:
        return 2048
    if gib < 160:
        return 4096 if gib < 60 else 8192
    return 16384


def default_cuda_graph_max_bs(gpu: GpuPreset, tp: int) -> int:
    """SGLang 0.5.x's --cuda-graph-max-bs auto rule by GPU memory (server_args' memory settings, approximated):
    24 below 35 GiB, 80 below 60, 256 below 160 (H100, H200) with TP under 4, 512 otherwise. The H200 value is the
    real one: a 0.5.17 server log on one H200 resolved cuda_graph_config decode max_bs=256 (batch sizes 1..256)."""
    gib = gpu.mem_bytes / GIB
    if gib < 35:
        return 24
    if gib < 60:
        return 80
    return 256 if gib < 160 and tp < 4 else 512


def resolve(params: SimParams, knobs: EngineKnobs) -> Resolved:
    """Apply SGLang's defaults and size the KV pool (`plan_memory`); raise SimOOM where the plan says it won't start."""
    gpu, model = params.gpu, params.model
    frac = knobs.mem_fraction_static if knobs.mem_fraction_static is not None else default_mem_fraction(gpu, model)
    chunk = knobs.chunked_prefill_size if knobs.chunked_prefill_size is not None else default_chunked_prefill(gpu)
    if chunk is not None and chunk <= 0:
        chunk = 1 << 30  # -1 disables chunking: a whole prompt in one extend
    plan = plan_memory(gpu, model, frac, min(chunk, knobs.max_prefill_tokens), params.cuda_graph)
    if not plan.starts:
        raise SimOOM(plan.failure)
    tokens = plan.pool_tokens
    if tokens < 4 * params.page_size:
        raise SimOOM(f"KV cache pool too small: max_total_num_tokens={tokens}")
    ctx = knobs.context_length or model.context_len
    auto = min(max(int(tokens / ctx * 512), 2048), 4096)
    mrr = knobs.max_running_requests if knobs.max_running_requests is not None else auto
    mrr = max(1, min(mrr, tokens // 2))
    graph_bs = knobs.cuda_graph_max_bs if knobs.cuda_graph_max_bs is not None else default_cuda_graph_max_bs(gpu, model.tp)
    avail = plan.avail_bytes
    return Resolved(
        max_total_num_tokens=tokens, max_running_requests=mrr, mem_fraction_static=frac,
        chunked_prefill_size=chunk, context_len=ctx, schedule_policy=knobs.schedule_policy,
        available_gpu_mem_gb=round((avail * (1 - frac)) / GIB, 2),
        extra={"weight_gb": round(model.weight_bytes / GIB, 2), "kv_gb": round(tokens * model.kv_bytes_per_token / GIB, 2),
               "sim_gpu_memory_used_mib": round(simulated_gpu_used_bytes(params, frac, chunk) / 2**20, 1)},
        cuda_graph_max_bs=graph_bs if params.cuda_graph else 0,
    )


def simulated_gpu_used_bytes(params: SimParams, frac: float, chunk: int | None) -> float:
    """Device memory a real server would hold: CUDA context, the static pool (weights + KV), activations.

    SGLang allocates weights and the whole KV pool at start, so usage is flat; the activation workspace of
    one prefill chunk (`activation_bytes`) comes on top.
    """
    gpu = params.gpu
    avail = gpu.mem_bytes - gpu.context_bytes
    act = min(avail * (1 - frac), activation_bytes(params.model, chunk or 8192))
    return gpu.context_bytes + avail * frac + act


def with_tp(params: SimParams, tp: int | None) -> SimParams:
    """params with the model split over `tp` GPUs (weights, KV heads and per-step compute; cost.CostModel adds the
    all-reduces); None keeps the preset's own."""
    if tp is None or tp == params.model.tp:
        return params
    if tp < 1:
        raise ValueError(f"tp_size {tp}: expected 1 or more")
    return replace(params, model=replace(params.model, tp=tp))


def with_knob_model(params: SimParams, knobs: EngineKnobs) -> SimParams:
    """params with the model as the knobs store and split it: --tp-size (with_tp) and --kv-cache-dtype."""
    params = with_tp(params, knobs.tp_size)
    return replace(params, model=with_kv_dtype(params.model, knobs.kv_cache_dtype))


def with_speed(params: SimParams, speed: float) -> SimParams:
    return replace(params, speed=speed)
