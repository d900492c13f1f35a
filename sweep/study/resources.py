"""Refusing a study the machine cannot hold: the footprint of its profile (sweep.views.footprint) against the memory
available now and the free space where its SQLite database lives, before the study is created."""

from __future__ import annotations

from pathlib import Path

import psutil

from sweep.core.errors import UsageError
from sweep.views.footprint import Footprint, gib

OVERRIDE = "--ignore-resources"


def sqlite_folder(db_url: str) -> Path | None:
    """The folder of a SQLite database URL's file (None for another database or an in-memory one)."""
    if not db_url.startswith("sqlite:///"):
        return None
    path = db_url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path).expanduser().resolve().parent if path and path != ":memory:" else None


def refuse_oversized(fp: Footprint, db_url: str, available: int | None = None, free: int | None = None) -> None:
    """UsageError (one line, exit 2) when the study's client memory exceeds the memory available, or its database
    growth the free disk where a SQLite file lives; `available` / `free` stand in for the machine's (tests)."""
    avail = psutil.virtual_memory().available if available is None else available
    if fp.memory_bytes > avail:
        raise UsageError(f"this study's client may need {gib(fp.memory_bytes)} of memory (window {fp.peak_window}: "
                         f"up to {fp.peak_requests:,} requests) and {gib(avail)} is available: shorten the window "
                         f"or the soak, lower the rate or the ladder, or pass {OVERRIDE}")
    folder = sqlite_folder(db_url)
    if folder is None:
        return
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    room = psutil.disk_usage(str(folder)).free if free is None else free
    if fp.disk_bytes > room:
        raise UsageError(f"this study's database may grow by {gib(fp.disk_bytes)} over {fp.windows} windows and "
                         f"{folder} has {gib(room)} free: shorten the windows, measure fewer configurations, "
                         f"or pass {OVERRIDE}")
