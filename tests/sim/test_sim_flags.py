"""The simulator's modelled SGLang flags (issue 30 §2): each test states the effect of one flag the simulator must
reproduce, on a case where ignoring the flag gives another answer."""

from __future__ import annotations

import pytest

from sglang_sim.cost import EAGER_LAUNCH_S, CostModel
from sglang_sim.engine import Engine
from sglang_sim.params import GPUS, MODELS, EngineKnobs, SimParams
from sweep.core.types import Flags, ServerConfig
from sweep.launchers.prediction import predict_launch
from tests.sim.test_sim_engine import closed_loop, workload

SHAPE = SimParams.preset("H200", "llama3-8b-shape")
KV_BOUND = dict(max_running_requests=256, mem_fraction_static=0.14, chunked_prefill_size=4096, schedule_policy="lpm")


def test_fp8_kv_cache_doubles_the_pool_and_the_memory_plan_says_so() -> None:
    auto = Engine(SHAPE, EngineKnobs(**KV_BOUND))  # type: ignore[arg-type]
    fp8 = Engine(SHAPE, EngineKnobs(**KV_BOUND, kv_cache_dtype="fp8_e5m2"))  # type: ignore[arg-type]
    assert auto.cfg.max_total_num_tokens == 52286  # the real 0.5.17 log: 52,275 (docs/calibration.md)
    assert abs(fp8.cfg.max_total_num_tokens - 2 * auto.cfg.max_total_num_tokens) <= 1
    model, gpu = MODELS["llama3-8b-shape"], GPUS["H200"]
    config = ServerConfig(mem_fraction_static=0.14, chunked_prefill_size=4096)
    by_flag = predict_launch(model, gpu, config, ["--kv-cache-dtype", "fp8_e5m2"])
    assert by_flag.pool_tokens == fp8.cfg.max_total_num_tokens
    assert predict_launch(model, gpu, config, []).pool_tokens == auto.cfg.max_total_num_tokens


def test_fp8_kv_cache_lifts_a_kv_bound_server() -> None:
    wl = workload(300, (700, 1200), (150, 350))
    runs = {d: closed_loop(Engine(SHAPE, EngineKnobs(**KV_BOUND, kv_cache_dtype=d)), wl, 96, 60.0)  # type: ignore[arg-type]
            for d in ("auto", "fp8_e5m2")}
    assert runs["fp8_e5m2"].retractions < runs["auto"].retractions or runs["auto"].max_queue > runs["fp8_e5m2"].max_queue
    assert runs["fp8_e5m2"].p("ttft", 95) < runs["auto"].p("ttft", 95) / 2


def test_decode_above_cuda_graph_max_bs_runs_without_a_graph() -> None:
    on, capped = CostModel(SHAPE), CostModel(SHAPE, graph_max_bs=32)
    assert capped.decode(32, 32 * 1000) == pytest.approx(on.decode(32, 32 * 1000))
    # above the bound a forward pays the kernel launches a graph saves: the same milliseconds at any batch size
    # (EAGER_LAUNCH_S, the H200 point), not a multiple of the forward (which charged a 300-request batch 3x)
    extra = EAGER_LAUNCH_S * SHAPE.speed
    for n in (33, 64, 256):
        assert capped.decode(n, n * 1000) == pytest.approx(on.decode(n, n * 1000) + extra)
    wl = workload(200, (200, 400), (100, 200))
    tpot = {bs: closed_loop(Engine(SHAPE, EngineKnobs(max_running_requests=128, cuda_graph_max_bs=bs)), wl, 64,
                            30.0).p("tpot", 50) for bs in (None, 16)}
    assert tpot[16] > tpot[None] + 0.8 * EAGER_LAUNCH_S  # s: every forward above 16 requests pays it


def test_the_extend_budget_is_the_smaller_of_chunk_and_max_prefill_tokens() -> None:
    # short prompts, tiny outputs: prefill-bound; a budget of 1,000 tokens holds one prompt per extend batch,
    # whether it comes from --max-prefill-tokens or from --chunked-prefill-size
    wl = workload(300, (900, 1000), (4, 8))

    def tput(**kw: int) -> float:
        return closed_loop(Engine(SHAPE, EngineKnobs(max_running_requests=128, **kw)), wl, 64, 20.0).throughput  # type: ignore[arg-type]
    wide = tput(chunked_prefill_size=8192, max_prefill_tokens=16384)
    by_prefill, by_chunk = tput(chunked_prefill_size=8192, max_prefill_tokens=1000), tput(chunked_prefill_size=1000)
    assert by_prefill == pytest.approx(by_chunk, rel=0.03)
    assert by_prefill < 0.9 * wide


def test_schedule_conservativeness_admits_less_against_the_pool() -> None:
    wl = workload(300, (700, 1200), (300, 600))
    eager = Engine(SHAPE, EngineKnobs(**KV_BOUND, schedule_conservativeness=0.3))  # type: ignore[arg-type]
    careful = Engine(SHAPE, EngineKnobs(**KV_BOUND, schedule_conservativeness=1.5))  # type: ignore[arg-type]
    closed_loop(eager, wl, 96, 60.0)
    closed_loop(careful, wl, 96, 60.0)
    assert eager.counters["num_retracted_requests_total"] > careful.counters["num_retracted_requests_total"]


def test_mixed_chunk_lets_decode_ride_with_prefill() -> None:
    wl = workload(200, (3000, 4000), (100, 200))
    runs = {m: closed_loop(Engine(SHAPE, EngineKnobs(max_running_requests=64, chunked_prefill_size=1024,
                                                    enable_mixed_chunk=m)), wl, 32, 30.0) for m in (False, True)}
    # without mixing, every prefill chunk stalls the running decodes for a whole step
    assert runs[True].p("tpot", 50) < runs[False].p("tpot", 50)


def test_disable_radix_cache_reuses_no_prefix() -> None:
    shared = workload(1, (1024, 1024), (10, 10))[0][0]
    wl = [(shared + ids[:64], out, media) for ids, out, media in workload(100, (64, 64), (64, 128))]
    runs = {d: closed_loop(Engine(SHAPE, EngineKnobs(disable_radix_cache=d)), wl, 8, 20.0) for d in (False, True)}
    assert runs[False].cached > 0.5 * runs[False].prompt
    assert runs[True].cached == 0


def test_the_simulator_accepts_any_sglang_flag_and_lists_the_unmodelled_ones() -> None:
    from sweep.launchers.virtual import VirtualLauncher

    h = VirtualLauncher(extra_args=["--load-format", "dummy"]).start(
        ServerConfig(flags=Flags({"page_size": 32, "enable_torch_compile": True, "kv_cache_dtype": "fp8_e5m2"})))
    assert h.server_info["unmodelled_flags"] == [
        "--enable-torch-compile: accepted, not modelled (the simulator runs as if it were not given)",
        "--page-size 32: accepted, not modelled (the simulator runs as if it were not given)"]
    assert h.server_info["kv_cache_dtype"] == "fp8_e5m2"  # modelled: the pool doubled
    with pytest.raises(Exception, match="bad server flag"):
        VirtualLauncher(extra_args=["--no-such-flag", "1"]).start(ServerConfig())
