"""The `sweep` command. Errors of the SweepError family become one line and an exit code, never a traceback."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from sweep.errors import SweepError
from sweep.profile import Profile, load_profile, resolve_profile_path

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Find the SLA-constrained goodput knee of an SGLang server configuration.")
console = Console(stderr=True, width=200, soft_wrap=True)
DEFAULT_DB = "sqlite:///results.db"


def db_url(db: str) -> str:
    """A bare path is a SQLite file; anything with :// is an SQLAlchemy URL."""
    return db if "://" in db else f"sqlite:///{db}"


def _load(profile: str, overrides: list[str]) -> Profile:
    parsed: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise SweepError(f"--set {item!r}: expected key.path=value")
        key, raw = item.split("=", 1)
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return load_profile(resolve_profile_path(profile), parsed)


def _fail(exc: SweepError) -> None:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(exc.exit_code)


def _on_step(config: Any, concurrency: int, row: dict[str, Any]) -> None:
    verdict = "[green]pass[/]" if row["passes_sla"] else f"[red]fail[/] {row['sla_failures']}"
    console.print(f"  {config.label():<40} c={concurrency:<4} thr {row['output_tps'] or 0:8.0f} tok/s  "
                  f"goodput {row['goodput_tps'] or 0:8.0f}  TTFT p99 {(row['ttft_p99_ms'] or 0) / 1000:6.2f} s  "
                  f"TPOT p99 {row['tpot_p99_ms'] or 0:6.1f} ms  retr {row['retractions'] or 0:<5} {verdict}")


@app.command()
def knee(profile: str = typer.Option(..., "--profile", "-p", help="profile name or YAML path"),
         db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
         driver: str = typer.Option("auto", help="auto | http | virtual"),
         launcher: str | None = typer.Option(None, help="override server.launcher: sglang | sim | attach"),
         study: str | None = typer.Option(None, help="study name (default: profile + timestamp)"),
         resume: bool = typer.Option(False, help="continue an interrupted study of this name"),
         out: Path = typer.Option(Path("reports"), help="where reports and server logs go"),
         set_: list[str] = typer.Option([], "--set", help="override a profile field: key.path=value")) -> None:
    """Search the profile's space, climb the ladder per configuration, name the knee, write the report."""
    from sweep.app import Orchestrator

    try:
        prof = _load(profile, set_)
        orch = Orchestrator(prof, db_url(db), out, launcher_kind=launcher, driver=driver, console=console)
        run = orch.knee(study_name=study, resume=resume, on_step=_on_step)
    except SweepError as exc:
        _fail(exc)
        return
    win = run.result.winner()
    tag = " [SIMULATED]" if run.simulated else ""
    if win is None or win.knee is None or win.knee.point is None:
        console.print(f"[bold red]no configuration passed the SLA{tag}[/]")
    else:
        console.print(f"[bold green]knee{tag}[/]: {win.config.label()} at concurrency {win.knee.point.concurrency}, "
                      f"goodput {win.value:.0f} output tok/s ({win.knee.reason})")
    if run.report.missing:
        console.print(f"[yellow]report contract not met, no conclusion drawn: missing {', '.join(run.report.missing)}[/]")
    console.print(f"study {run.study_name} (id {run.study_id}) in {db}; report {run.report.markdown}")


app.command("sweep", help="Overnight alias of knee: resumes the named study after an interruption.")(knee)


@app.command()
def ladder(profile: str = typer.Option(..., "--profile", "-p"),
           config: str = typer.Option("", help="knobs, e.g. max_running_requests=64,mem_fraction_static=0.8"),
           db: str = typer.Option(DEFAULT_DB), driver: str = typer.Option("auto"),
           launcher: str | None = typer.Option(None), out: Path = typer.Option(Path("reports")),
           set_: list[str] = typer.Option([], "--set")) -> None:
    """Climb the ladder for one server configuration (no search)."""
    from sweep.search import KNOBS

    knobs: dict[str, Any] = {}
    for part in filter(None, config.split(",")):
        key, _, raw = part.partition("=")
        if key not in KNOBS:
            _fail(SweepError(f"--config: unknown knob {key!r} (knobs: {', '.join(KNOBS)})"))
        knobs[key] = raw if key == "schedule_policy" else json.loads(raw)
    space = {k: [v] for k, v in knobs.items()}
    knee(profile=profile, db=db, driver=driver, launcher=launcher, study=None, resume=False, out=out,
         set_=list(set_) + [f"search.space={json.dumps(space)}", "search.sampler=grid"])


@app.command()
def runs(db: str = typer.Option(DEFAULT_DB), study: str | None = None, profile: str | None = None,
         since: str | None = typer.Option(None, help="ISO date or e.g. 7d, 12h"), status: str | None = None,
         fmt: str = typer.Option("table", "--format", help="table | json | csv"),
         limit: int | None = typer.Option(None)) -> None:
    """List past runs (one row per measured ladder step)."""
    from sweep.store import Store

    try:
        rows = Store(db_url(db)).list_runs(study=study, profile=profile, since=_since(since), status=status,
                                           limit=limit)
    except SweepError as exc:
        _fail(exc)
        return
    cols = ["run_id", "study_name", "profile_name", "simulated", "max_running_requests", "mem_fraction_static",
            "chunked_prefill_size", "schedule_policy", "concurrency", "status", "output_tps", "goodput_tps",
            "ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "cache_hit_rate", "retractions", "passes_sla", "started_at"]
    _emit(rows, cols, fmt)


@app.command()
def show(run_id: int, db: str = typer.Option(DEFAULT_DB),
         fmt: str = typer.Option("table", "--format", help="table | json")) -> None:
    """Show one run: its configuration, window and every stat."""
    from sweep.store import Store

    row = Store(db_url(db)).get_run(run_id)
    if row is None:
        _fail(SweepError(f"no run {run_id} in {db}"))
        return
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
def report(study: str, db: str = typer.Option(DEFAULT_DB), out: Path = typer.Option(Path("reports"))) -> None:
    """Rewrite the report of a stored study."""
    from sweep.app import study_context
    from sweep.report import write_report
    from sweep.store import Store

    store = Store(db_url(db))
    s = store.get_study_by_name(study)
    if s is None:
        _fail(SweepError(f"no study named {study} in {db}"))
        return
    files = write_report(study_context(store, s["id"]), out / study)
    console.print(f"report {files.markdown}")


@app.command()
def doctor(profile: str = typer.Option("interactive", "--profile", "-p"), db: str = typer.Option(DEFAULT_DB)) -> None:
    """Check GPUs, sglang and its flags, leftover server processes, ports and the database."""
    from sweep.doctor import render, run_doctor

    try:
        checks = run_doctor(_load(profile, []), db_url(db))
    except SweepError as exc:
        _fail(exc)
        return
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
        _fail(SweepError(f"--since {raw!r}: expected an ISO date or a span like 7d / 12h"))
        return None


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
            t.add_column(c)
        for r in rows:
            t.add_row(*["" if r.get(c) is None else (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]))
                        for c in cols])
        Console(width=250).print(t)
    else:
        _fail(SweepError(f"--format {fmt!r}: expected table, json or csv"))


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
