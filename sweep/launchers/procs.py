"""Process-tree and GPU-memory helpers: find a server's leftovers by session/group/ancestry, never by name."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

import psutil

# pid -> create_time: a pid alone may be reused by an unrelated process once the original dies.
Snapshot = dict[int, float]


def is_live(proc: psutil.Process) -> bool:
    """Running and not a zombie (psutil counts zombies as running; they hold no memory or GPU)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def snapshot_tree(pid: int) -> Snapshot:
    """The process and all its current descendants, keyed by pid with their start times."""
    snap: Snapshot = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return snap
    for p in procs:
        with contextlib.suppress(psutil.Error):
            snap[p.pid] = p.create_time()
    return snap


def from_snapshot(snap: Snapshot) -> list[psutil.Process]:
    """Processes of a snapshot that are still the same process (same start time) and still live."""
    out: list[psutil.Process] = []
    for pid, created in snap.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01 and is_live(p):
                out.append(p)
        except psutil.Error:
            continue
    return out


def session_or_group_members(sid: int, pgid: int) -> list[psutil.Process]:
    """Live processes whose session id or process group id equals the given ones (ourselves excluded)."""
    me = os.getpid()
    out: list[psutil.Process] = []
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            if (os.getsid(p.pid) == sid or os.getpgid(p.pid) == pgid) and is_live(p):
                out.append(p)
        except (OSError, psutil.Error):
            continue  # exited meanwhile, or not ours to inspect
    return out


def leftovers(sid: int, pgid: int, snap: Snapshot) -> list[psutil.Process]:
    """Everything that belonged to a server: its session/group, recorded descendants, and their children."""
    found: dict[int, psutil.Process] = {p.pid: p for p in session_or_group_members(sid, pgid)}
    for p in from_snapshot(snap):
        found.setdefault(p.pid, p)
    # Re-parented children of leftovers (e.g. an orphan's own workers) are leftovers too.
    for p in list(found.values()):
        with contextlib.suppress(psutil.Error):
            for c in p.children(recursive=True):
                if is_live(c):
                    found.setdefault(c.pid, c)
    found.pop(os.getpid(), None)
    return list(found.values())


def signal_group(pgid: int, sig: int) -> bool:
    """Send a signal to a process group; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def kill_all(procs: Iterable[psutil.Process], timeout_s: float = 10.0) -> list[int]:
    """SIGKILL each process (by pid, verified identity) and wait for them; return the pids signalled."""
    killed: list[psutil.Process] = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(signal.SIGKILL)  # psutil refuses if the pid was reused since `p` was made
            killed.append(p)
    wait_gone(killed, timeout_s)
    return sorted(p.pid for p in killed)


def wait_gone(procs: Iterable[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until none of procs is live (zombies count as gone); return those still live at the deadline."""
    pending = list(procs)
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [p for p in pending if is_live(p)]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(0.05)


def find_by_name_prefix(prefix: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of processes whose name or argv[0] starts with prefix; for reporting, never killing."""
    out: list[tuple[int, str]] = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        info: dict[str, Any] = p.info
        cmd = " ".join(info.get("cmdline") or [])
        if (info.get("name") or "").startswith(prefix) or cmd.startswith(prefix):
            out.append((int(info["pid"]), cmd or info.get("name") or ""))
    return out


DISK_FULL_BYTES = 1 << 20  # less free space than this where a server logs: its crash is the disk's, not its own


def disk_full(folder: Path) -> bool:
    """True when folder's filesystem has (almost) no space left; False when it cannot be told."""
    try:
        return shutil.disk_usage(folder).free < DISK_FULL_BYTES
    except OSError:
        return False


def free_port(host: str = "127.0.0.1", within: tuple[int, int] | None = None) -> int:
    """A port the OS reports free right now (it can still be taken before the server binds it).

    within: [low, high), the range a study worker owns on its host; the first free port in it.
    The probe binds as the server will (SO_REUSEADDR, as uvicorn does): a port whose only users are TIME_WAIT
    connections of a stopped or crashed server is free to it, and was wrongly skipped for 60 s without it.
    """
    for port in range(*within) if within else [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError(f"no free port in [{within[0]}, {within[1]}) on {host}" if within else f"no free port on {host}")


def _nvml() -> ModuleType | None:
    """pynvml, initialised, or None where there is no driver or no GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        return pynvml
    except Exception:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded...
        return None


def gpu_count() -> int:
    """Number of NVIDIA GPUs visible through NVML (0 without a driver)."""
    nv = _nvml()
    if nv is None:
        return 0
    try:
        return int(nv.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001 - any NVML failure means no usable GPU here
        return 0


class GpuRow(TypedDict):
    """One visible GPU as NVML reports it."""

    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    memory_free_mib: int
    driver: str


def gpu_inventory() -> list[GpuRow]:
    """Name, total/used/free MiB and driver of each visible GPU; empty without NVML."""
    nv = _nvml()
    if nv is None:
        return []
    out: list[GpuRow] = []
    try:
        driver = nv.nvmlSystemGetDriverVersion()
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            name = nv.nvmlDeviceGetName(h)
            out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name),
                        "memory_total_mib": mem.total // 2**20, "memory_used_mib": mem.used // 2**20,
                        "memory_free_mib": mem.free // 2**20,
                        "driver": driver.decode() if isinstance(driver, bytes) else str(driver)})
    except Exception:
        return out
    return out


def gpu_used_bytes(gpu_ids: list[int] | None) -> int | None:
    """Memory in use summed over the given GPU indices (all if None); None without NVML."""
    nv = _nvml()
    if nv is None:
        return None
    try:
        ids = gpu_ids if gpu_ids is not None else list(range(nv.nvmlDeviceGetCount()))
        return int(sum(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).used for i in ids))
    except Exception:
        return None
