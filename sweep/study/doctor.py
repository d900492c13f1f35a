"""Pre-flight checks before an overnight sweep: GPUs, sglang, flags, leftovers, port, database."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sweep import engines
from sweep.core.errors import LaunchError, UsageError
from sweep.engines import Dialect
from sweep.engines.flag_table import FlagTable, parse_help
from sweep.launchers import flags, procs
from sweep.profile import Profile
from sweep.profile.flags import values_of


@dataclass(frozen=True)
class Check:
    """One doctor finding: ok True/False, or None where it is informational only."""

    name: str
    ok: bool | None
    detail: str


def _gpus() -> Check:
    gpus = procs.gpu_inventory()
    if not gpus:
        return Check("gpu", None, "no GPU visible (NVML unavailable); only the simulated server can run")
    parts = [f"#{g['index']} {g['name']} {g['memory_free_mib']}/{g['memory_total_mib']} MiB free" for g in gpus]
    return Check("gpu", True, f"driver {gpus[0]['driver']}: " + "; ".join(parts))


def _engine_package(python: str, needed: bool, dialect: Dialect) -> tuple[Check, bool]:
    """Whether the engine's package (e.g. sglang) is importable in the target python, and its version."""
    pkg = dialect.version_package
    code = f"import {pkg.replace('-', '_')}, importlib.metadata as m; print(m.version({pkg!r}))"
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(dialect.name, False if needed else None, f"cannot run {python}: {exc}"), False
    if r.returncode == 0:
        return Check(dialect.name, True, f"{pkg} {r.stdout.strip()} importable in {python}"), True
    last = (r.stderr.strip().splitlines() or ["import failed"])[-1]
    return Check(dialect.name, False if needed else None, f"not importable in {python}: {last}"), False


def profile_flags(profile: Profile) -> list[str]:
    """The flags a sweep of this profile will pass: extra_args plus one per knob the search moves."""
    dialect = engines.get(profile.server.engine)
    return [*profile.server.extra_args, *(dialect.flag(name) for name, value in profile.search.space if value is not None)]


def _flags(profile: Profile, python: str, module: str, dialect: Dialect) -> Check:
    wanted = profile_flags(profile)
    if not wanted:
        return Check("flags", True, "no extra flags or knobs to check")
    try:
        text = flags.help_text([python, "-m", module])
        version = flags.installed_version(python, dialect.version_package)
        flags.validate_flags(wanted, text, version, dialect.name)
    except LaunchError as exc:
        return Check("flags", False, str(exc))
    problem = searched_values_problem(profile, parse_help(text, dialect.name, version))
    if problem:
        return Check("flags", False, problem)
    told = (f"; the profile names {dialect.name} {profile.server.engine_version}, installed {version}"
            if version != profile.server.engine_version else "")
    return Check("flags", True, f"{len(engines.flags_in_argv(wanted))} flags exist in {module} --help, the searched "
                                f"flags' values too{told}")


def searched_values_problem(profile: Profile, table: FlagTable) -> str | None:
    """The first searched flag value the installed server's own flag table refuses (a choice it lacks), or None."""
    for name, dim in profile.search.space.flag_dims().items():
        spec = table.flags.get(name)
        if spec is None:
            return f"search.space.{name}: {name} is not a flag of {table.engine} {table.version}"
        for value in values_of(dim) or []:
            try:
                spec.coerce(value)
            except ValueError as exc:
                return f"search.space.{name}: {exc} (installed {table.engine} {table.version})"
    return None


def _leftovers(prefix: str) -> Check:
    if not prefix:
        return Check("leftovers", None, "skipped: the engine's processes carry no name of their own")
    found = procs.find_by_name_prefix(prefix)
    if not found:
        return Check("leftovers", True, f"no {prefix} processes running")
    pids = ", ".join(f"{pid} ({cmd[:40]})" for pid, cmd in found[:10])
    return Check("leftovers", False, f"{len(found)} {prefix} processes hold resources (not killed): {pids}")


def _port(host: str) -> Check:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    except OSError as exc:
        return Check("port", False, f"cannot bind a port on {host}: {exc}")
    return Check("port", True, f"bound {host}:{port}")


def _database(db_url: str) -> Check:
    if db_url.startswith("sqlite"):
        path = db_url.split(":///", 1)[1] if ":///" in db_url else ""
        if path in ("", ":memory:"):
            return Check("database", True, "in-memory sqlite")
        folder = Path(path).expanduser().resolve().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # the store creates missing folders; the nearest existing one must be writable
        try:
            # os.access lies on some mounts (root, ACLs); actually creating a file does not.
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".sweep-doctor-"):
                pass
        except OSError as exc:
            return Check("database", False, f"{folder} is not writable: {exc}")
        return Check("database", True, f"{folder} writable")
    try:
        from sqlalchemy import create_engine, text

        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as exc:  # driver missing, auth, network: all mean "cannot store results"
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Check("database", False, f"cannot connect: {msg}")
    return Check("database", True, "connected")


