"""The hit rate a perfect prefix cache gets on a sequence of prompts: a trie of token ids, unbounded or LRU-capped.

Prompts arrive in order; each hits the longest prefix of it already in the cache (then the whole prompt is in the
cache). With a capacity, the cache holds at most that many tokens (page-free: one trie node is one token) and
evicts the least recently used leaf first, as a radix cache does (a node's ancestors are used whenever it is, so
a leaf is the first of its path to go; at equal last use the deeper node goes first). The pure function behind
`sweep dataset stats`' prefix-sharing potential and the cache prediction from what a window sent.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence


class _Node:
    """One cached token: its children by token id, its parent, depth and last use (the prompt's number)."""

    __slots__ = ("children", "depth", "last", "parent", "token")

    def __init__(self, parent: _Node | None, token: int, depth: int, last: int) -> None:
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.token = token
        self.depth = depth
        self.last = last


def perfect_prefix_hits(sequences: Iterable[Sequence[int]],
                        capacity_tokens: int | None = None) -> tuple[int, int]:
    """(hit tokens, total tokens) of the prompts in order through a perfect prefix cache: unbounded when
    capacity_tokens is None, else an LRU cache of at most capacity_tokens tokens."""
    if capacity_tokens is not None and capacity_tokens < 0:
        raise ValueError("capacity_tokens must be >= 0")
    root = _Node(None, -1, 0, 0)
    size = hits = total = 0
    leaves: list[tuple[int, int, int, _Node]] = []  # (last use, -depth, tie, node): lazily invalidated
    tie = 0
    for t, seq in enumerate(sequences):
        node, k, n = root, 0, len(seq)
        total += n
        while k < n:  # the cached prefix
            child = node.children.get(seq[k])
            if child is None:
                break
            child.last = t
            node, k = child, k + 1
        hits += k
        for tok in seq[k:]:  # the rest of the prompt joins the cache
            child = _Node(node, tok, node.depth + 1, t)
            node.children[tok] = child
            node = child
        size += n - k
        if capacity_tokens is None or node is root:
            continue
        if not node.children:
            tie += 1
            heapq.heappush(leaves, (t, -node.depth, tie, node))
        while size > capacity_tokens and leaves:
            last, _, _, leaf = heapq.heappop(leaves)
            if leaf.children or leaf.last != last or leaf.parent is None:
                continue  # no longer a leaf, used since, or already evicted
            parent = leaf.parent
            del parent.children[leaf.token]
            leaf.parent = None
            size -= 1
            if parent is not root and not parent.children:
                tie += 1
                heapq.heappush(leaves, (parent.last, -parent.depth, tie, parent))
    return hits, total
