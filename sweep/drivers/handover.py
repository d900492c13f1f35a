"""A streamed HTTP window's ended requests on their way to the sink (issue 23 §2), off the event loop.

The client workers (sweep.drivers.worker) send the requests that ended in bounded batches while the window runs:
in the driver's own process they are put here directly, from a spawned client process they come over its pipe
(`receive`). One thread of this process takes them in order and hands each to the sink (sweep.ladder.recorder: it
folds the record's chunks and stores requests in batches) once the window's start is known, so neither a client
process nor this one holds a whole window of per-token chunks, and the sink's folding and database writes never run
on an event loop that reads the streams' chunks.

The records themselves are kept (folded by the sink, a few numbers each) for the window's result. A sink that fails
(Fenced: the attempt lost its lease) stops the window's dispatch; the error is raised when the window ends.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

from sweep.core.types import RecordSink, RequestRecord

__all__ = ["BATCH", "BATCH_S", "RECORDS", "Emit", "Handover", "Outbox", "Sender", "receive"]

BATCH = 200  # a worker sends its ended requests on once this many have ended...
BATCH_S = 1.0  # ...or this many seconds after its last batch, whichever comes first
RECORDS = "records"  # the tag of a client process's batch message: (RECORDS, list[RequestRecord])
Emit = Callable[[list[RequestRecord]], None]  # where a worker's batches of ended requests go
_DONE = object()
T = TypeVar("T")


class Outbox:
    """A worker's ended requests, sent on (`emit`) in batches of `batch` or every `batch_s` seconds."""

    def __init__(self, emit: Emit, batch: int, batch_s: float) -> None:
        self.emit, self.batch, self.batch_s = emit, batch, batch_s
        self.ended: list[RequestRecord] = []  # ended, not sent on yet
        self.last: float | None = None  # when the last batch went (the first request's end before any)

    def end(self, rec: RequestRecord, now: float, held: list[RequestRecord]) -> list[RequestRecord]:
        """`rec` ended; returns the records the worker still holds (`held` less a batch, when one went)."""
        if self.last is None:
            self.last = now
        self.ended.append(rec)
        if len(self.ended) < self.batch and now - self.last < self.batch_s:
            return held
        gone, batch = {id(r) for r in self.ended}, self.ended
        self.ended, self.last = [], now
        self.emit(batch)
        return [r for r in held if id(r) not in gone]  # in flight, and ended since: bounded


class Handover:
    """Takes batches of ended records from any thread; one thread hands them to `sink` in arrival order.

    window_start(): the measured window's start once known (None before: the records wait, a bounded warm-up);
    measure_s: its length; stop(): called once if the sink raises (the window then stops dispatching)."""

    def __init__(self, sink: RecordSink, window_start: Callable[[], float | None], measure_s: float,
                 stop: Callable[[], None]) -> None:
        self.sink, self.window_start, self.measure_s, self.stop = sink, window_start, measure_s, stop
        self.records: list[RequestRecord] = []  # every record taken, in arrival order (folded by the sink)
        self.batches = 0
        self.error: BaseException | None = None
        self._waiting: list[RequestRecord] = []  # taken before the window's start was known
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sweep-handover", daemon=True)
        self._thread.start()

    def put(self, batch: list[RequestRecord]) -> None:
        """Ended records (safe from any thread; never blocks)."""
        if batch:
            self._queue.put(batch)

    def close(self, window_start: float) -> list[RequestRecord]:
        """Wait for every batch put so far, hand the records still waiting over with the window's final start, and
        return every record taken; the sink's error, if it failed, is raised here."""
        self.shut()
        self._hand(window_start)
        if self.error is not None:
            raise self.error
        return self.records

    def shut(self) -> None:
        """Stop the thread once the batches put so far are taken (again: nothing more)."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                item = None
            if item is _DONE:
                return
            if isinstance(item, list):
                self.records.extend(item)
                self._waiting.extend(item)
                self.batches += 1
            if self._waiting:
                ws = self.window_start()
                if ws is not None:
                    self._hand(ws)

    def _hand(self, ws: float) -> None:
        waiting, self._waiting = self._waiting, []
        if self.error is not None:
            return
        try:
            for rec in waiting:
                self.sink(rec, ws, ws + self.measure_s)
        except BaseException as exc:  # noqa: BLE001 - raised by close(), in the driver's own thread
            self.error = exc
            self.stop()


def receive(conn: Connection, put: Emit | None, final: type[T]) -> T:
    """Read a client process's pipe until its final message, a `final` (returned); its record batches go to `put`
    (None: the window is not streamed, and a batch is a broken protocol)."""
    while True:
        msg = conn.recv()
        if not (isinstance(msg, tuple) and len(msg) == 2 and msg[0] == RECORDS):
            assert isinstance(msg, final), msg
            return msg
        if put is None:
            raise AssertionError("a client process sent records of a window that is not streamed")
        put(msg[1])


class Sender:
    """A client process's side of `receive`: batches put from the event loop go down the pipe from a thread of
    their own, so a full pipe (the parent busy) never stalls the streams' chunks."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sweep-sender", daemon=True)
        self._thread.start()

    def put(self, batch: list[RequestRecord]) -> None:
        self._queue.put(batch)

    def close(self) -> None:
        """Wait until every batch put so far is sent (the final message comes after them)."""
        self._queue.put(_DONE)
        self._thread.join()

    def _run(self) -> None:
        while (item := self._queue.get()) is not _DONE:
            try:
                self.conn.send((RECORDS, item))
            except OSError:  # the parent is gone: nothing to send to
                return
