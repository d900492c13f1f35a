"""What a server's log says when it failed: the failure class and line, the log's tail, the API key kept out."""

from __future__ import annotations

import os
import re
import signal

from sweep.core.errors import ServerDied
from sweep.launchers.base import ServerHandle

# Ordered: the first family that matches wins ("CUDA out of memory" is oom, not cuda).
_FAILURES: list[tuple[str, re.Pattern[str]]] = [
    ("bad_flag", re.compile(r"unrecognized arguments|ambiguous option|error: argument", re.I)),
    ("port_in_use", re.compile(r"address already in use|errno 98\b|errno 48\b|port \d+ is (already )?in use"
                               r"|port \d+ is not available", re.I)),
    ("disk_full", re.compile(r"no space left on device|errno 28\b|database or disk is full", re.I)),
    ("oom", re.compile(r"out of memory|out-of-memory|OutOfMemory|not enough memory|cache pool too small|\bOOM\b", re.I)),
    ("cuda", re.compile(r"CUDA error|cudaError|CUDA driver|no CUDA GPUs|CUDA initialization|NCCL error", re.I)),
]
_ERRORISH = re.compile(r"error|exception|traceback|fatal|killed", re.I)


def classify_failure(log_text: str, returncode: int | None) -> tuple[str, str]:
    """(reason, most relevant log line) for a server that exited or never became ready."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    for reason, pat in _FAILURES:
        hits = [ln for ln in lines if pat.search(ln)]
        if hits:
            return reason, hits[-1]
    if returncode == 2 and any(ln.startswith("usage:") for ln in lines):
        return "bad_flag", next((ln for ln in reversed(lines) if "error" in ln), lines[-1])
    errorish = [ln for ln in lines if _ERRORISH.search(ln)]
    if returncode is not None and returncode < 0:
        return "crash", f"killed by {signal.Signals(-returncode).name}" + (f"; {errorish[-1]}" if errorish else "")
    return "crash", (errorish or lines or ["(empty log)"])[-1]



def read_tail(path: str | None, max_bytes: int = 65536) -> str:
    """The last max_bytes of a log file, decoded leniently; "" if missing."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def redact(text: str, key: str | None) -> str:
    """The text with the API key, where there is one, replaced by ***."""
    return text.replace(key, "***") if key else text


class ServerExited(ServerDied):
    """ServerDied with the classified failure reason, exit status and log path attached."""

    def __init__(self, message: str, reason: str, returncode: int | None, log_path: str | None):
        super().__init__(message)
        self.reason = reason
        self.returncode = returncode
        self.log_path = log_path


def check_alive(handle: ServerHandle) -> None:
    """Raise ServerExited (a ServerDied) with the classified reason and last log lines if the server exited."""
    proc = handle.process
    if proc is None or proc.poll() is None:
        return
    tail = redact(read_tail(handle.log_path, 16384), handle.api_key)
    reason, line = classify_failure(tail, proc.returncode)
    last = " | ".join(ln.strip() for ln in tail.splitlines()[-3:] if ln.strip())
    raise ServerExited(f"server pid {handle.pid} exited with code {proc.returncode} ({reason}): {line} "
                       f"[last lines: {last}] log: {handle.log_path}", reason, proc.returncode, handle.log_path)
