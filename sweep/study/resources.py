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


CGROUP = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
_UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a number near 2^63


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _inactive_file(stat: Path) -> int:
    """Page cache the kernel reclaims before it kills anyone (memory.stat's inactive_file), 0 when unknown."""
    try:
        for line in stat.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ("inactive_file", "total_inactive_file") and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def cgroup_available(root: Path = CGROUP, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """Memory this process's cgroup (a container's memory.max, or v1's memory.limit_in_bytes) still allows: its
    limit less its usage (reclaimable page cache not counted); None when no limit is set or none can be read."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    places: list[tuple[Path, str, str]] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if controllers == "":  # cgroup v2: the folder itself, else the namespace's root (a container's view)
            places += [(root / rel, "memory.max", "memory.current"), (root, "memory.max", "memory.current")]
        elif "memory" in controllers.split(","):
            places += [(root / "memory" / rel, "memory.limit_in_bytes", "memory.usage_in_bytes"),
                       (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes")]
    for folder, limit_file, usage_file in places:
        limit = _read_int(folder / limit_file)
        if limit is None or limit >= _UNLIMITED:
            continue
        used = (_read_int(folder / usage_file) or 0) - _inactive_file(folder / "memory.stat")
        return max(limit - max(used, 0), 0)
    return None


def memory_available(root: Path = CGROUP, self_cgroup: Path = SELF_CGROUP) -> tuple[int, str]:
    """The memory a study's client can use now and where the figure comes from: the host's available memory, or
    the container's limit less its usage where that is smaller."""
    host = int(psutil.virtual_memory().available)
    box = cgroup_available(root, self_cgroup)
    if box is not None and box < host:
        return box, " (the container's memory limit less its usage)"
    return host, ""


def refuse_oversized(fp: Footprint, db_url: str, available: int | None = None, free: int | None = None,
                     cgroup: Path = CGROUP, self_cgroup: Path = SELF_CGROUP) -> None:
    """UsageError (one line, exit 2) when the study's client memory exceeds the memory available (the host's, or
    the container's cgroup limit where smaller), or its database growth the free disk where a SQLite file lives;
    `available` / `free` stand in for the machine's (tests)."""
    avail, where = memory_available(cgroup, self_cgroup) if available is None else (available, "")
    if fp.memory_bytes > avail:
        raise UsageError(f"this study's client may need {gib(fp.memory_bytes)} of memory (window {fp.peak_window}: "
                         f"up to {fp.peak_requests:,} requests) and {gib(avail)} is available{where}: shorten the "
                         f"window or the soak, lower the rate or the ladder, or pass {OVERRIDE}")
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
