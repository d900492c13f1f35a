"""Launch, watch and tear down one SGLang server process tree per configuration, leaving nothing behind."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sweep.core.environment import Environment, GpuSummary
from sweep.core.errors import LaunchError
from sweep.core.types import KNOB_NAMES, ServerConfig
from sweep.engines import get as get_dialect
from sweep.launchers import flags, keyshim, procs
from sweep.launchers.base import (
    LauncherKind,
    ServerHandle,
    ServerInfo,
    SpawnCallback,
    StopReport,
)
from sweep.launchers.launch_record import spawn_record
from sweep.launchers.placement import required_gpus
from sweep.launchers.server_log import ServerExited, check_alive, classify_failure, read_tail, redact
from sweep.profile import ServerSpec

KEPT_INFO = (*KNOB_NAMES, "max_total_num_tokens", "version", "simulated", "model_path", "unmodelled_flags",
             "cuda_visible_devices")
GPU_TOLERANCE_BYTES = 2**30
GPU_RELEASE_WAIT_S = 30.0
READY_LINE_GRACE_S = 3.0  # /health 200 without our ready line: maybe another server owns the port

def pick_server_info(raw: ServerInfo) -> ServerInfo:
    """The knobs worth keeping from /server_info (top level, else DP rank 0); drops everything else, keys too."""
    states = raw.get("internal_states")
    first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    return {k: raw.get(k, first.get(k)) for k in KEPT_INFO if raw.get(k, first.get(k)) is not None}


@dataclass
class _Run:
    """What the launcher remembers about one started server, beyond the public handle."""

    proc: subprocess.Popen[bytes]
    pgid: int
    sid: int
    gpu_before: int | None
    tree: procs.Snapshot = field(default_factory=dict)


_LIVE: weakref.WeakSet[SGLangLauncher] = weakref.WeakSet()


@atexit.register
def _kill_on_exit() -> None:
    """If the orchestrator exits with servers still up, take their process groups down with it."""
    for launcher in list(_LIVE):
        for run in list(launcher._runs.values()):
            procs.signal_group(run.pgid, signal.SIGKILL)
            procs.kill_all(procs.from_snapshot(run.tree), timeout_s=2)


class SGLangLauncher:
    """Starts the engine's server (`python -m sglang.launch_server` for SGLang, spec.engine's dialect) or the
    simulated server in its own session."""

    kind: LauncherKind = "sglang"  # "sim" for an instance that launches the simulated server

    def __init__(self, spec: ServerSpec, log_dir: Path, python: str = sys.executable,
                 module: str | None = None, extra_env: dict[str, str] | None = None,
                 gpu_ids: list[int] | None = None, validate: bool = True, drain_s: float = 30.0,
                 command_prefix: list[str] | None = None, simulated: bool = False,
                 ports: tuple[int, int] | None = None):
        self.spec = spec
        self.log_dir = Path(log_dir)
        self.python = python
        self.dialect = get_dialect(spec.engine)
        self.module = module or self.dialect.launch_module
        self.extra_env = dict(extra_env or {})
        self.gpu_ids = gpu_ids
        self.validate = validate
        self.drain_s = drain_s
        self.command_prefix = list(command_prefix) if command_prefix else None
        self.simulated = simulated
        self.kind = "sim" if simulated else "sglang"
        self.ports = ports  # [low, high): several workers on one host never pick the same server port
        self._runs: dict[int, _Run] = {}
        self._env_cache: Environment | None = None
        _LIVE.add(self)

    # ---------------------------------------------------------------- start

    def _base_command(self) -> list[str]:
        return list(self.command_prefix) if self.command_prefix else keyshim.command(self.python, self.module)

    def _version(self) -> str:
        if self.simulated:
            return "sim"
        return "unknown" if self.command_prefix else flags.installed_version(self.python, self.dialect.version_package,
                                                                     env=self._env())

    def launch_args(self, config: ServerConfig, port: int) -> list[str]:
        """The server arguments (after the module or prefix) for one configuration; the key is not one of them."""
        return self.dialect.server_argv(self.spec.model_path, config, self.spec.extra_args,
                                        listen=(self.spec.host, port))

    def _log_path(self, config: ServerConfig) -> Path:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1000):  # two launches of one config in one second (the port retry) must not share a log
            p = self.log_dir / f"{stamp}-{config.key()}{f'-{n}' if n else ''}.log"
            if not p.exists():
                return p
        raise LaunchError(f"cannot pick a log file name in {self.log_dir}", reason="crash")

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PYTHONUNBUFFERED"] = "1"  # log lines must reach the file as they happen (ready line, errors)
        if self.gpu_ids is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in self.gpu_ids)
        return env

    def start(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        """Launch one configuration and wait until it is ready; raise LaunchError(reason=...) otherwise.

        on_spawn(record) runs right after each spawn, before the (possibly minutes long) wait for readiness:
        an orchestrator killed during that wait leaves a record its resume can kill the server by."""
        need = required_gpus(self.spec.extra_args, config.tp_size)
        if self.gpu_ids is not None and need > len(self.gpu_ids):
            raise LaunchError(f"skipped: the server needs {need} GPUs (tp x dp) and this "
                              f"worker's group has {len(self.gpu_ids)} (CUDA_VISIBLE_DEVICES="
                              f"{','.join(map(str, self.gpu_ids))})", reason="too_few_gpus")
        if self.validate:
            probe = [*self.launch_args(config, 1), self.dialect.api_key_flag, "x"]
            flags.validate_flags(probe, flags.help_text(self._base_command(), env=self._env()), self._version(),
                                 self.dialect.name)
        try:
            return self._start_once(config, on_spawn)
        except LaunchError as exc:
            if exc.reason != "port_in_use":
                raise
            return self._start_once(config, on_spawn)  # the free port was taken between our probe and its bind

    def _start_once(self, config: ServerConfig, on_spawn: SpawnCallback | None = None) -> ServerHandle:
        try:
            port = procs.free_port(self.spec.host, self.ports)
        except OSError as exc:
            raise LaunchError(str(exc), reason="port_in_use") from None
        api_key = secrets.token_hex(24)  # hex: a urlsafe token can start with "-" and argparse takes it for a flag
        argv = self._base_command() + self.launch_args(config, port)  # the key travels in the environment
        log_path = self._log_path(config)
        gpu_before = procs.gpu_used_bytes(self.gpu_ids)
        with open(log_path, "wb") as log:
            t0 = time.monotonic()
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**self._env(), **keyshim.child_env(api_key)}, start_new_session=True)
            except OSError as exc:
                raise LaunchError(f"cannot execute {argv[0]}: {exc} | log: {log_path}", reason="crash",
                                  log_path=str(log_path)) from None
        run = _Run(proc=proc, pgid=proc.pid, sid=proc.pid, gpu_before=gpu_before,
                   tree=procs.snapshot_tree(proc.pid))
        self._runs[proc.pid] = run
        handle = ServerHandle(config=config, url=f"http://{self.spec.host}:{port}",
                              argv=keyshim.shown(argv), pid=proc.pid, pgid=proc.pid,
                              log_path=str(log_path), api_key=api_key, simulated=self.simulated,
                              process=proc, dialect=self.dialect)
        try:
            if on_spawn is not None:
                on_spawn(spawn_record(proc, str(log_path), api_key, port, self._env().get("CUDA_VISIBLE_DEVICES")))
            self._wait_ready(handle, run, t0)
            if keyshim.refuses_without_key(handle.url or "") is False:
                raise LaunchError(f"the server answers requests without its API key: a server.command wrapper "
                                  f"must start it with python3 -c \"${keyshim.SHIM_ENV}\" MODULE \"$@\" "
                                  f"| log: {log_path}", reason="bad_flag", log_path=str(log_path))
            handle.startup_s = time.monotonic() - t0
            run.tree.update(procs.snapshot_tree(proc.pid))
            handle.server_info = self._server_info(handle)
            if self.gpu_ids is not None:  # what the server was given (SGLang's /server_info does not say)
                handle.server_info.setdefault("cuda_visible_devices", self._env()["CUDA_VISIBLE_DEVICES"])
            handle.version = str(handle.server_info.get("version") or self._version())
            return handle
        except BaseException:
            # On any failure (also Ctrl-C) while starting: leave no process behind.
            self._teardown(handle, run, drain_s=min(self.drain_s, 5.0))
            self._redact_log(handle)
            raise

    def _wait_ready(self, handle: ServerHandle, run: _Run, t0: float) -> None:
        deadline = t0 + self.spec.startup_timeout_s
        health_ok_at: float | None = None
        ready_line = False
        interval = 0.1
        # Short timeouts: a starting sglang answers 503 at once, and a socket that accepts but never
        # answers (someone else's listener on our port) must not stall the exit check.
        with httpx.Client(headers=handle.headers(), timeout=httpx.Timeout(3.0, connect=1.0)) as client:
            while True:
                run.tree.update(procs.snapshot_tree(run.proc.pid))
                if run.proc.poll() is not None:
                    raise self._failure(handle, "exited before ready")
                ready_line = ready_line or self.dialect.ready_line in read_tail(handle.log_path)
                if self._health_ok(client, handle):
                    now = time.monotonic()
                    health_ok_at = health_ok_at or now
                    # Our own ready line confirms /health answered from our process, not a stray server.
                    if ready_line or now - health_ok_at >= READY_LINE_GRACE_S:
                        return
                    interval = 0.1
                now = time.monotonic()
                if now >= deadline:  # the caller's cleanup takes the group down
                    if run.proc.poll() is not None:
                        raise self._failure(handle, "exited before ready")
                    raise self._failure(handle, f"not ready after {self.spec.startup_timeout_s:g} s",
                                        reason="timeout")
                time.sleep(min(interval, max(0.0, deadline - now)))
                interval = min(interval * 1.5, 1.0)

    @staticmethod
    def _health_ok(client: httpx.Client, handle: ServerHandle) -> bool:
        try:
            return client.get(f"{handle.url}{handle.dialect.paths.health}").status_code == 200
        except httpx.HTTPError:
            return False

    def _failure(self, handle: ServerHandle, what: str, reason: str | None = None) -> LaunchError:
        """One-line LaunchError with the classified reason, last relevant log line and log path."""
        proc = handle.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
        rc = proc.returncode if proc is not None else None
        found, line = classify_failure(keyshim.scrub(redact(read_tail(handle.log_path), handle.api_key)), rc)
        if found == "crash" and procs.disk_full(Path(handle.log_path or self.log_dir).parent):
            found, line = "disk_full", f"no space left on the disk of {self.log_dir} (the log may be cut): {line}"
        reason = reason or found
        return LaunchError(f"server {what} ({reason}, exit {rc}): {line[:300]} | log: {handle.log_path}",
                           reason=reason, log_path=handle.log_path)

    def _server_info(self, handle: ServerHandle) -> ServerInfo:
        """The resolved knobs from /server_info; {} if it cannot be read (the launch itself succeeded)."""
        raw: ServerInfo = {}
        for _ in range(2):  # one retry on a fresh connection: idle keep-alives get dropped
            try:
                with httpx.Client(headers=handle.headers(), timeout=30.0) as client:
                    r = client.get(f"{handle.url}{handle.dialect.paths.server_info}")
                    r.raise_for_status()
                    body = r.json()
                raw = body if isinstance(body, dict) else {}
                break
            except (httpx.HTTPError, ValueError):
                continue
        return pick_server_info(raw)

    # ---------------------------------------------------------------- watch

    def alive(self, handle: ServerHandle) -> bool:
        """True while the server process runs; also refreshes the descendant snapshot."""
        run = self._runs.get(handle.pid or -1)
        if run is None or run.proc.poll() is not None:
            return False
        run.tree.update(procs.snapshot_tree(run.proc.pid))
        return True

    def exit_detail(self, handle: ServerHandle) -> str | None:
        """Exit status, classified reason and last log lines of a server that exited; None while it runs."""
        proc = handle.process
        if proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        try:
            check_alive(handle)
        except ServerExited as exc:
            return str(exc)
        return None

    # ---------------------------------------------------------------- stop

    def stop(self, handle: ServerHandle) -> StopReport:
        """SIGTERM the server, wait drain_s, SIGKILL the group; then kill leftovers and check GPU memory came back."""
        run = self._runs.get(handle.pid or -1)
        if run is None:
            return StopReport(graceful=True, seconds=0.0)
        t0 = time.monotonic()
        graceful, killed = self._teardown(handle, run, drain_s=self.drain_s)
        released = self._gpu_released(run)
        self._redact_log(handle)
        return StopReport(graceful=graceful, seconds=time.monotonic() - t0, killed_leftovers=killed,
                          gpu_mem_released=released, exit_code=run.proc.returncode)

    def _teardown(self, handle: ServerHandle, run: _Run, drain_s: float) -> tuple[bool, list[int]]:
        """Stop the main process (gracefully if it can) and kill every leftover; (graceful, killed pids)."""
        proc = run.proc
        if proc.poll() is None:
            run.tree.update(procs.snapshot_tree(proc.pid))  # last look before children re-parent
        graceful = True
        if proc.poll() is None:
            # SIGTERM to the launcher process only: SGLang drains, then stops its scheduler and detokenizer
            # itself. Signalling the whole group made the detokenizer die first and SGLang take its crash
            # path (SIGQUIT, "one child failed"), as seen on the H200.
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=drain_s)
            except subprocess.TimeoutExpired:
                graceful = False
                procs.signal_group(run.pgid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        # A clean exit still kills its own tree (sglang's sigterm_watchdog); give that a moment to finish.
        procs.wait_gone(procs.leftovers(run.sid, run.pgid, run.tree), timeout_s=2.0)
        killed = procs.kill_all(procs.leftovers(run.sid, run.pgid, run.tree))
        procs.signal_group(run.pgid, signal.SIGKILL)  # belt and braces: anything that joined the group since
        self._runs.pop(proc.pid, None)
        return graceful, killed

    def _gpu_released(self, run: _Run) -> bool | None:
        """Wait (bounded) until GPU memory in use is back within 1 GiB of the pre-launch reading."""
        if run.gpu_before is None:
            return None
        deadline = time.monotonic() + GPU_RELEASE_WAIT_S
        while True:
            used = procs.gpu_used_bytes(self.gpu_ids)
            if used is None:
                return None
            if used <= run.gpu_before + GPU_TOLERANCE_BYTES:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)

    @staticmethod
    def _redact_log(handle: ServerHandle) -> None:
        """sglang prints server_args (api_key included) into its log; scrub the key once the server is gone."""
        if not handle.log_path or not handle.api_key:
            return
        with contextlib.suppress(OSError):
            p = Path(handle.log_path)
            data = p.read_bytes()
            key = handle.api_key.encode()
            if key in data:
                p.write_bytes(data.replace(key, b"***"))

    # ---------------------------------------------------------------- facts

    def environment(self) -> Environment:
        """The engine's, torch's and CUDA's versions in the target python, GPUs, host, model path and engine."""
        if self._env_cache is None:
            launch = " ".join(keyshim.readable(self._base_command()))
            packages = (self.dialect.version_package, *self.dialect.companion_packages)
            gpus = procs.gpu_inventory()
            self._env_cache = {
                "kind": self.kind, "engine": self.dialect.name, "simulated": self.simulated,
                "host": socket.gethostname(), "model_path": self.spec.model_path, "launch": launch,
                "orchestrator_python": sys.version.split()[0],
                "versions": {} if self.command_prefix else _target_versions(self.python, self._env(), packages),
                "gpus": [GpuSummary(name=g["name"], memory_total_mib=g["memory_total_mib"]) for g in gpus],
                "driver_version": gpus[0]["driver"] if gpus else None}
        return self._env_cache.copy()


_VERSIONS_SNIPPET = """
import json, sys, importlib.metadata as m
out = {"python": sys.version.split()[0]}
for pkg in sys.argv[1:]:
    try: out[pkg] = m.version(pkg)
    except Exception: out[pkg] = None
try:
    import torch
    out["cuda"] = torch.version.cuda
except Exception:
    out["cuda"] = None
print(json.dumps(out))
"""


def _target_versions(python: str, env: dict[str, str], packages: tuple[str, ...]) -> dict[str, str | None]:
    """Package versions as seen by the python that runs the server, "python" and "cuda" too (absent ones: None)."""
    try:
        r = subprocess.run([python, "-c", _VERSIONS_SNIPPET, *packages], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=env)
        found = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return {str(k): None if v is None else str(v) for k, v in found.items()} if isinstance(found, dict) else {}
