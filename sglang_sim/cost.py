"""Roofline step-time model: max(bytes / bandwidth, FLOPs / peak) plus fixed costs, all from SimParams."""

from __future__ import annotations

from sglang_sim.params import SimParams

# FLOPs of one ViT patch per encoder parameter (multiply-add = 2) and patches folded into one LLM token:
# Qwen2.5-VL merges 2x2 patches (14 px) into one 28x28 token; video also folds 2 frames (temporal patch 2).
PATCHES_PER_TOKEN = {"image": 4, "video": 8, "audio": 4}


# tools/fit_cuda_graph.py's point (SGLang 0.5.17, one H200, c=16): TPOT P50 18.8 ms with --disable-cuda-graph against
# 7.4 ms with graphs: 11.4 ms of kernel launches per decode forward that a graph saves
EAGER_LAUNCH_S = 0.0114


class CostModel:
    """Precomputed per-step constants so the engine's hot loop is a few float operations."""

    def __init__(self, p: SimParams, graph_max_bs: int | None = None):
        """graph_max_bs: the largest decode batch with a captured CUDA graph (--cuda-graph-max-bs as resolved); a
        larger batch runs its kernels one by one, as --disable-cuda-graph does (None: every batch has a graph)."""
        g, m, e = p.gpu, p.model, p.eff
        self.speed = p.speed
        self.decode_speed = p.speed * (1.0 if p.cuda_graph else e.no_cuda_graph_decode)  # decode forwards only
        self.graph_max_bs = graph_max_bs if p.cuda_graph and graph_max_bs is not None else (1 << 30 if p.cuda_graph else 0)
        tp = m.tp
        bw = g.bandwidth * e.bandwidth
        self.peak_gemm = g.flops * e.flops
        self.peak_attn = g.flops * e.attention_flops
        self.peak_enc = g.flops * e.encoder_flops
        self.llm_weight_s = m.params * m.dtype_bytes / tp / bw  # weights streamed once per forward
        self.kv_s_per_token = m.kv_bytes_per_token / (g.bandwidth * e.kv_bandwidth)  # KV read (decode), written (prefill)
        self.gemm_s_per_token = 2 * m.params / tp / self.peak_gemm
        self.attn_flops_per_ctx = 4 * m.layers * m.q_dim / tp  # QK^T and AV, 2 FLOPs each per context token
        self.step_s = e.step_overhead_s
        self.per_req_s = e.per_req_overhead_s
        self.prefill_s = e.prefill_overhead_s
        self.prefill_req_s = e.prefill_per_req_s
        self.host_s = e.host_latency_s  # CPU side, off the GPU: delays a request, never the batch; no speed
        self.host_s_per_inflight = e.host_s_per_inflight
        self.media_host_s = e.media_host_s_per_token
        # two all-reduces per layer under TP; latency plus the hidden-state bytes over the link
        self.tp_fixed_s = 2 * m.layers * e.allreduce_latency_s if tp > 1 else 0.0
        self.tp_s_per_token = 2 * m.layers * m.hidden * m.dtype_bytes / g.link_bandwidth if tp > 1 else 0.0
        self.enc_flops_per_token = {k: 2 * m.vision_params * v / tp for k, v in PATCHES_PER_TOKEN.items()}
        self._eager_s = EAGER_LAUNCH_S if p.cuda_graph else 0.0  # no graphs at all: decode_speed's factor carries it

    def decode(self, n: int, ctx_sum: float) -> float:
        """One decode forward of n requests whose contexts sum to ctx_sum tokens."""
        mem = self.llm_weight_s + ctx_sum * self.kv_s_per_token
        comp = n * self.gemm_s_per_token + ctx_sum * self.attn_flops_per_ctx / self.peak_attn
        return (max(mem, comp) + self.decode_fixed(n)) * self.decode_speed_at(n)

    def decode_speed_at(self, n: int) -> float:
        """The decode forward's time factor (x speed): Efficiency.no_cuda_graph_decode for every forward of a server
        without CUDA graphs (--disable-cuda-graph: 3.09, the one H200 point tools/fit_cuda_graph.py fits), else 1."""
        return self.decode_speed

    def decode_terms(self, n: int) -> tuple[float, float, float, float]:
        """(mem0, mem_per_ctx, comp0, comp_per_ctx) and fixed part, for the engine's macro-step loop."""
        return (self.llm_weight_s, self.kv_s_per_token, n * self.gemm_s_per_token,
                self.attn_flops_per_ctx / self.peak_attn)

    def decode_fixed(self, n: int) -> float:
        """The decode forward's fixed part: step and per-request overheads, TP's all-reduces, and above graph_max_bs
        (a server with graphs) the launches a graph saves, EAGER_LAUNCH_S: a time per forward that grows neither with
        the batch nor with the GPU's speed."""
        eager = self._eager_s if n > self.graph_max_bs else 0.0
        return self.step_s + n * (self.per_req_s + self.tp_s_per_token) + self.tp_fixed_s + eager

    def prefill(self, ext_tokens: int, attn_ctx: float, kv_touched: float, n_reqs: int, enc_flops: float,
                decode_n: int = 0, decode_ctx: float = 0.0) -> float:
        """One extend forward: ext_tokens new tokens, attention over attn_ctx token pairs, encoder FLOPs."""
        tokens = ext_tokens + decode_n
        mem = self.llm_weight_s + (kv_touched + decode_ctx) * self.kv_s_per_token
        comp = tokens * self.gemm_s_per_token + (attn_ctx + decode_ctx) * self.attn_flops_per_ctx / self.peak_attn
        t = max(mem, comp) + self.step_s + self.prefill_s + n_reqs * self.prefill_req_s + decode_n * self.per_req_s
        t += self.tp_fixed_s + tokens * self.tp_s_per_token + enc_flops / self.peak_enc
        return t * self.speed

    def encoder_flops(self, media_tokens: dict[str, int]) -> float:
        return sum(self.enc_flops_per_token.get(k, 0.0) * n for k, n in media_tokens.items())
