"""What a resume cleans up after a kill -9: the interrupted launches' server processes and their logs' API key."""

from __future__ import annotations

import json
from typing import Any

from sweep.store import Store


def kill_leftover_servers(store: Store, study_id: int, say: Any = None) -> list[int]:
    """Kill server processes a SIGKILLed orchestrator left behind, from the LaunchRecord written at spawn:
    by recorded pid + create time, process group and session (never by name), on this host only. Then scrub
    the API key from those launches' logs (the killed orchestrator never got to)."""
    from launchers.base import LaunchRecord
    from launchers.launch_record import scrub_log

    killed: list[int] = []
    here = LaunchRecord.this_host()
    for c in store.server_configs(study_id):
        if c["status"] not in ("running", "pending"):
            continue
        info = json.loads(c.get("server_info_json") or "{}").get("sweep_launch") or {}
        if not info.get("pid") or info.get("create_time") is None:
            continue
        if info.get("host") not in (None, here):
            if say is not None:
                say(f"resume: the interrupted launch of configuration {c['id']} ran on {info['host']}, not here "
                    f"({here}): stop its server (pid {info['pid']}) there")
            continue
        killed += _kill_launch(info)
        scrub_log(info.get("log_path") or c.get("log_path"), info.get("credential_digest"))
    return sorted(killed)


def _kill_launch(info: dict[str, Any]) -> list[int]:
    """SIGKILL a recorded launch's process, its group and its session, if that process is still the same one."""
    import psutil

    from launchers import procs

    pid = int(info["pid"])
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - float(info["create_time"])) > 0.01:
            return []  # the pid was reused by an unrelated process
    except psutil.Error:
        return []
    members = {p.pid: p for p in procs.session_or_group_members(int(info.get("sid") or pid),
                                                                int(info.get("pgid") or pid))}
    members.setdefault(proc.pid, proc)
    return procs.kill_all(members.values())
