"""SGLang as sweep talks to it: every SGLang-specific name outside the launcher's process handling."""

from __future__ import annotations

from sweep.engines.base import Dialect, MetricNames, Paths, dashed_flags

# Older / blog-post names -> the canonical (SGLang 0.5.x) name sweep reads.
ALIASES: dict[str, str] = {
    "num_waiting_reqs": "num_queue_reqs",
    "gpu_cache_usage_perc": "token_usage",
    "gpu_cache_usage_percent": "token_usage",
    "prefix_cache_hit_rate": "cache_hit_rate",
    "gpu_prefix_cache_hit_rate": "cache_hit_rate",
    "total_retracted_reqs": "num_retracted_requests_total",  # 0.4.x gauge, cumulative since start
    "num_prefill_infight_queue_reqs": "num_prefill_inflight_queue_reqs",
    "num_prefill_prealloc_queue_reqs": "num_prefill_bootstrap_queue_reqs",
}

SGLANG = Dialect(
    name="sglang",
    launch_module="sglang.launch_server",
    version_package="sglang",
    companion_packages=("torch", "flashinfer-python", "sgl-kernel"),
    ready_line="The server is fired up and ready to roll!",
    knob_flags=dashed_flags(),  # --max-running-requests, --mem-fraction-static, ...
    model_flag="--model-path",
    listen_flags=("--host", "--port"),
    always_flags=("--enable-metrics",),
    api_key_flag="--api-key",
    # Set on every launch: a copy in extra_args would silently win (argparse keeps the last), e.g. --host 0.0.0.0
    # opens the server to the network, --port points the client at nothing, --api-key turns every request into
    # a 401.
    owned_flags=("--model-path", "--model", "--host", "--port", "--api-key", "--enable-metrics"),
    paths=Paths(generate="/generate", chat="/v1/chat/completions", completions="/v1/completions",
                flush_cache="/flush_cache", server_info="/server_info", metrics="/metrics", health="/health"),
    # Only the simulated server exports sim_gpu_memory_used_mib; real SGLang never does (NVML there).
    metrics=MetricNames(prefix="sglang:", aliases=ALIASES, sim_gpu_gauge="sim_gpu_memory_used_mib"),
    process_prefix="sglang::",
)
