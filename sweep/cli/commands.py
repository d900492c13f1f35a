"""The `sweep` command. Commands raise; `main()` alone turns an error into one line and an exit code (sweep/cli/boundary.py), never a traceback."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweep.core import interrupt
from sweep.core.errors import LaunchError, ProfileError, SweepError, UsageError
from sweep.core.types import KNOB_LABELS, KNOB_NAMES, ServerConfig
from sweep.profile import Profile, check_study_name, is_loopback, load_profile, resolve_profile_path
from sweep.ui.progress import StudyProgress, make_console

if TYPE_CHECKING:
    from sweep.report.document import CompareSide  # the report imports matplotlib: only for `sweep compare`

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Find the SLA-constrained goodput knee of an SGLang server configuration.")
console = make_console()
DEFAULT_DB = "sqlite:///results.db"


def db_url(db: str) -> str:
    """A bare path is a SQLite file; anything with :// is an SQLAlchemy URL."""
    return db if "://" in db else f"sqlite:///{db}"


def _load(profile: str, overrides: list[str]) -> Profile:
    parsed: dict[str, Any] = {}
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip("."):
            raise ProfileError(f"--set {item!r}: expected key.path=value")
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return load_profile(resolve_profile_path(profile), parsed)


@app.command()
def knee(profile: str = typer.Option(..., "--profile", "-p", help="profile name or YAML path"),
         db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
         driver: str = typer.Option("auto", help="auto | http | virtual"),
         launcher: str | None = typer.Option(None, help="override server.launcher: sglang | sim | attach"),
         study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
         resume: bool = typer.Option(False, help="continue an interrupted study of this name"),
         out: Path = typer.Option(Path("reports"), help="where reports and server logs go"),
         set_: list[str] = typer.Option([], "--set", help="override a profile field: key.path=value"),
         progress: bool = typer.Option(True, help="rich progress bars with ETA on stderr"),
         soak: bool | None = typer.Option(None, help="force the winner's soak on/off (default: the profile's)"),
         client_procs: int = typer.Option(1, "--client-procs", min=1,
                                          help="HTTP driver: shard the load over N client processes"),
         crosscheck: bool = typer.Option(False, "--crosscheck",
                                         help="after every window, measure the same step with a reference client"),
         live: bool = typer.Option(False, "--live", help="serve the live page on 127.0.0.1 while the study runs"),
         live_port: int = typer.Option(8765, "--live-port", help="the live page's port (0: any free port)"),
         gpus: str | None = typer.Option(None, help="one worker per GPU group of this host on one study, e.g. 0,1,2,3"),
         gpus_per_server: int | None = typer.Option(None, "--gpus-per-server", min=1,
                                                    help="GPUs per server with --gpus (default: tp x dp)")) -> None:
    """Search the profile's space, climb the ladder per configuration, name the knee, write the report."""
    extra = [] if soak is None else [f"soak.enabled={json.dumps(soak)}"]
    extra += ["crosscheck.enabled=true"] if crosscheck else []
    prof = _load(profile, list(set_) + extra)
    if study is not None:
        check_study_name(study)
    from sweep.study.orchestrator import (
        Orchestrator,  # heavy (optuna, matplotlib): after the cheap input checks
    )
    if not is_loopback(prof.server.host):
        console.print(f"[bold yellow]warning[/]: the server listens on {prof.server.host} "
                      "(server.allow_non_loopback_host): other hosts can reach it")
    orch = Orchestrator(prof, db_url(db), out, launcher_kind=launcher, driver=driver, console=console,
                        client_procs=client_procs)
    page = None
    if live:
        from sweep.ui.live import LiveServer

        page = LiveServer(db_url(db), study, port=live_port)
        console.print(f"live page {page.start()}")
    try:
        with interrupt.stop_like_sigint():
            if gpus is not None:
                from sweep.cli.workers import knee_on_gpus

                run = knee_on_gpus(orch, gpus, gpus_per_server, study, resume, db_url(db), out, launcher, driver,
                                   client_procs)
            else:
                with StudyProgress(prof, progress, console) as bars:
                    run = orch.knee(study_name=study, resume=resume, on_step=bars.step_done,
                                    on_step_start=bars.step_start, on_trial=bars.trial_done)
    finally:
        if page is not None:
            page.stop()
    win = run.winner
    tag = " [SIMULATED]" if run.simulated else ""
    for f in run.failures:
        console.print(f"[red]{escape(f.failure_class)}[/] {escape(f.label)}: {escape(f.reason[:400])}", highlight=False)
    if not run.measured and run.failures:
        raise LaunchError(f"every configuration failed ({len(run.failures)}), nothing was measured; "
                          f"study {run.study_name}, report {run.report.markdown}")
    if win is None:
        console.print(f"[bold red]no configuration passed the SLA{tag}[/]")
    elif run.report.missing:
        pass  # the contract line below says why no knee is named
    else:
        k = win.knee
        ci = "" if k.ci_low is None or k.ci_high is None else f", 95% CI {k.ci_low:.0f}–{k.ci_high:.0f}"
        knobs = " ".join(f"{a}={b}" for a, b in win.config.knobs().items()) or "the server's defaults"
        console.print(f"[bold green]knee{tag}[/]: {knobs} at "
                      f"concurrency {k.concurrency}, goodput {k.goodput_tps:.0f} output tok/s{ci} ({k.reason})")
    if run.report.missing:
        console.print(f"[yellow]report contract not met, no conclusion drawn: missing {', '.join(run.report.missing)}[/]")
    console.print(f"study {run.study_name} (id {run.study_id}) in {db}; report {run.report.markdown}"
                  + (f" and {run.report.html}" if run.report.html else ""))