def _model(profile: Profile) -> Check:
    if profile.server.launcher == "attach":
        return Check("model", None, "attach: the server's own model is used")
    from sweep.ladder.wiring import (
        model_path,  # the launcher's own resolution: repo-relative paths work from any cwd
    )

    path = Path(model_path(profile))
    if (path / "config.json").is_file():
        return Check("model", True, f"{path} has config.json")
    return Check("model", False, f"{path}/config.json not found")


def run_doctor(profile: Profile, db_url: str, python: str = sys.executable,
               module: str | None = None) -> list[Check]:
    """Run every pre-flight check; none of them starts a server or kills anything. `module` defaults to the
    profile's engine's launch module."""
    dialect = engines.get(profile.server.engine)
    needed = profile.server.launcher == "sglang"  # the launcher that starts the engine's real server
    checks = [_gpus()]
    sg_check, importable = _engine_package(python, needed, dialect)
    checks.append(sg_check)
    if importable:
        checks.append(_flags(profile, python, module or dialect.launch_module, dialect))
    else:
        n = len(profile.search.space.flag_dims())
        stored = (f"; search.space's {n} other flag(s) were checked against the stored {dialect.name} "
                  f"{profile.server.engine_version} flag table when the profile was read" if n else "")
        checks.append(Check("flags", None, f"skipped: {dialect.version_package} not importable{stored}"))
    checks += [_model(profile), _leftovers(dialect.process_prefix), _port(profile.server.host), _database(db_url)]
    if checks[-1].ok:
        checks.append(workers_check(db_url))
    return checks


def require_engine(profile: Profile, kind: str, python: str = sys.executable) -> None:
    """Before the first launch: the engine's package (sglang) imports in the python that starts the servers, as
    `sweep doctor` checks it; else one UsageError line (not a crash per configuration, each quoting the launch).
    A `server.command` wrapper starts its own python: there is nothing to check here."""
    if kind != "sglang" or profile.server.command is not None:
        return
    dialect = engines.get(profile.server.engine)
    check, importable = _engine_package(python, True, dialect)
    if not importable:
        raise UsageError(f"launcher sglang: {dialect.version_package} {check.detail}; install it (the gpu extra: "
                         "pip install -e '.[gpu]'), set server.command, or use --launcher sim")


def workers_check(db_url: str) -> Check:
    """The running workers of each running study run this sweep's code and the study's workload fingerprint."""
    from sqlalchemy import create_engine, inspect, text

    from sweep.study.liveness import sweep_version

    mine = sweep_version()
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            if "sweep_workers" not in inspect(conn).get_table_names():
                return Check("workers", None, "no study workers recorded in this database yet")
            rows = conn.execute(text(
                "SELECT s.name, s.fingerprint, w.label, w.host, w.sweep_version, w.fingerprint FROM sweep_workers w "
                "JOIN sweep_studies s ON s.id = w.study_id WHERE w.status = 'running' AND s.status = 'running'"
            )).fetchall()
    except Exception as exc:  # noqa: BLE001 - an unreadable table is a finding, not a crash
        return Check("workers", False, f"cannot read the workers table: {str(exc).splitlines()[0]}")
    finally:
        engine.dispose()
    if not rows:
        return Check("workers", None, f"no running workers; this sweep is {mine}")
    bad = [f"{label}@{host} of {study} runs sweep {version}" for study, _, label, host, version, _ in rows
           if version != mine]
    bad += [f"{label}@{host} of {study} measures workload {fp} (study: {want})"
            for study, want, label, host, _, fp in rows if fp != want]
    if bad:
        return Check("workers", False, f"this sweep is {mine}; " + "; ".join(bad))
    return Check("workers", True, f"{len(rows)} running worker(s), all on sweep {mine} and their study's workload")


def render_checks(checks: list[Check], title: str = "sweep doctor") -> Table:
    """A rich table: one row per check with a pass/fail/info mark."""
    table = Table(title=title)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    marks = {True: "[green]ok[/green]", False: "[red]FAIL[/red]", None: "[yellow]info[/yellow]"}
    for c in checks:
        table.add_row(c.name, marks[c.ok], c.detail)
    return table


def doctor_ok(checks: list[Check]) -> bool:
    """True when no check failed (informational ones do not count)."""
    return all(c.ok is not False for c in checks)



def render(checks: list[Check], console: Console) -> None:
    """Print the checks as a rich table on the given console."""
    console.print(render_checks(checks))
