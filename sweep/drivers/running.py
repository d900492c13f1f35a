"""The requests an HTTP window's client workers have in flight, as the supervising loop's early-stop test reads them
(issue 29: the HTTP driver's early stop counts running requests, as the virtual driver's does).

Each in-flight request holds one slot of its worker's shard: its scheduled time, its first token's time once it came
(NaN before), its max_new_tokens and whether it is warm-up. A shard's slots are written only by the process that
runs it (the driver's own, or its spawned client process: the cells are then a shared array); the supervisor reads
them all at every check (`records`). Each slot carries a sequence number, odd while its writer changes it (a
seqlock): a reader that sees it odd, or changed between the start and the end of its read, leaves that slot out.
A slot left out is a request the test does not see, which is the conservative side (sweep.analysis.early_stop:
leaving a running request out only lowers its e-value). While a worker reads a chunk of a request still waiting for
its first token, it holds the slot (`hold`, odd) and releases it with the token's time if the chunk carried it, so
no reader sees the request without a first token that has already been timed. A request ends (its slot is freed) before its record is
handed to the test as ended, so a test that reads the ended counts first and the slots second counts no request
twice (EarlyStop.check reads them in that order). The cells are doubles: one store or load of an aligned 8-byte
value is whole on the machines sweep runs on, and CPython's stores reach the shared array in program order.

A shard holds at most its users (closed loop) or its in-flight cap, and never more than MAX_SLOTS: a request that
finds no free slot is not tracked (left out, as above).
"""

from __future__ import annotations

import math
from multiprocessing.context import BaseContext
from typing import Protocol

from sweep.core.types import RequestRecord

__all__ = ["MAX_SLOTS", "RunningBoard"]

MAX_SLOTS = 4096  # slots per shard at most
_SEQ, _SCHED, _FIRST, _MAX_NEW, _WARM = range(5)
_FIELDS = 5


class _Cells(Protocol):
    def __getitem__(self, i: int) -> float: ...
    def __setitem__(self, i: int, v: float) -> None: ...
    def __len__(self) -> int: ...


class RunningBoard:
    """The in-flight requests of a window's shards: `start` / `first_token` / `end` by the shard's worker, `records`
    by the supervisor."""

    def __init__(self, cells: _Cells, n_shards: int, slots: int):
        self._c = cells
        self.n_shards, self.slots = n_shards, slots
        self._free: dict[int, list[int]] = {}  # this process's free slots of the shards it writes (made on first use)

    @classmethod
    def local(cls, n_shards: int, slots: int) -> RunningBoard:
        """A board for workers in the supervisor's own process."""
        slots = max(1, min(slots, MAX_SLOTS))
        return cls(_blank(n_shards * slots), n_shards, slots)

    @classmethod
    def shared(cls, ctx: BaseContext, n_shards: int, slots: int) -> RunningBoard:
        """A board in shared memory, for workers in spawned processes (pickled to them with the coordinator)."""
        slots = max(1, min(slots, MAX_SLOTS))
        return cls(ctx.RawArray("d", _blank(n_shards * slots)), n_shards, slots)

    def start(self, shard: int, rec: RequestRecord) -> int | None:
        """`rec` is in flight: its slot (None: every slot of the shard is taken, it is not tracked)."""
        free = self._free.setdefault(shard, list(range(self.slots - 1, -1, -1)))
        if not free:
            return None
        slot = free.pop()
        b = self._base(shard, slot)
        c = self._c
        c[b + _SEQ] += 1.0
        c[b + _FIRST] = math.nan
        c[b + _MAX_NEW] = float(rec.sent_output_tokens)
        c[b + _WARM] = 1.0 if rec.warmup else 0.0
        c[b + _SCHED] = rec.scheduled_at
        c[b + _SEQ] += 1.0
        return slot

    def hold(self, shard: int, slot: int) -> None:
        """The worker is about to read a response chunk of the request in `slot` that may carry its first token:
        until `release`, readers leave the slot out (they cannot see the request without its first token while the
        token's arrival, already timed, is being parsed)."""
        self._c[self._base(shard, slot) + _SEQ] += 1.0

    def release(self, shard: int, slot: int, first_token_at: float | None) -> None:
        """The chunk was read: the request's first token's time when it came (None: not yet)."""
        b = self._base(shard, slot)
        if first_token_at is not None:
            self._c[b + _FIRST] = first_token_at
        self._c[b + _SEQ] += 1.0

    def end(self, shard: int, slot: int) -> None:
        """The request in `slot` ended (before its record is handed on as ended)."""
        b = self._base(shard, slot)
        self._c[b + _SEQ] += 1.0
        self._c[b + _SCHED] = math.nan
        self._c[b + _SEQ] += 1.0
        self._free.setdefault(shard, []).append(slot)

    def records(self) -> list[RequestRecord]:
        """The requests in flight now, as records with what is known of them (scheduled time, first token,
        max_new_tokens, warm-up); a slot being written while read is left out."""
        c = self._c
        out = []
        for b in range(0, self.n_shards * self.slots * _FIELDS, _FIELDS):
            seq = c[b + _SEQ]
            sched = c[b + _SCHED]
            if math.isnan(sched) or int(seq) % 2:
                continue
            first, max_new, warm = c[b + _FIRST], c[b + _MAX_NEW], c[b + _WARM]
            if c[b + _SEQ] != seq:
                continue
            out.append(RequestRecord(index=-1, concurrency=0, scheduled_at=sched, sent_at=sched,
                                     first_token_at=None if math.isnan(first) else first,
                                     sent_output_tokens=int(max_new), warmup=warm != 0.0))
        return out

    def _base(self, shard: int, slot: int) -> int:
        return (shard * self.slots + slot) * _FIELDS


def _blank(n_slots: int) -> list[float]:
    """Cells of `n_slots` free slots: sequence 0, no request."""
    return [math.nan if i % _FIELDS == _SCHED else 0.0 for i in range(n_slots * _FIELDS)]