app.command("sweep", help="Overnight alias of knee: resumes the named study after an interruption.")(knee)


@app.command()
def ladder(profile: str = typer.Option(..., "--profile", "-p"),
           config: str = typer.Option("", help="knobs, e.g. max_running_requests=64,mem_fraction_static=0.8"),
           db: str = typer.Option(DEFAULT_DB), driver: str = typer.Option("auto"),
           launcher: str | None = typer.Option(None), out: Path = typer.Option(Path("reports")),
           set_: list[str] = typer.Option([], "--set"),
           client_procs: int = typer.Option(1, "--client-procs", min=1),
           crosscheck: bool = typer.Option(False, "--crosscheck",
                                           help="after every window, measure the same step with a reference client"),
           study: str | None = typer.Option(None, help="study name (default: profile + timestamp)")) -> None:
    """Climb the ladder for one server configuration (no search, no screening, no soak)."""
    given: dict[str, str] = {}
    for part in filter(None, config.split(",")):
        key, _, raw = part.partition("=")
        if key not in KNOB_NAMES:
            raise UsageError(f"--config: unknown knob {key!r} (knobs: {', '.join(KNOB_NAMES)})")
        given[key] = raw
    try:
        knobs = ServerConfig.from_mapping(given).knobs()
    except ValueError as exc:
        raise UsageError(f"--config: {exc}") from None
    space = {k: [v] for k, v in knobs.items()}
    knee(profile=profile, db=db, driver=driver, launcher=launcher, study=study, resume=False, out=out,
         set_=list(set_) + [f"search.space={json.dumps(space)}", "search.sampler=grid",
                            "search.screening.enabled=false"],
         progress=True, soak=False, client_procs=client_procs, crosscheck=crosscheck, live=False, live_port=0,
         gpus=None, gpus_per_server=None)


@app.command("crosscheck")
def crosscheck_cmd(profile: str = typer.Option(..., "--profile", "-p"),
                   config: str = typer.Option("", help="knobs, e.g. max_running_requests=64,mem_fraction_static=0.8"),
                   db: str = typer.Option(DEFAULT_DB), driver: str = typer.Option("auto", help="auto | http"),
                   launcher: str | None = typer.Option(None), out: Path = typer.Option(Path("reports")),
                   set_: list[str] = typer.Option([], "--set"),
                   reference: str | None = typer.Option(None, help="auto | h11 | bench_serving "
                                                        "(default: the profile's crosscheck.reference)"),
                   study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
                   client_procs: int = typer.Option(1, "--client-procs", min=1)) -> None:
    """Climb one configuration's ladder; after each window an independent client measures the same step."""
    if reference is not None and reference not in ("auto", "h11", "bench_serving"):
        raise UsageError(f"--reference {reference!r}: expected auto, h11 or bench_serving")
    extra = [f"crosscheck.reference={reference}"] if reference else []
    ladder(profile=profile, config=config, db=db, driver=driver, launcher=launcher, out=out,
           set_=list(set_) + extra, client_procs=client_procs, crosscheck=True, study=study)


