"""A spawned server's LaunchRecord, and scrubbing a killed launch's API key from its log by the record's digest."""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import time
from pathlib import Path

import psutil

from sweep.launchers.base import LaunchRecord


def spawn_record(proc: subprocess.Popen[bytes], log_path: str | None, api_key: str | None = None,
                 port: int | None = None, gpus: str | None = None) -> LaunchRecord:
    """The LaunchRecord of a process just started in its own session (its pid is its pgid and sid)."""
    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.Error:
        created = time.time()  # already gone: any later process with this pid has a later start time
    return LaunchRecord(pid=proc.pid, pgid=proc.pid, sid=proc.pid, create_time=created,
                        host=LaunchRecord.this_host(), log_path=log_path, port=port, cuda_visible_devices=gpus,
                        credential_digest=_digest(api_key) if api_key else None)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


_KEY_SHAPE = re.compile(rb"\b[0-9a-f]{48}\b")  # secrets.token_hex(24), the launcher's API keys


def scrub_log(path: str | None, credential_digest: str | None) -> bool:
    """Replace, in a server log, every token whose sha256 is the launch's credential digest by ***; for the
    log of a launch whose orchestrator was killed before it could scrub it. True if something was replaced."""
    if not path or not credential_digest:
        return False
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    keys = {m for m in set(_KEY_SHAPE.findall(data)) if _digest(m.decode()) == credential_digest}
    if not keys:
        return False
    for key in keys:
        data = data.replace(key, b"***")
    with contextlib.suppress(OSError):
        Path(path).write_bytes(data)
    return True
