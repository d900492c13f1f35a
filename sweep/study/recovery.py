"""What a study worker does about a dead worker's leftovers in the results store and on its own host.

The Optuna side (failing the dead worker's trial, queueing its configuration again) is sweep.study.liveness; this
module keeps the results store and the host in step: the dead worker's running rows become 'aborted' (its
configuration is redone and the aborted attempt stays visible in the report), and its server processes are
killed, by recorded pid and create time, never by name, by a worker on the host the launch record names.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable

import optuna

from sweep.core.errors import Fenced
from sweep.store import ConfigRecord, Store
from sweep.study.liveness import WORKER_ATTR, dead_on_this_host

Say = Callable[[str], None]


def _launch_host(config: ConfigRecord) -> str | None:
    """The host a configuration's server was launched on: the launch record, else the configuration's column."""
    info = json.loads(config.server_info_json or "{}").get("sweep_launch") or {}
    host = info.get("host") or config.placement.host
    return None if host is None else str(host)


def kill_leftover_servers(store: Store, study_id: int, say: Say | None = None,
                          workers: Iterable[int | None] | None = None) -> list[int]:
    """Kill server processes a SIGKILLed orchestrator left behind, from the LaunchRecord written at spawn:
    by recorded pid + create time, process group and session (never by name), on this host only. Then scrub
    the API key from those launches' logs (the killed orchestrator never got to).

    With `workers`, only servers those sweep_workers ids launched (None: launches that name no worker): a live
    worker's server is never touched. A dead worker's configuration may already be 'aborted' (another host
    noticed it through the heartbeat) while its server still runs here.
    """
    from sweep.launchers.launch_record import scrub_log

    only = None if workers is None else set(workers)
    here = socket.gethostname()
    killed: list[int] = []
    for c in store.server_configs(study_id):
        if c.status not in ("running", "pending", "aborted"):
            continue
        if only is not None and c.placement.worker_id not in only:
            continue
        info = json.loads(c.server_info_json or "{}").get("sweep_launch") or {}
        pid, created = info.get("pid"), info.get("create_time")
        if not pid or created is None:
            continue
        host = _launch_host(c)
        if host not in (None, here):
            if say is not None and c.status != "aborted":
                say(f"resume: the interrupted launch of configuration {c.id} ran on {host}, not here "
                    f"({here}): stop its server (pid {pid}) there")
            continue
        killed += _kill_launch(int(pid), float(created), int(info.get("pgid") or pid), int(info.get("sid") or pid))
        scrub_log(info.get("log_path") or c.log_path, info.get("credential_digest"))
    return sorted(killed)


def _kill_launch(pid: int, created: float, pgid: int, sid: int) -> list[int]:
    """SIGKILL a recorded launch's process, its group and its session, if that process is still the same one."""
    import psutil

    from sweep.launchers import procs

    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - created) > 0.01:
            return []  # the pid was reused by an unrelated process
    except psutil.Error:
        return []
    members = {p.pid: p for p in procs.session_or_group_members(sid, pgid)}
    members.setdefault(proc.pid, proc)
    return procs.kill_all(members.values())


def dead_workers(store: Store, study_id: int) -> list[int]:
    """Workers of this study that hold nothing any more: ended ones, and running ones whose process on this
    host is gone (marked lost here). A running worker of another host is alive until its heartbeat says not."""
    dead = []
    for w in store.workers(study_id):
        if w.id is None:
            continue  # never from the store: every stored worker has its id
        if w.status == "running":
            if not dead_on_this_host({"host": w.host, "pid": w.pid, "started": w.process_started}):
                continue
            store.set_worker_status(w.id, "lost")
        dead.append(w.id)
    return dead


def worker_ended(store: Store, study_id: int, worker_id: int) -> bool:
    """Whether a worker's sweep_workers row says it stopped (done, failed or lost): it holds no trial any more."""
    return any(w.id == worker_id and w.status != "running" for w in store.workers(study_id))


def alone(store: Store, study_id: int, me: int) -> bool:
    """Whether no other worker of the study may be alive: every other one ended, or is dead on this host."""
    return not any(w.id != me and w.status == "running" and not dead_on_this_host(
        {"host": w.host, "pid": w.pid, "started": w.process_started}) for w in store.workers(study_id))


def clean_after_dead(store: Store, study_id: int, say: Say) -> None:
    """On (re)joining a study: kill this host's servers of dead workers, abort their rows and unlaunched configs."""
    dead: list[int | None] = [*dead_workers(store, study_id), None]  # None: rows of a sweep before workers
    killed = kill_leftover_servers(store, study_id, say, dead)
    if killed:
        say(f"resume: killed leftover server process(es) {killed} of the interrupted launch")
    aborted = store.abort_running(study_id, dead)
    for c in store.server_configs(study_id):
        if c.status == "pending" and c.placement.worker_id in dead:
            store.update_server_config(c.id, status="aborted", failure_reason="orchestrator stopped before launch")
            aborted += 1
    if aborted:
        say(f"resume: marked {aborted} interrupted run(s)/launch(es) aborted; they will be redone")


def on_requeued(store: Store, study_id: int, say: Say) -> Callable[[optuna.trial.FrozenTrial], None]:
    """The hook run once per trial of a dead worker that was failed and queued again: its rows are aborted,
    its servers killed when it ran on this host."""

    def hook(trial: optuna.trial.FrozenTrial) -> None:
        worker = trial.user_attrs.get(WORKER_ATTR) or {}
        wid = worker.get("worker_id")
        here = dead_on_this_host(worker)
        if wid is not None:
            if here:
                kill_leftover_servers(store, study_id, None, [wid])
            store.abort_running(study_id, [wid])
            for c in store.server_configs(study_id):
                if c.status == "pending" and c.placement.worker_id == wid:
                    store.update_server_config(c.id, status="aborted",
                                               failure_reason="worker lost before launch")
            try:
                store.set_worker_status(int(wid), "lost")
            except Exception:  # noqa: BLE001 - the worker row is informational; the requeue already happened
                pass
        where = f"worker {worker.get('host')}:{worker.get('pid')}" if worker else "an earlier orchestrator"
        say(f"trial {trial.number} of {where} was lost; its configuration is queued again")

    return hook


def on_fenced(store: Store, worker_id: int, say: Say) -> Callable[[Fenced], None]:
    """The hook run when this worker finds its lease on a trial lapsed (it was suspended past the heartbeat grace
    and another worker re-queued the configuration): one line said, and its sweep_workers row, which the
    recovery marked lost, running again, so no other worker takes its next trial for a dead worker's."""

    def hook(fenced: Fenced) -> None:
        say(f"[yellow]{fenced}[/]; its server is stopped, this worker goes on with other work")
        store.set_worker_status(worker_id, "running")

    return hook