@app.command()
def serve(db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
          study: str | None = typer.Option(None, help="the study to watch (default: the newest in the database)"),
          host: str = typer.Option("127.0.0.1", help="address to bind (another than 127.0.0.1 exposes the page)"),
          port: int = typer.Option(8765, help="port (0: any free port)")) -> None:
    """Serve the live page of a study: progress, ladder curves against the SLA, winner, failures, ETA."""
    from sweep.ui.live import serve as serve_page

    serve_page(db_url(db), study, host, port, say=lambda line: console.print(line, highlight=False))


@app.command("profile-schema")
def profile_schema(out: Path = typer.Option(Path("docs/profile.md"), help="where the reference goes ('-': stdout)")
                   ) -> None:
    """Write the profile reference (every field, its default and meaning) from the pydantic models."""
    from sweep.profile.doc import reference

    text = reference()
    if str(out) == "-":
        typer.echo(text, nl=False)
        return
    out.write_text(text)
    console.print(f"wrote {out}")


@app.command()
def runs(db: str = typer.Option(DEFAULT_DB), study: str | None = None, profile: str | None = None,
         since: str | None = typer.Option(None, help="ISO date or e.g. 7d, 12h"), status: str | None = None,
         fmt: str = typer.Option("table", "--format", help="table | json | csv"),
         limit: int | None = typer.Option(None)) -> None:
    """List past runs (one row per measured ladder step)."""
    from sweep.store import Store
    from sweep.views.workers import with_worker_labels, worker_labels

    store = Store(db_url(db), create=False)
    rows = store.list_runs(study=study, profile=profile, since=_since(since), status=status, limit=limit)
    labels = {k: v for sid in {r["study_id"] for r in rows} for k, v in worker_labels(store.workers(sid)).items()}
    rows = with_worker_labels(rows, labels)  # which worker measured each step, as progress lines name it
    cols = ["run_id", "study_name", "profile_name", "simulated", "driver", *KNOB_NAMES, "phase", "concurrency",
            "status", "output_tps", "goodput_tps", "ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "cache_hit_rate",
            "retractions", "passes_sla", "started_at", "worker", "worker_id", "host", "gpu_index"]
    _emit(rows, cols, fmt)


@app.command()
def show(run_id: int, db: str = typer.Option(DEFAULT_DB),
         fmt: str = typer.Option("table", "--format", help="table | json")) -> None:
    """Show one run: its configuration, window and every stat."""
    from sweep.store import Store

    row = Store(db_url(db), create=False).get_run(run_id)
    if row is None:
        raise SweepError(f"no run {run_id} in {db}")
    if fmt == "json":
        typer.echo(json.dumps(row, default=str, indent=2))
        return
    t = Table(title=f"run {run_id}" + (" [SIMULATED]" if row.get("simulated") else ""))
    t.add_column("field")
    t.add_column("value")
    for k, v in row.items():
        t.add_row(k, "" if v is None else str(v))
    Console().print(t)


@app.command()
def report(study: str, db: str = typer.Option(DEFAULT_DB), out: Path = typer.Option(Path("reports")),
           rank_mixed_hardware: bool = typer.Option(False, help="rank configurations measured on different GPU "
                                                    "models together (their knees are not comparable)")) -> None:
    """Rewrite the report of a stored study."""
    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    store = Store(db_url(db), create=False)
    s = store.get_study_by_name(study)
    if s is None:
        raise SweepError(f"no study named {study} in {db}")
    files = write_report(study_context(store, s["id"], rank_mixed_hardware), out / study)
    console.print(f"report {files.markdown}")


