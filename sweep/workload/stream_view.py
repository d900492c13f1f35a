"""What every view of the study's stream is, whatever it hands out: single requests (sweep.workload.stream's
RequestStream) or sessions (sweep.workload.sessions' SessionStream). A driver, the ladder's step inputs and the
cache prediction ask a view through this base; only code that runs sessions turn by turn asks which kind it is.

A view is the stream from position `start`: the workload's parts (dataset entries, prefixes, media pool) are made
once and shared by every view of one stream (`starting_at`). Picklable for spawned client processes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Self

from sweep.core.types import RequestSpec
from sweep.profile import Workload
from sweep.workload.lexicon import SIM, Lexicon
from sweep.workload.media import POOL_SIZE
from sweep.workload.requests import WorkloadParts, workload_parts


class StreamView(ABC):
    """A view of one stream from position `start` (every ladder starts at 0; each step continues where the last
    stopped: sweep.workload.stream's docstring)."""

    # Whether a step's warm-up requests take positions of the stream (single requests do; a session stream's
    # warm-up is the sessions its users start)
    WARMUP_TAKES_POSITIONS: ClassVar[bool]

    def __init__(self, w: Workload, base_dir: Path | None = None, *, lexicon: Lexicon = SIM,
                 pool_size: int = POOL_SIZE, start: int = 0, parts: WorkloadParts | None = None,
                 context_len: int | None = None):
        self.workload = w
        self.base_dir = base_dir
        self.lexicon = lexicon
        self.pool_size = pool_size
        self.start = start
        self.parts = parts if parts is not None else workload_parts(w, base_dir, lexicon, context_len)

    @property
    @abstractmethod
    def capacity(self) -> int | None:
        """Positions one ladder may use: None (unlimited), else what the dataset holds."""

    @abstractmethod
    def first_request(self, k: int) -> RequestSpec:
        """The first request the view's k-th position sends (a session's: its first message)."""

    @abstractmethod
    def prefetch(self, n: int) -> None:
        """Make the view's first n positions now (and encode the media pool), so a window does not make them."""

    def starting_at(self, position: int) -> Self:
        """A view of the same stream from `position`, sharing its parts (what this view made stays with it)."""
        return type(self)(self.workload, self.base_dir, lexicon=self.lexicon, pool_size=self.pool_size,
                          start=position, parts=self.parts)
