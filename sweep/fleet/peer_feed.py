"""A `sweep worker`'s view of the other workers of its study: their windows, as they land in the database.

Each worker prints its own windows as it measures them; with workers on other hosts (or other terminals),
this feed prints theirs too, one result line each naming the worker, so any worker's terminal shows the
whole study's progress. What landed before this worker joined is history, not news, and is not printed; every
window, history included, counts in the worker's study count (on_window).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

from rich.console import Console

from sweep.fleet.gpus import FleetProgress
from sweep.store import Store


class PeerFeed:
    """A background reader of the study's database; a context manager around the worker's work."""

    def __init__(self, db_url: str, study: str, console: Console, percentiles: tuple[int, int] = (99, 99),
                 every_s: float = 2.0, on_window: Callable[[str], None] | None = None):
        self.db_url, self.study, self.console, self.percentiles, self.every_s = (db_url, study, console,
                                                                                 percentiles, every_s)
        self.on_window = on_window  # each other worker's window, history included, by phase: the study count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peer-feed", daemon=True)

    def __enter__(self) -> PeerFeed:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            with Store(self.db_url, create=False) as store:
                row = store.get_study_by_name(self.study)
                if row is None:
                    return
                feed = FleetProgress(store, row.id, [], self.console, self.percentiles,
                                     exclude=(socket.gethostname(), os.getpid()), on_window=self.on_window)
                feed.lines()  # history: counted, not printed
                while not self._stop.wait(self.every_s):
                    for line in feed.lines()[0]:
                        self.console.print("  " + line, highlight=False)
        except Exception:  # noqa: BLE001 - a courtesy view: a read that fails must never stop the measuring
            return
