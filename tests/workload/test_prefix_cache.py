"""perfect_prefix_hits: the hit tokens of a perfect prefix cache over prompts in order, unbounded and LRU-capped,
on hand-computed cases."""

from __future__ import annotations

import random

import pytest

from sweep.workload.prefix_cache import PrefixCache, perfect_prefix_hits

ABC = [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5]]


def test_unbounded_hits_the_longest_cached_prefix() -> None:
    # [1,2,3] misses all; [1,2,4] hits 1,2; [1,2,3,5] hits 1,2,3 -> 0 + 2 + 3 of 3 + 3 + 4
    assert perfect_prefix_hits(ABC) == (5, 10)
    assert perfect_prefix_hits([]) == (0, 0)
    assert perfect_prefix_hits([[7, 7], [7, 7], [7]]) == (3, 5)  # a repeat hits whole; a prefix of one too
    assert perfect_prefix_hits([[1, 2], [2, 1]]) == (0, 4)  # sharing tokens is not sharing a prefix
    assert perfect_prefix_hits(iter([(1, 2, 3), (1, 2, 3)])) == (3, 6)  # any iterable of sequences


def test_lru_cap_evicts_the_least_recently_used_leaf() -> None:
    # cap 4: {1,2,3} then 4 joins (4 tokens); [1,2,3,5] hits 3, adds 5, evicts leaf 4 (used at prompt 2, the
    # oldest leaf): 0 + 2 + 3
    assert perfect_prefix_hits(ABC, capacity_tokens=4) == (5, 10)
    # cap 3: after [1,2,4] the oldest leaf 3 goes ({1,2,4}); [1,2,3,5] then hits only 1,2 -> 0 + 2 + 2
    assert perfect_prefix_hits(ABC, capacity_tokens=3) == (4, 10)
    # cap 2: each prompt keeps its first two tokens only (the deeper of equally recent nodes goes first)
    assert perfect_prefix_hits(ABC, capacity_tokens=2) == (4, 10)
    # cap 0: nothing is ever cached
    assert perfect_prefix_hits(ABC, capacity_tokens=0) == (0, 10)
    assert perfect_prefix_hits(ABC, capacity_tokens=100) == perfect_prefix_hits(ABC)


def test_lru_keeps_what_was_used_recently() -> None:
    # cap 4: A=[1,2] and B=[3,4] fill it; A again hits 2 and makes B the oldest; C=[5,6] evicts B ({1,2,5,6});
    # B misses and evicts A, now older than C ({5,6,3,4}); A misses: hits 0 + 0 + 2 + 0 + 0 + 0
    seqs = [[1, 2], [3, 4], [1, 2], [5, 6], [3, 4], [1, 2]]
    assert perfect_prefix_hits(seqs, capacity_tokens=4) == (2, 12)
    assert perfect_prefix_hits(seqs) == (6, 12)
    # a shared stem outlives its branches: cap 3, [9,1] [9,2] fill it ({9,1,2}); [9,3] hits 9 and evicts the
    # oldest branch 1 ({9,2,3}); [9,3] again hits both: 0 + 1 + 1 + 2
    assert perfect_prefix_hits([[9, 1], [9, 2], [9, 3], [9, 3]], capacity_tokens=3) == (4, 8)


def test_negative_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity_tokens"):
        perfect_prefix_hits(ABC, capacity_tokens=-1)


def _token_by_token(seqs: list[list[int]], cap: int | None) -> tuple[int, int]:
    """The same cache kept the slow way: every cached prefix with its last use; evict the least recently used
    prefix that no other cached prefix extends (deepest first at equal last use)."""
    cache: dict[tuple[int, ...], int] = {}
    hits = total = 0
    for t, seq in enumerate(seqs):
        total += len(seq)
        k = 0
        while k < len(seq) and tuple(seq[:k + 1]) in cache:
            k += 1
        hits += k
        for j in range(1, len(seq) + 1):
            cache[tuple(seq[:j])] = t
        while cap is not None and len(cache) > cap:
            parents = {p[:-1] for p in cache}
            victim = min((p for p in cache if p not in parents), key=lambda p: (cache[p], -len(p)))
            del cache[victim]
    return hits, total


@pytest.mark.parametrize("seed", range(40))
def test_radix_tree_agrees_with_the_token_by_token_cache(seed: int) -> None:
    rng = random.Random(seed)
    stems = [[rng.randrange(4) for _ in range(rng.randrange(1, 6))] for _ in range(3)]
    seqs = [rng.choice(stems)[: rng.randrange(0, 6)] + [rng.randrange(4) for _ in range(rng.randrange(0, 5))]
            for _ in range(rng.randrange(1, 14))]
    for cap in (None, 0, 1, 3, 5, 8, 13):
        assert perfect_prefix_hits(seqs, cap) == _token_by_token(seqs, cap), (seqs, cap)


def test_the_unbounded_cache_holds_about_eight_bytes_a_distinct_token() -> None:
    # the ladder predicts every window's hit rate through an unbounded cache of what it sent: a tuple of ints held
    # ~40 B a token (26 KB a request of the interactive profile), the arrays 8 B (issue 23 §2, docs/memory.md)
    import tracemalloc

    rng = random.Random(1)
    cache = PrefixCache()
    tracemalloc.start()
    try:
        for _ in range(200):
            cache.send([rng.randrange(1000, 10**6) for _ in range(1000)])  # made and dropped, as sent_sequences does
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert cache.size == 200_000 and held / cache.size < 12
