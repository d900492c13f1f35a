"""The verbs that read a study: `sweep runs`, `show`, `report`, `compare` and `serve` (the live page)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from sweep.cli.app import DEFAULT_DB, app, console, db_url, emit_rows, since_arg
from sweep.core.errors import SweepError, UsageError
from sweep.core.types import KNOB_NAMES

if TYPE_CHECKING:
    from sweep.report.document import CompareSide  # the report imports matplotlib: only for `sweep compare`
    from sweep.store import Store

@app.command()
def serve(db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
          study: str | None = typer.Option(None, help="the study to watch (default: the newest in the database)"),
          host: str = typer.Option("127.0.0.1", help="address to bind (another than 127.0.0.1 exposes the page)"),
          port: int = typer.Option(8765, help="port (0: any free port)")) -> None:
    """Serve the live page of a study: progress, ladder curves against the SLA, winner, failures, ETA."""
    from sweep.ui.live import serve as serve_page

    serve_page(db_url(db), study, host, port, say=lambda line: console.print(line, highlight=False))


@app.command()
def runs(db: str = typer.Option(DEFAULT_DB), study: str | None = None, profile: str | None = None,
         since: str | None = typer.Option(None, help="ISO date or e.g. 7d, 12h"), status: str | None = None,
         fmt: str = typer.Option("table", "--format", help="table | json | csv"),
         limit: int | None = typer.Option(None)) -> None:
    """List past runs (one row per measured ladder step)."""
    from sweep.store import Store
    from sweep.views.workers import with_worker_labels, worker_labels

    store = Store(db_url(db), readonly=True)
    rows = store.list_runs(study=study, profile=profile, since=since_arg(since), status=status, limit=limit)
    labels = {k: v for sid in {r.run.study_id for r in rows if r.run.study_id is not None}
              for k, v in worker_labels(store.workers(sid)).items()}
    columns = with_worker_labels(rows, labels)  # which worker measured each step, as progress lines name it
    cols = ["run_id", "study_name", "profile_name", "simulated", "driver", *KNOB_NAMES, "phase", "concurrency",
            "status", "output_tps", "goodput_tps", "ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "cache_hit_rate",
            "retractions", "passes_sla", "started_at", "worker", "worker_id", "host", "gpu_index"]
    emit_rows(columns, cols, fmt)


@app.command()
def show(ref: str = typer.Argument(..., metavar="RUN_ID|STUDY", help="a run id, or a study name"),
         db: str = typer.Option(DEFAULT_DB), fmt: str = typer.Option("table", "--format", help="table | json")) -> None:
    """Show one run (its configuration, window and every stat) or one study (its status and its stored winner)."""
    from sweep.store import Store

    store = Store(db_url(db), readonly=True)
    if not ref.isdigit():
        from sweep.cli.winners import show_study

        show_study(store, ref, db, fmt)
        return
    row = store.get_run(int(ref))
    if row is None:
        raise SweepError(f"no run {ref} in {db}")
    fields = row.columns()
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit("show", {"run": fields})
        return
    t = Table(title=f"run {ref}" + (" [SIMULATED]" if row.run.simulated else ""))
    t.add_column("field")
    t.add_column("value")
    for k, v in fields.items():
        t.add_row(k, "" if v is None else str(v))
    Console().print(t)


@app.command()
def report(study: str, db: str = typer.Option(DEFAULT_DB), out: Path = typer.Option(Path("reports")),
           rank_mixed_hardware: bool = typer.Option(False, help="rank configurations measured on different GPU "
                                                    "models together (their knees are not comparable)"),
           tier: list[Path] = typer.Option([], "--tier", help="YAML file of an SLA tier (name + sla bounds, or a list "
                                           "of them) judged on the stored windows, never measured again")) -> None:
    """Rewrite the report of a stored study."""
    from sweep.cli.explain import load_tiers
    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.answer import build_answer
    from sweep.views.context import study_context

    extra = [t for p in tier for t in load_tiers(p)]
    store = Store(db_url(db), readonly=True)
    s = store.get_study_by_name(study)
    if s is None:
        raise SweepError(f"no study named {study} in {db}")
    ctx = study_context(store, s.id, rank_mixed_hardware)
    files = write_report(ctx, out / study, build_answer(store, ctx, extra))
    console.print(f"report {files.markdown}")


@app.command()
def compare(a: str = typer.Argument(..., help="run id or study name"),
            b: str = typer.Argument(..., help="run id or study name"),
            db: str = typer.Option(DEFAULT_DB), force: bool = typer.Option(False, help="compare across workloads"),
            out: Path | None = typer.Option(None, help="also write the comparison as markdown here"),
            fmt: str = typer.Option("table", "--format", help="table (markdown) | json")) -> None:
    """Two runs or two studies side by side; refuses when their workload fingerprints differ (unless --force)."""
    from sweep.report.document import compare_markdown
    from sweep.store import Store

    store = Store(db_url(db), readonly=True)
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
    if fmt == "json":
        from sweep.cli.jsonout import emit
        from sweep.cli.winners import compare_payload

        emit("compare", compare_payload(store, (left, right), left.fingerprint != right.fingerprint, text))
        return
    typer.echo(text)


def _side(store: Store, ref: str) -> CompareSide:
    """A comparison side from a run id or a study name."""
    from sweep.report.document import CompareSide
    from sweep.views.context import study_context

    if ref.isdigit():
        run = store.get_run(int(ref))
        if run is None:
            raise SweepError(f"no run {ref}")
        return CompareSide(f"run {ref}", run.run.fingerprint, run=run)
    s = store.get_study_by_name(ref)
    if s is None:
        raise SweepError(f"no run or study named {ref}")
    return CompareSide(ref, s.fingerprint, ctx=study_context(store, s.id))
