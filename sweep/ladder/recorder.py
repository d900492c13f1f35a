"""A streamed window's requests: stored while the window runs, in bounded batches, and folded to a few numbers each.

A streaming driver (sweep.drivers.virtual: `streams`) hands the Recorder every request that ended, with the measured
window's [start, end). The Recorder folds the record's per-token chunks (sweep.analysis.measure.fold_chunks), writes
its ITL gaps to a scratch file (float64, 8 bytes a token on disk, not in memory), and stores the requests in batches
of `batch` records or every `every_s` seconds (Store.add_requests, fenced as every write of an attempt). Those rows
belong to the running run: they count once finish_run completes it, and an aborted, failed or set-aside run keeps
them as its own, never a completed run's (the configuration is measured again in a new run).

When the window ends, `finish(result)` gives back the result with its ITL gaps in the records' order (a file-backed
np.memmap: compute_stats' percentiles reorder it in place) and the records not stored yet, for finish_run.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from sweep.analysis.measure import fold_chunks, in_window, succeeded
from sweep.core.types import RequestRecord, WindowResult
from sweep.store import Store

BATCH = 1000  # requests per stored batch
EVERY_S = 2.0  # at most this long (wall clock) between batches while requests end


class Recorder:
    """One streamed window's sink: folds each ended request, spills its ITL gaps, stores requests in batches."""

    def __init__(self, store: Store, run_id: int, batch: int = BATCH, every_s: float = EVERY_S) -> None:
        self.store, self.run_id, self.batch, self.every_s = store, run_id, batch, every_s
        self._dir = tempfile.TemporaryDirectory(prefix="sweep-itl-")
        self._gaps = open(Path(self._dir.name) / "gaps.f64", "wb")  # noqa: SIM115 - closed by close()
        self._blocks: dict[int, tuple[int, int]] = {}  # id(record) -> (offset, count) of its gaps in the file
        self._offset = 0
        self._pending: list[RequestRecord] = []
        self._stored: set[int] = set()  # id() of the records stored (the driver's list keeps them alive)
        self._start: float | None = None
        self._last = time.monotonic()
        self.batches = 0
        self.seen = 0  # records handed over (none: the driver did not stream this window, e.g. sessions)

    def __call__(self, rec: RequestRecord, start: float, end: float) -> None:
        """A request ended: fold it, keep its gaps, store a batch when one is due."""
        self._start = start
        self.seen += 1
        gaps = fold_chunks(rec, start, end)
        if gaps and in_window(rec, start, end) and succeeded(rec):
            # a plain write, not ndarray.tofile: numpy turns an exception raised inside its file calls (a SIGINT's
            # KeyboardInterrupt landing there, seen in CI) into "expected str, bytes or os.PathLike object, not
            # BufferedWriter", a traceback instead of sweep's one-line interrupt
            self._gaps.write(np.asarray(gaps, dtype=np.float64).tobytes())
            self._blocks[id(rec)] = (self._offset, len(gaps))
            self._offset += len(gaps)
        self._pending.append(rec)
        if len(self._pending) >= self.batch or time.monotonic() - self._last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        """Store the requests that ended since the last batch (Fenced when the attempt lost its lease)."""
        if self._pending and self._start is not None:
            self.store.add_requests(self.run_id, self._pending, self._start)
            self._stored.update(id(r) for r in self._pending)
            self.batches += 1
        self._pending.clear()
        self._last = time.monotonic()

    def finish(self, result: WindowResult) -> tuple[WindowResult, list[RequestRecord]]:
        """The window's result with its ITL gaps (ordered as its measured successful records) and the records not
        stored yet, for finish_run to store with the run's completion."""
        self._gaps.close()
        if not self.seen:
            return result, [r for r in result.records if id(r) not in self._stored]
        ordered = np.memmap(Path(self._dir.name) / "itl.f64", dtype=np.float64, mode="w+",
                            shape=(max(self._offset, 1),))
        spilled = (np.memmap(Path(self._dir.name) / "gaps.f64", dtype=np.float64, mode="r", shape=(self._offset,))
                   if self._offset else None)
        n = 0
        for r in result.records:
            block = self._blocks.get(id(r))
            if block is not None and spilled is not None:
                off, count = block
                ordered[n:n + count] = spilled[off:off + count]
                n += count
        rest = [r for r in result.records if id(r) not in self._stored]
        return replace(result, itl_ms=ordered[:n]), rest

    def close_files(self) -> None:
        """Close and remove the scratch files (a memmap finish returned stays readable until dropped: POSIX keeps
        a mapped file's pages after its name is removed)."""
        self._gaps.close()
        self._dir.cleanup()