@app.command()
def compare(a: str = typer.Argument(..., help="run id or study name"),
            b: str = typer.Argument(..., help="run id or study name"),
            db: str = typer.Option(DEFAULT_DB), force: bool = typer.Option(False, help="compare across workloads"),
            out: Path | None = typer.Option(None, help="also write the comparison as markdown here")) -> None:
    """Two runs or two studies side by side; refuses when their workload fingerprints differ (unless --force)."""
    from sweep.report.document import compare_markdown
    from sweep.store import Store

    store = Store(db_url(db), create=False)
    left, right = _side(store, a), _side(store, b)
    if left.fingerprint != right.fingerprint:
        msg = (f"{a} and {b} ran different workloads (fingerprint {left.fingerprint} vs {right.fingerprint}): "
               "their numbers are not comparable")
        if not force:
            raise UsageError(f"{msg}; pass --force to compare anyway")
        console.print(f"[bold red on yellow]WARNING: {msg}. Comparing anyway because of --force.[/]")
    text = compare_markdown(left, right, forced=left.fingerprint != right.fingerprint)
    if out is not None:
        out.write_text(text)
    typer.echo(text)


def _side(store: Any, ref: str) -> CompareSide:
    """A comparison side from a run id or a study name."""
    from sweep.report.document import CompareSide
    from sweep.views.context import study_context

    if ref.isdigit():
        run = store.get_run(int(ref))
        if run is None:
            raise SweepError(f"no run {ref}")
        return CompareSide(f"run {ref}", run["fingerprint"], run=run)
    s = store.get_study_by_name(ref)
    if s is None:
        raise SweepError(f"no run or study named {ref}")
    return CompareSide(ref, s["fingerprint"], ctx=study_context(store, s["id"]))


@app.command()
def doctor(profile: str = typer.Option("interactive", "--profile", "-p"), db: str = typer.Option(DEFAULT_DB)) -> None:
    """Check GPUs, sglang and its flags, leftover server processes, ports and the database."""
    from sweep.study.doctor import render, run_doctor

    checks = run_doctor(_load(profile, []), db_url(db))
    render(checks, Console())
    if any(c.ok is False for c in checks):
        raise typer.Exit(1)


def _since(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    units = {"d": "days", "h": "hours", "m": "minutes"}
    if raw[-1:] in units and raw[:-1].isdigit():
        return datetime.now() - timedelta(**{units[raw[-1]]: int(raw[:-1])})
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"--since {raw!r}: expected an ISO date or a span like 7d / 12h") from None


# Table headers short enough that a terminal shows them whole; json/csv keep the column names.
SHORT = {"run_id": "run", "study_name": "study", "profile_name": "profile", "simulated": "sim",
         **KNOB_LABELS, "concurrency": "conc", "output_tps": "out tok/s",
         "goodput_tps": "goodput tok/s", "ttft_p50_ms": "TTFT p50 ms", "ttft_p99_ms": "TTFT p99 ms",
         "tpot_p99_ms": "TPOT p99 ms", "cache_hit_rate": "cache hit", "retractions": "retr",
         "passes_sla": "SLA", "phase": "phase", "started_at": "started (UTC)", "worker_id": "worker id",
         "gpu_index": "GPU"}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


def _emit(rows: list[dict[str, Any]], cols: list[str], fmt: str) -> None:
    if fmt == "json":
        typer.echo(json.dumps(rows, default=str, indent=2))
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        typer.echo(buf.getvalue().rstrip("\n"))
    elif fmt == "table":
        t = Table()
        for c in cols:
            t.add_column(SHORT.get(c, c), no_wrap=True)
        for r in rows:
            t.add_row(*[_cell(r.get(c)) for c in cols])
        Console(width=250).print(t)
    else:
        raise UsageError(f"--format {fmt!r}: expected table, json or csv")


from sweep.cli.workers import register as _register_workers  # noqa: E402 - the commands need app defined

_register_workers(app)


def main(argv: list[str] | None = None) -> int:
    """Run one `sweep` command and return its exit code: errors become one line there (sweep/cli/boundary.py)."""
    from sweep.cli.boundary import run

    return run(lambda: typer.main.get_command(app).main(args=argv, prog_name="sweep", standalone_mode=True), argv)


if __name__ == "__main__":
    sys.exit(main())
