"""The study's request stream: made on demand, never replayed on one server unless the profile asks.

Request number i of a study is a pure function of (workload profile, i) (sweep.workload.requests.make_block), so
the stream needs no pool: a driver asks a view for its k-th request and the view answers request start + k.

Where each ladder starts, and why: every configuration's ladder starts at position 0 and each step continues
where the previous step of that ladder stopped (the highest position it used + 1, warm-up included). So
  - no request is sent twice to one server instance (steps of one ladder share the server: a repeat would be
    a prefix-cache hit the workload does not contain, and the hit rate would climb up the ladder);
  - every configuration is offered the same requests in the same order from its first step, which is the
    fair comparison: a later step's start depends on how many requests the earlier steps completed, but the
    requests themselves are the same stream. Sending the same requests to two configurations is no hidden
    cache effect, because each configuration runs on its own freshly launched server.
A coupled ladder (one relaunch per step) continues the stream across its relaunches like any ladder.

workload.replay (off by default) restores the old pool: the first workload.num_requests requests, cycled.
A dataset is finite: without replay each entry is sent at most once per ladder; a dataset smaller than the
least one ladder sends is refused at load, and a ladder that needs more than the file holds stops that
configuration (StreamExhausted, its reason naming workload.replay), never the study; with replay the entries cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from sweep.core.errors import StreamExhausted
from sweep.core.types import RequestRecord, RequestSpec
from sweep.profile import Workload
from sweep.workload.lexicon import SIM, Lexicon
from sweep.workload.media import POOL_SIZE
from sweep.workload.overlong import InputFacts, in_file_order, input_facts
from sweep.workload.requests import BLOCK, WorkloadParts, make_block, warm_media_pool
from sweep.workload.sessions import SessionStream
from sweep.workload.stream_view import StreamView

__all__ = ["KEEP_BLOCKS", "RequestStream", "Requests", "SessionStream", "StreamExhausted", "StreamView",
           "next_position", "open_stream", "spec_at", "stream_facts", "view_from"]

KEEP_BLOCKS = 64  # blocks a view keeps: a closed loop's users draw positions close together


class RequestStream(StreamView):
    """A view of the study's request stream from position `start`: view.at(k) is request start + k.

    Picklable (spawned client processes get it with the requests already made for them by prefetch).
    """

    WARMUP_TAKES_POSITIONS = True

    def __init__(self, w: Workload, base_dir: Path | None = None, *, lexicon: Lexicon = SIM,
                 pool_size: int = POOL_SIZE, start: int = 0, parts: WorkloadParts | None = None,
                 context_len: int | None = None):
        super().__init__(w, base_dir, lexicon=lexicon, pool_size=pool_size, start=start, parts=parts,
                         context_len=context_len)
        self._made: dict[int, RequestSpec] = {}  # prefetched requests by position
        self._blocks: dict[int, list[RequestSpec]] = {}  # recently made blocks by block number

    def __getstate__(self) -> dict[str, object]:
        """Pickled for spawned clients with the prefetched requests, without the block cache (made again there)."""
        return {**self.__dict__, "_blocks": {}}

    @property
    def capacity(self) -> int | None:
        """Positions one ladder may use: None (unlimited) for a generated or replayed stream, else the entries."""
        if self.workload.replay or self.parts.items is None:
            return None
        return len(self.parts.items)

    def send_times(self) -> np.ndarray | None:
        """The recorded send offsets (seconds) of the view's requests from its first on, counted from that first
        one: a trace replay sends each entry at its own time. None unless the entries are sent in file order with
        their send times (a timestamped dataset, not replayed)."""
        items = self.parts.items
        if items is None or self.workload.replay or self.workload.dataset is None \
                or not in_file_order(list(items), self.workload.dataset) or self.start >= len(items):
            return None
        t = np.fromiter((it.send_at or 0.0 for it in items[self.start:]), dtype=float)
        offsets: np.ndarray = t - t[0]
        return offsets

    def content_of(self, position: int) -> int:
        """Which request of the workload fills a stream position (differs from it only under replay)."""
        if self.workload.replay:
            pool = len(self.parts.items) if self.parts.items is not None else self.workload.num_requests
            return position % pool
        return position

    def at(self, k: int) -> RequestSpec:
        """The view's k-th request; StreamExhausted past the end of a dataset that may not be replayed."""
        pos = self.start + k
        spec = self._made.get(pos)
        if spec is None:
            cap = self.capacity
            if cap is not None and pos >= cap:
                assert self.workload.dataset is not None
                raise StreamExhausted(
                    f"{self.workload.dataset.path}: the dataset holds {cap} entries and this server's ladder "
                    "needed more; set workload.replay: true to send entries again, or shorten the window or "
                    "the ladder")
            spec = self._content(self.content_of(pos))
            if spec.index != pos:  # a replayed request: its content again, at a new position
                spec = replace(spec, index=pos)
        return spec

    def first_request(self, k: int) -> RequestSpec:
        return self.at(k)

    def _content(self, c: int) -> RequestSpec:
        """Request c of the workload, from the block it is made in (the last few blocks are kept)."""
        b = c // BLOCK
        block = self._blocks.get(b)
        if block is None:
            if len(self._blocks) >= KEEP_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))
            block = self._blocks[b] = make_block(self.workload, self.parts, b, lexicon=self.lexicon,
                                                 pool_size=self.pool_size)
        return block[c - b * BLOCK]

    def prefetch(self, n: int) -> None:
        """Make the view's first n requests now (before a window), so a driver's loop does not make them.

        The whole media pool of every modality the mix sends is encoded too (tens of ms per image): a request
        beyond the prefetched ones then costs only its text, never an encode inside the window.
        """
        warm_media_pool(self.workload, self.pool_size)
        cap = self.capacity
        last = self.start + n if cap is None else min(self.start + n, cap)
        for pos in range(self.start, last):
            if pos not in self._made:
                self._made[pos] = self.at(pos - self.start)


Requests = Sequence[RequestSpec] | StreamView
Stream = StreamView


def open_stream(w: Workload, base_dir: Path | None = None, *, lexicon: Lexicon = SIM,
                context_len: int | None = None) -> Stream:
    """The study's stream: sessions when the workload has workload.sessions, else single requests (a dataset's
    entries fitted to the server's `context_len` where it is known: sweep.workload.overlong)."""
    if w.sessions is not None:
        return SessionStream(w, base_dir, lexicon=lexicon)
    return RequestStream(w, base_dir, lexicon=lexicon, context_len=context_len)


def stream_facts(stream: Stream) -> InputFacts:
    """The stream's dataset facts the study stores (sweep.workload.overlong.input_facts); {} without a dataset."""
    w = stream.workload
    return input_facts(stream.parts.items, stream.parts.fitted, w.dataset) if w.dataset is not None else {}


def spec_at(specs: Requests, k: int) -> RequestSpec:
    """A window's k-th request: from a stream view, or cycling a plain list (tests and benches pass lists); of a
    session stream, the first message of session k."""
    if isinstance(specs, StreamView):
        return specs.first_request(k)
    return specs[k % len(specs)]


def view_from(specs: Requests, position: int) -> Requests:
    """The stream from `position` on; a plain list is always used from its start (it cycles)."""
    return specs.starting_at(position) if isinstance(specs, StreamView) else specs


def next_position(records: Sequence[RequestRecord], position: int) -> int:
    """Where the next step starts: past the highest stream position this window used (index = position)."""
    return max((r.index + 1 for r in records), default=position)

