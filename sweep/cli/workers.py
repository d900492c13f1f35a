"""`sweep worker` and `sweep study create`: a study as the unit of distribution over GPUs and hosts.

A study lives in one database (a PostgreSQL URL makes it shareable between hosts; SQLite serves the workers
of one host). `sweep study create` (or `sweep sweep`) stores the study and its profile; any number of
`sweep worker --study NAME --db URL` processes then take its trials from Optuna until its work is done.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sweep.cli.app import DEFAULT_DB, RowFormat, console, db_url, emit_rows, load_profile_arg
from sweep.core import interrupt
from sweep.core.errors import SweepError, UsageError
from sweep.core.types import DriverKind, LauncherKind

if TYPE_CHECKING:
    from sweep.profile import Profile  # pydantic: loaded by the commands that read a profile

study_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Create studies that workers join.")


def parse_gpus(raw: str | None) -> tuple[int, ...] | None:
    """`0,1,2` → (0, 1, 2); None stays None (the host's own CUDA_VISIBLE_DEVICES, or every GPU)."""
    if raw is None or raw == "":
        return None
    try:
        ids = tuple(int(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--gpus {raw!r}: expected GPU indices like 0,1,2") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise UsageError(f"--gpus {raw!r}: expected distinct GPU indices like 0,1,2")
    return ids


def parse_ports(raw: str | None) -> tuple[int, int] | None:
    """`30000-30100` → (30000, 30100) (high exclusive); None: any free port."""
    if raw is None or raw == "":
        return None
    lo, sep, hi = raw.partition("-")
    try:
        low, high = int(lo), int(hi)
    except ValueError:
        raise UsageError(f"--ports {raw!r}: expected a range like 30000-30100") from None
    if not sep or not 0 < low < high <= 65536:
        raise UsageError(f"--ports {raw!r}: expected a range like 30000-30100")
    return low, high


def stored_profile(db: str, study: str, overrides: list[str], folder: Path | None = None) -> Profile:
    """The profile a study was created with, plus --set overrides that leave its fingerprint alone; its relative
    dataset and trace paths found in `folder` (the profile file's), then in the working directory."""
    from sweep.store import Store

    with Store(db, create=False) as store:  # a missing database is refused as every verb refuses it, never made
        row = store.get_study_by_name(study)
    if row is None:
        raise UsageError(f"no study named {study} in {db.split('@')[-1]}: create it with `sweep study create` "
                         "or `sweep sweep`")
    data = json.loads(row.profile_json)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise UsageError(f"--set {item!r}: expected key.path=value")
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        try:
            node[leaf] = json.loads(raw)
        except json.JSONDecodeError:
            node[leaf] = raw
    from pydantic import ValidationError

    try:
        from sweep.profile import Profile

        prof = Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--set: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    if prof.fingerprint() != row.fingerprint:
        raise UsageError(f"--set changes the workload fingerprint of study {study} ({row.fingerprint} vs "
                         f"{prof.fingerprint()}): a worker must measure what the study measures")
    from sweep.profile.inputs import locate_inputs

    hint = "" if folder is not None else "; --profile-dir names the folder of the profile the study was made from"
    return locate_inputs(prof, folder.resolve() if folder is not None else None, f"study {study}", hint)


def register(app: typer.Typer) -> None:
    """Add `worker` and `study` to the sweep command."""
    from sweep.ui.progress import StampedConsole, StudyProgress

    @app.command()
    def worker(study: str = typer.Option(..., help="the study to join (see `sweep study create`)"),
               db: str = typer.Option(DEFAULT_DB, help="the study's database (PostgreSQL URL to share between hosts)"),
               driver: DriverKind = typer.Option("auto", help="what sends the requests (auto: the study's driver)"),
               launcher: LauncherKind | None = typer.Option(None, help="override server.launcher"),
               gpus: str | None = typer.Option(None, help="CUDA_VISIBLE_DEVICES of this worker's servers, e.g. 2,3"),
               ports: str | None = typer.Option(None, help="server ports this worker may use, e.g. 30100-30200"),
               label: str | None = typer.Option(None, help="this worker's name in progress lines and logs"),
               out: Path = typer.Option(Path("reports"), help="where reports and server logs go"),
               set_: list[str] = typer.Option([], "--set", help="override a profile field outside the "
                                              "workload fingerprint, e.g. search.heartbeat_s=10"),
               progress: bool = typer.Option(True, help="rich progress bars with ETA on stderr"),
               peers: bool = typer.Option(True, help="also print the windows other workers of the study store"),
               client_procs: int = typer.Option(1, "--client-procs", min=1),
               profile_dir: Path | None = typer.Option(None, "--profile-dir", help="the folder of the profile "
                                                       "the study was made from: its relative dataset and trace "
                                                       "paths are looked up there, then in the working directory")
               ) -> None:
        """Join a study and measure its configurations until it is done or this worker's budget is spent."""
        from sweep.launchers.placement import WorkerSeat
        from sweep.store import Store
        from sweep.study.orchestrator import Orchestrator

        if label is not None:
            from sweep.profile import check_study_name

            check_study_name(label, "--label")  # it names the worker's log folder under --out
        url = db_url(db)
        seat = WorkerSeat(label or "", parse_gpus(gpus), parse_ports(ports))
        prof = stored_profile(url, study, list(set_), profile_dir)
        with Store(url) as store:
            row = store.get_study_by_name(study)
        chosen = row.driver if driver == "auto" and row else driver
        orch = Orchestrator(prof, url, out, launcher_kind=launcher, driver=chosen, console=StampedConsole(console),
                            client_procs=client_procs, seat=seat)
        from sweep.fleet.peer_feed import PeerFeed

        pcts = (int(prof.sla.ttft_percentile), int(prof.sla.tpot_percentile))
        bars = StudyProgress(prof, progress, console, worker=label)
        orch.on_server = bars.server
        feed = PeerFeed(url, study, console, pcts, on_window=bars.peer_step_done) if peers else contextlib.nullcontext()
        try:
            with interrupt.stop_like_sigint(), bars, feed:
                run = orch.join(study, on_step=bars.step_done, on_step_start=bars.step_start,
                                on_trial=bars.trial_done)
        except KeyboardInterrupt as exc:
            sig = interrupt.received(exc)
            typer.echo(f"interrupted by {sig.name}: the server was stopped and its configuration queued again for "
                       "any worker of the study; start `sweep worker` again to continue", err=True)
            raise typer.Exit(interrupt.exit_code(sig)) from None
        win = run.winner
        knee = (run.no_winner or "no configuration passed the SLA") if win is None else (
            f"knee so far: {' '.join(f'{a}={b}' for a, b in win.config.knobs().items())} at concurrency "
            f"{win.knee.concurrency}, goodput {win.knee.goodput_tps:,.0f} output tok/s")
        console.print(f"worker {label or ''} done with study {study}: {knee}; report {run.report.markdown}")

    @study_app.command("create")
    def create(profile: str = typer.Option(..., "--profile", "-p", help="profile name or YAML path"),
               study: str = typer.Option(..., help="the study's name (workers join it by this name)"),
               db: str = typer.Option(DEFAULT_DB, help="results database (PostgreSQL URL to share between hosts)"),
               driver: DriverKind = typer.Option("auto", help="what its workers use by default"),
               launcher: LauncherKind | None = typer.Option(None, help="override server.launcher"),
               set_: list[str] = typer.Option([], "--set", help="override a profile field: key.path=value")) -> None:
        """Store a study (profile, fingerprint) without measuring: start workers with `sweep worker`."""
        from sweep.study.orchestrator import Orchestrator

        prof = load_profile_arg(profile, list(set_))
        from sweep.fleet.shared_study import create_study

        sid = create_study(Orchestrator(prof, db_url(db), Path("reports"), launcher_kind=launcher, driver=driver),
                           study)
        from sweep.profile.inputs import relative_inputs

        where = ["--profile-dir", str(prof.folder)] if prof.folder is not None and relative_inputs(prof) else []
        join = shlex.join(["sweep", "worker", "--study", study, "--db", _shown(db), *where])
        console.print(f"study {study} (id {sid}) created in {_shown(db)}; join it with: {join}")

    @study_app.command("workers")
    def workers(study: str = typer.Option(..., help="the study"),
                db: str = typer.Option(DEFAULT_DB, help="the study's database"),
                fmt: RowFormat = typer.Option("table", "--format")) -> None:
        """Every worker of a study: host, GPU group, status and what it measures or launches now."""
        from dataclasses import asdict

        from sweep.store import Store
        from sweep.views.workers import activity

        with Store(db_url(db), create=False) as store:
            row = store.get_study_by_name(study)
            if row is None:
                raise UsageError(f"no study named {study} in {_shown(db)}")
            rows = activity(store.workers(row.id), store.server_configs(row.id), store.study_runs(row.id))
        emit_rows([asdict(a) for a in rows], ["worker", "host", "gpus", "status", "now", "windows_done", "configs_done"],
                  fmt, command="study workers")

    app.add_typer(study_app, name="study")


def _shown(db: str) -> str:
    """A database argument as it may be printed (no password)."""
    if "://" not in db:
        return db
    from sqlalchemy import make_url

    return make_url(db).render_as_string(hide_password=True)



def knee_on_gpus(orch: Any, gpus: str, per_server: int | None, study: str | None, resume: bool, url: str,
                 out: Path, launcher: str | None, driver: str, client_procs: int) -> Any:
    """`sweep sweep --gpus ...`: the study created (or resumed) here, one worker process per GPU group."""
    from sweep.fleet import gpus as fleet
    from sweep.launchers.placement import group_size

    ids = parse_gpus(gpus)
    if ids is None:
        raise UsageError("--gpus: expected GPU indices like 0,1,2,3")
    need = per_server or group_size(orch.profile)  # the largest tp_size searched x dp: every configuration fits
    seats, left = fleet.plan(ids, need)
    if left:
        console.print(f"[yellow]GPU(s) {','.join(map(str, left))} fill no group of {need} and stay unused[/]")
    from sweep.fleet.shared_study import open_shared_study, summary

    fleet.refuse_twins(orch.store, study)  # a fleet killed where workers outlive it: never twins of them
    study_id, name = open_shared_study(orch, study, resume)
    sla = orch.profile.sla
    rc = fleet.run_fleet(seats, name, url, out, orch.driver_name, orch.kind, client_procs, console, study_id,
                         percentiles=(int(sla.ttft_percentile), int(sla.tpot_percentile)),
                         profile_dir=orch.profile.folder)
    if rc != 0:
        failed = SweepError(f"a worker of study {name} failed (exit {rc}); the study is resumable with --resume")
        failed.exit_code = rc if 0 < rc < 256 else 1  # the worker's own code (docs/automation.md's table)
        raise failed
    return summary(orch, study_id, name)
