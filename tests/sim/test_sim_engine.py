"""Engine behaviour: each test states an effect of a server knob that the simulator must reproduce."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest

from sglang_sim.engine import Engine, SimRequest
from sglang_sim.params import EngineKnobs, SimOOM, SimParams, resolve
from sglang_sim.radix import RadixCache
from sglang_sim.shape import model_from_config


@dataclass
class Run:
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    out_tokens: int = 0
    cached: int = 0
    prompt: int = 0
    seconds: float = 0.0
    max_queue: float = 0.0
    retractions: int = 0

    @property
    def throughput(self) -> float:
        return self.out_tokens / self.seconds

    def p(self, name: str, q: float) -> float:
        return float(np.percentile(getattr(self, name), q))


def closed_loop(eng: Engine, prompts: list[tuple[list[int], int, dict[str, int]]], users: int,
                seconds: float, max_steps: int = 1 << 30) -> Run:
    """Each user sends its next request when the previous one finishes; counts what finishes after a 10% warm-up."""
    run, k = Run(), 0
    warm = seconds * 0.1
    sent: dict[str, float] = {}

    def send(now: float) -> None:
        nonlocal k
        ids, out, media = prompts[k % len(prompts)]
        eng.submit(SimRequest(f"r{k}", ids, out, media), now)
        sent[f"r{k}"] = now
        k += 1

    for _ in range(users):
        send(0.0)
    while eng.now < seconds:
        res = eng.step(eng.now, until=seconds, max_steps=max_steps)
        if eng.now >= warm:
            run.max_queue = max(run.max_queue, len(eng.waiting))
        for rid in res.finished:
            r = eng.reqs[rid]
            if res.end >= warm and r.status == "finished":
                assert r.first_token_at is not None and r.finished_at is not None
                if sent[rid] >= warm:  # the cold-start burst is not steady-state TTFT
                    run.ttft.append(r.first_token_at - r.arrival)
                if r.out_base > 1:
                    run.tpot.append((r.finished_at - r.first_token_at) / (r.out_base - 1))
                run.out_tokens += r.out_base
                run.cached += r.cached_tokens
                run.prompt += r.prompt_len
                run.retractions += r.num_retractions
            eng.forget(rid)
            send(res.end)
    run.seconds = eng.now - warm
    return run


def workload(n: int, prompt: tuple[int, int], out: tuple[int, int],
             seed: int = 0) -> list[tuple[list[int], int, dict[str, int]]]:
    rng = random.Random(seed)
    return [([rng.randrange(3, 1000) for _ in range(rng.randint(*prompt))], rng.randint(*out), {}) for _ in range(n)]


H200_8B = SimParams.preset("H200", "llama3-8b")


def test_max_running_requests_trades_tpot_for_throughput_until_saturation() -> None:
    wl = workload(400, (256, 768), (128, 384))
    runs = {m: closed_loop(Engine(H200_8B, EngineKnobs(max_running_requests=m)), wl, 256, 60.0) for m in (8, 32, 128, 256)}
    tput = [runs[m].throughput for m in (8, 32, 128, 256)]
    tpot = [runs[m].p("tpot", 50) for m in (8, 32, 128, 256)]
    assert tput[0] < tput[1] < tput[2]
    assert tpot[0] < tpot[1] < tpot[2] < tpot[3]
    # diminishing returns: the throughput gain per doubling of the cap shrinks as the batch grows
    per_doubling = [(tput[1] / tput[0]) ** 0.5, (tput[2] / tput[1]) ** 0.5, tput[3] / tput[2]]
    assert per_doubling[0] > per_doubling[1] > per_doubling[2] > 1.0


def test_small_kv_pool_retracts_queues_and_blows_up_ttft_tail() -> None:
    wl = workload(400, (512, 1024), (256, 768))
    big = closed_loop(Engine(H200_8B, EngineKnobs(max_running_requests=256, mem_fraction_static=0.88)), wl, 128, 90.0)
    small_eng = Engine(H200_8B, EngineKnobs(max_running_requests=256, mem_fraction_static=0.14))
    small = closed_loop(small_eng, wl, 128, 90.0)
    assert big.retractions == 0 and big.max_queue == 0
    assert small_eng.counters["num_retracted_requests_total"] > 0
    assert small.max_queue > 20
    assert small.p("ttft", 99) > 10 * big.p("ttft", 99)
    assert small.p("ttft", 99) > 2.0


def test_lpm_beats_fcfs_on_cache_hit_rate_with_shared_prefixes() -> None:
    rng = random.Random(1)
    prefixes = [[rng.randrange(3, 1000) for _ in range(1024)] for _ in range(160)]
    wl: list[tuple[list[int], int, dict[str, int]]] = []
    for _ in range(600):
        pre = prefixes[rng.randrange(len(prefixes))]
        wl.append((pre + [rng.randrange(3, 1000) for _ in range(64)], rng.randint(64, 256), {}))
    hit = {}
    for policy in ("fcfs", "lpm"):
        knobs = EngineKnobs(max_running_requests=24, mem_fraction_static=0.16, schedule_policy=policy)
        run = closed_loop(Engine(H200_8B, knobs), wl, 100, 60.0)
        hit[policy] = run.cached / run.prompt
    assert hit["lpm"] > hit["fcfs"] + 0.05, hit


def test_larger_chunked_prefill_lowers_ttft_at_low_load() -> None:
    wl = workload(300, (6000, 7000), (16, 32))
    ttft = {c: closed_loop(Engine(H200_8B, EngineKnobs(chunked_prefill_size=c)), wl, 1, 20.0).p("ttft", 50)
            for c in (512, 2048, 8192)}
    assert ttft[8192] < ttft[2048] < ttft[512], ttft


def test_images_raise_ttft_through_encoder_and_visual_tokens() -> None:
    vlm = SimParams.preset("H200", "qwen2.5-vl-7b")
    text = workload(50, (200, 300), (32, 64))
    with_img = [(ids + list(range(2_000_000 + i * 1000, 2_000_000 + i * 1000 + 999)), out, {"image": 999})
                for i, (ids, out, _) in enumerate(text)]
    t_text = closed_loop(Engine(vlm), text, 4, 20.0).p("ttft", 50)
    t_img = closed_loop(Engine(vlm), with_img, 4, 20.0).p("ttft", 50)
    assert t_img > 1.5 * t_text
    # the encoder itself costs time: same visual tokens without encoder FLOPs are faster
    no_enc: list[tuple[list[int], int, dict[str, int]]] = [(ids, out, {}) for ids, out, _ in with_img]
    assert closed_loop(Engine(vlm), no_enc, 4, 20.0).p("ttft", 50) < t_img


def test_time_skipping_is_exact() -> None:
    """Multi-step decode runs give the same token timeline as stepping one forward at a time."""
    wl = workload(60, (100, 400), (20, 200))
    knobs = EngineKnobs(max_running_requests=16)  # a pool without eviction: cache state cannot diverge
    a = closed_loop(Engine(H200_8B, knobs), wl, 24, 10.0)
    b = closed_loop(Engine(H200_8B, knobs), wl, 24, 10.0, max_steps=1)
    assert a.out_tokens == b.out_tokens
    assert np.allclose(a.ttft, b.ttft) and np.allclose(a.tpot, b.tpot)


def test_kv_accounting_returns_to_empty_and_retraction_reprefills() -> None:
    eng = Engine(SimParams.preset("H200", "llama3-8b"), EngineKnobs(mem_fraction_static=0.125, max_running_requests=64))
    wl = workload(64, (400, 600), (1500, 2000))
    for i, (ids, out, _) in enumerate(wl):
        eng.submit(SimRequest(f"q{i}", ids, out), 0.0)
    retracted: set[str] = set()
    while eng.has_work():
        res = eng.step(eng.now)
        retracted.update(res.retracted)
        used = eng.total - eng.avail()
        assert 0 <= used <= eng.total
    assert retracted, "a pool this small must retract"
    assert eng.used_private == 0 and eng.tree.evictable_tokens == eng.tree.total_tokens
    for rid in retracted:
        r = eng.reqs[rid]
        assert r.status == "finished" and r.num_retractions >= 1
        times = eng.token_times(r)
        assert len(times) == r.max_new and times == sorted(times)
    assert eng.counters["num_retracted_requests_total"] >= len(retracted)
    h = eng.metrics()["histograms"]["time_to_first_token_seconds"]
    assert h.count == 64


def test_radix_cache_match_lock_evict() -> None:
    c = RadixCache(page_size=4)
    a = c.pages(list(range(10)))  # 2 full pages; the partial one is never cached
    assert len(a) == 2
    path, created = c.insert([], a, now=1.0)
    assert created == 2 and c.total_tokens == 8 and c.evictable_tokens == 0
    assert c.evict(8) == 0  # locked
    c.unlock(path, now=2.0)
    assert c.evictable_tokens == 8
    b = c.pages(list(range(8)) + [99, 98, 97, 96])
    p2, created = c.insert(c.match(b, 3.0), b, now=3.0)
    assert created == 1 and c.match_len(b) == 12
    c.unlock(p2, now=4.0)
    assert c.evict(4) == 4 and c.match_len(b) == 8  # only unreferenced leaves go: the last page
    assert c.total_tokens == 8


def test_pool_sizing_matches_real_h200_log_and_refuses_oom() -> None:
    shape = model_from_config("models/llama3-8b-shape")
    assert shape is not None and abs(shape.params - 6.98e9) < 0.05e9
    cfg = resolve(SimParams.preset("H200").__class__(model=shape), EngineKnobs(mem_fraction_static=0.14))
    assert abs(cfg.max_total_num_tokens - 52278) / 52278 < 0.03  # the real server's pool (fixture log)
    with pytest.raises(SimOOM):
        Engine(H200_8B, EngineKnobs(mem_fraction_static=0.1))
    d = resolve(H200_8B, EngineKnobs())
    assert d.chunked_prefill_size == 8192 and 0.85 <= d.mem_fraction_static <= 0.92
