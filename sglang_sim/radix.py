"""Radix prefix cache over token-id pages with reference counts and LRU eviction of unreferenced leaves."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence


class Node:
    """One page of page_size tokens; the path from the root spells a prefix."""

    __slots__ = ("parent", "key", "children", "lock", "last", "alive")

    def __init__(self, parent: Node | None, key: tuple[int, ...], now: float):
        self.parent = parent
        self.key = key
        self.children: dict[tuple[int, ...], Node] = {}
        self.lock = 0
        self.last = now
        self.alive = True


class RadixCache:
    """Token counts are kept in aggregate so the engine reads sizes in O(1)."""

    def __init__(self, page_size: int = 16, disabled: bool = False):
        self.page = page_size
        self.disabled = disabled
        self.root = Node(None, (), 0.0)
        self.root.lock = 1  # the root is never evicted
        self.total_tokens = 0  # tokens held by tree nodes
        self.evictable_tokens = 0  # tokens in nodes no running request references
        self._heap: list[tuple[float, int, Node]] = []
        self._seq = itertools.count()

    def pages(self, ids: Sequence[int], limit: int | None = None) -> list[tuple[int, ...]]:
        """Full pages of ids (a partial last page is never cached)."""
        n = len(ids) if limit is None else min(limit, len(ids))
        p = self.page
        t = tuple(ids)
        return [t[i:i + p] for i in range(0, n - n % p, p)]

    def match(self, pages: list[tuple[int, ...]], now: float) -> list[Node]:
        """Longest cached path for these pages; touches it for LRU."""
        if self.disabled:
            return []
        path: list[Node] = []
        node = self.root
        for key in pages:
            child = node.children.get(key)
            if child is None:
                break
            child.last = now
            path.append(child)
            node = child
        return path

    def match_len(self, pages: list[tuple[int, ...]]) -> int:
        """Matched tokens without touching LRU state (used to sort the queue under lpm)."""
        if self.disabled:
            return 0
        node, n = self.root, 0
        for key in pages:
            node = node.children.get(key)  # type: ignore[assignment]
            if node is None:
                break
            n += 1
        return n * self.page

    def lock(self, path: list[Node]) -> None:
        for node in path:
            if node.lock == 0:
                self.evictable_tokens -= self.page
            node.lock += 1

    def unlock(self, path: list[Node], now: float) -> None:
        for node in reversed(path):
            node.lock -= 1
            node.last = now
            if node.lock == 0:
                self.evictable_tokens += self.page
                if not node.children:
                    self._push(node)

    def insert(self, path: list[Node], pages: list[tuple[int, ...]], now: float) -> tuple[list[Node], int]:
        """Extend a locked path with pages; returns (new locked path, pages newly created)."""
        if self.disabled:
            return path, 0
        node = path[-1] if path else self.root
        path = list(path)
        created = 0
        for key in pages[len(path):]:
            child = node.children.get(key)
            if child is None:
                child = Node(node, key, now)
                node.children[key] = child
                self.total_tokens += self.page
                created += 1
            elif child.lock == 0:
                self.evictable_tokens -= self.page
            child.lock += 1
            child.last = now
            path.append(child)
            node = child
        return path, created

    def _push(self, node: Node) -> None:
        heapq.heappush(self._heap, (node.last, next(self._seq), node))

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` from least-recently-used unreferenced leaves; returns tokens freed."""
        freed = 0
        heap = self._heap
        while freed < tokens and heap:
            last, _, node = heapq.heappop(heap)
            if not node.alive or node.lock > 0 or node.children:
                continue
            if last != node.last:
                self._push(node)  # touched since queued: re-queue at its real age
                continue
            parent = node.parent
            assert parent is not None
            del parent.children[node.key]
            node.alive = False
            self.total_tokens -= self.page
            self.evictable_tokens -= self.page
            freed += self.page
            if parent is not self.root and parent.lock == 0 and not parent.children:
                self._push(parent)
        return freed

    def reset(self) -> bool:
        """flush_cache: drop everything; refused while any node is referenced."""
        if self.total_tokens != self.evictable_tokens:
            return False
        self.root = Node(None, (), 0.0)
        self.root.lock = 1
        self.total_tokens = self.evictable_tokens = 0
        self._heap = []
        return True
