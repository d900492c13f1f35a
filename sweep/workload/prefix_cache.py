"""The hit rate a perfect prefix cache gets on a sequence of prompts: a trie of token ids, unbounded or LRU-capped.

Prompts arrive in order; each hits the longest prefix of it already in the cache (then the whole prompt is in the
cache). With a capacity, the cache holds at most that many tokens (page-free: token by token) and evicts from the
least recently used leaf first, deepest token first, as a radix cache does (a node's ancestors are used whenever
it is, so a leaf is the first of its path to go). The trie is a radix tree: an edge holds a run of tokens, so a
prompt costs a few slice comparisons, not one step per token; its runs are arrays of 8-byte ids (a window's
prediction holds every distinct prompt token it sent). The pure function behind
`sweep dataset stats`' prefix-sharing potential and the cache prediction from what a window sent.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable, Sequence


class _Node:
    """A run of cached tokens (a radix tree's edge), all last used by the same prompt: the tokens, the children
    by their first token, the parent, and the last use (the prompt's number)."""

    __slots__ = ("children", "key", "last", "parent")

    def __init__(self, key: array[int], parent: _Node | None, last: int) -> None:
        self.key = key
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.last = last


def _match(root: _Node, seq: array[int], t: int) -> tuple[_Node, int]:
    """Walk seq down the tree, marking what it uses as used by prompt t; an edge it uses only part of is split
    there (so a node's tokens always share one last use). Returns the deepest node used and the tokens matched."""
    node, k, n = root, 0, len(seq)
    while k < n:
        child = node.children.get(seq[k])
        if child is None:
            break
        key = child.key
        if seq[k:k + len(key)] == key:
            child.last = t
            node, k = child, k + len(key)
            continue
        m, lim = 1, min(len(key), n - k)
        while m < lim and key[m] == seq[k + m]:
            m += 1
        mid = _Node(key[:m], node, t)
        node.children[seq[k]] = mid
        child.key, child.parent = key[m:], mid
        mid.children[child.key[0]] = child
        return mid, k + m
    return node, k


class PrefixCache:
    """A perfect prefix cache fed prompts in send order: unbounded (capacity_tokens None) or LRU-capped at
    capacity_tokens tokens (evicted token by token from the least recently used leaf, as a radix cache does).

    send(prompt, cached) returns the tokens of prompt already cached, then caches `cached` (default: the prompt):
    a server that caches a finished request's reply too (SGLang does) is told so by cached = prompt + reply."""

    def __init__(self, capacity_tokens: int | None = None):
        if capacity_tokens is not None and capacity_tokens < 0:
            raise ValueError("capacity_tokens must be >= 0")
        self.capacity = capacity_tokens
        self.root = _Node(array("q"), None, -1)
        self.size = 0
        self._t = self._tie = 0
        self._leaves: list[tuple[int, int, _Node]] = []  # (last use, tie, node): lazily invalidated

    def send(self, prompt: Sequence[int], cached: Sequence[int] | None = None) -> int:
        """Tokens of prompt found in the cache; then `cached` (default prompt) is in it."""
        t = self._t
        self._t += 1
        seq = array("q", prompt)
        _, hit = _match(self.root, seq, t)
        if cached is not None:
            seq = array("q", cached)
        node, k = _match(self.root, seq, t)
        if k < len(seq):  # the rest joins the cache
            leaf = _Node(seq[k:], node, t)
            node.children[seq[k]] = leaf
            self.size += len(seq) - k
            node = leaf
        if self.capacity is not None and node is not self.root:
            if not node.children:
                self._tie += 1
                heapq.heappush(self._leaves, (t, self._tie, node))
            self._evict()
        return hit

    def _evict(self) -> None:
        assert self.capacity is not None
        leaves = self._leaves
        while self.size > self.capacity and leaves:
            last, tie, victim = heapq.heappop(leaves)
            if victim.children or victim.last != last or victim.parent is None:
                continue  # no longer a leaf, used since, or already evicted
            need = self.size - self.capacity
            if len(victim.key) > need:  # its deepest tokens are enough
                victim.key = victim.key[:len(victim.key) - need]
                self.size -= need
                heapq.heappush(leaves, (last, tie, victim))
                break
            parent = victim.parent
            del parent.children[victim.key[0]]
            victim.parent = None
            self.size -= len(victim.key)
            if parent is not self.root and not parent.children:
                self._tie += 1
                heapq.heappush(leaves, (parent.last, self._tie, parent))


def perfect_prefix_hits(sequences: Iterable[Sequence[int]],
                        capacity_tokens: int | None = None) -> tuple[int, int]:
    """(hit tokens, total tokens) of the prompts in order through a perfect prefix cache: unbounded when
    capacity_tokens is None, else an LRU cache of at most capacity_tokens tokens (evicted token by token from the
    least recently used leaf)."""
    cache = PrefixCache(capacity_tokens)
    hits = total = 0
    for seq in sequences:
        total += len(seq)
        hits += cache.send(seq)
    return hits, total
