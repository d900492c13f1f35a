"""Mooncake hash blocks: each hash id of a trace stands for one block of `block_tokens` token ids, a pure function
of (id, block size), so equal ids are equal blocks. BlockTokens is a prompt made of such blocks, kept as its ids
and its length (memory proportional to the trace file, not to its tokens) and made into token ids only when read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import overload

import numpy as np

from sweep.workload.tokens import ID_HIGH, ID_LOW

_BLOCK_SEED = 0x6D6F6F6E  # the stream of mooncake block tokens ("moon")
_IDS = tuple(range(ID_HIGH + 1))  # one int object per id: a block holds references, not 512 new ints


@lru_cache(maxsize=4096)
def hash_block(hash_id: int, block_tokens: int) -> tuple[int, ...]:
    """The tokens of one mooncake hash block: a pure function of (hash id, block size), ids in ID_LOW..ID_HIGH."""
    rng = np.random.default_rng([_BLOCK_SEED, hash_id, block_tokens])
    return tuple(_IDS[i] for i in rng.integers(ID_LOW, ID_HIGH + 1, size=block_tokens).tolist())


class BlockTokens(Sequence[int]):
    """The first `length` tokens of the blocks of `hash_ids` (block_tokens each); a slice is a tuple of ids."""

    __slots__ = ("block_tokens", "hash_ids", "length")

    def __init__(self, hash_ids: tuple[int, ...], block_tokens: int, length: int):
        self.hash_ids = hash_ids[: -(-length // block_tokens)]
        self.block_tokens = block_tokens
        self.length = length

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.length)
            if step != 1:
                return tuple(self)[index]
            return self._span(start, max(start, stop))
        k = index + self.length if index < 0 else index
        if not 0 <= k < self.length:
            raise IndexError("BlockTokens index out of range")
        return hash_block(self.hash_ids[k // self.block_tokens], self.block_tokens)[k % self.block_tokens]

    def _span(self, start: int, stop: int) -> tuple[int, ...]:
        b = self.block_tokens
        out: list[int] = []
        for j in range(start // b, -(-stop // b)):
            block = hash_block(self.hash_ids[j], b)
            out.extend(block[max(start - j * b, 0): min(stop - j * b, b)])
        return tuple(out)

    def __iter__(self) -> Iterator[int]:
        left = self.length
        for h in self.hash_ids:
            block = hash_block(h, self.block_tokens)
            yield from block[:left]
            left -= len(block)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BlockTokens | tuple | list):
            return len(other) == self.length and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:  # equal to a tuple of the same ids, so hashed as one (made, not kept)
        return hash(tuple(self))

    def __add__(self, other: Sequence[int]) -> tuple[int, ...]:
        return tuple(self) + tuple(other)

    def __radd__(self, other: Sequence[int]) -> tuple[int, ...]:
        return tuple(other) + tuple(self)

    def __repr__(self) -> str:
        return f"BlockTokens({len(self.hash_ids)} blocks of {self.block_tokens}, {self.length} tokens)"
