"""The verbs that read a study: `sweep runs`, `show`, `report`, `compare` and `serve` (the live page)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer
from rich.console import Console
from rich.table import Table

from sweep.cli.app import DEFAULT_DB, RowFormat, app, cell_text, console, db_url, emit_rows, since_arg
from sweep.core.errors import NotFound, UsageError
from sweep.core.types import KNOB_NAMES, RunStatus, fixed_flags

if TYPE_CHECKING:
    from sweep.report.document import CompareSide  # the report imports matplotlib: only for `sweep compare`
    from sweep.store import Store
    from sweep.store.sqlite_reader import RunsReader

@app.command()
def serve(db: str = typer.Option(DEFAULT_DB, help="results database (path or SQLAlchemy URL)"),
          study: str | None = typer.Option(None, help="the study to watch (default: the newest in the database)"),
          host: str = typer.Option("127.0.0.1", help="address to bind (another than 127.0.0.1 exposes the page)"),
          port: int = typer.Option(8765, min=0, max=65535, help="port (0: any free port)")) -> None:
    """Serve the live page of a study: progress, ladder curves against the SLA, winner, failures, ETA."""
    from sweep.ui.live import serve as serve_page

    serve_page(db_url(db), study, host, port, say=lambda line: console.print(line, highlight=False))


# `sweep runs`' columns: a compact default that fits 80 columns, and `--wide`'s every one (json: every field).
RUNS_COMPACT = ("run_id", "config", "phase", "concurrency", "output_tps", "goodput_tps", "ttft_sla_ms", "tpot_sla_ms",
                "passes_sla")
RUNS_WIDE = ("run_id", "study_name", "profile_name", "simulated", "driver", *KNOB_NAMES, "phase", "concurrency",
             "status", "output_tps", "goodput_tps", "ttft_sla_ms", "tpot_sla_ms", "ttft_p50_ms", "ttft_p99_ms",
             "tpot_p99_ms", "cache_hit_rate", "retractions", "passes_sla", "started_at", "worker", "worker_id", "host",
             "gpu_index")
RUNS_HEADERS = {"run_id": "run", "concurrency": "c", "offered_rps": "req/s", "output_tps": "tok/s", "goodput_tps": "goodput",
                "passes_sla": "SLA"}


def _columns_arg(raw: str | None, wide: bool, valid: list[str]) -> list[str]:
    """The columns `--columns a,b` names (each one a valid name), else --wide's or the compact default."""
    if raw is None:
        return list(RUNS_WIDE if wide else RUNS_COMPACT)
    chosen = [c.strip() for c in raw.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in valid]
    if unknown or not chosen:
        raise UsageError(f"--columns: unknown column {', '.join(map(repr, unknown)) or repr(raw)} "
                         f"(columns: {', '.join(valid)})")
    return chosen


@app.command()
def runs(db: str = typer.Option(DEFAULT_DB), study: str | None = None, profile: str | None = None,
         since: str | None = typer.Option(None, help="ISO date or e.g. 7d, 12h"),
         status: RunStatus | None = typer.Option(None, help="only windows of this status"),
         fmt: RowFormat = typer.Option("table", "--format"),
         columns: str | None = typer.Option(None, "--columns", help="the columns to show, e.g. "
                                            "config,concurrency,goodput_tps (a wrong name lists them all)"),
         wide: bool = typer.Option(False, "--wide", help="every column of the table, however wide"),
         limit: int | None = typer.Option(None, min=1, help="at most this many rows (the newest)")) -> None:
    """List past runs (one row per measured ladder step): a table that fits the terminal, or JSON / CSV."""
    from sweep.core.types import ServerConfig
    from sweep.store.records import RunRecord, RunSummary
    from sweep.store.sqlite_reader import open_reader  # a SQLite file: Python's own sqlite3, no SQLAlchemy
    from sweep.views.workers import with_worker_labels, worker_labels

    store = open_reader(db_url(db))
    rows = store.list_runs(study=study, profile=profile, since=since_arg(since), status=status, limit=limit)
    flag_names = sorted({name for r in rows for name in r.config.flags})  # the searched flags beyond the knobs
    valid = [*RunSummary(RunRecord(0, 0, 0), "", "", ServerConfig()).columns(), *flag_names, "worker", "config",
             "ttft_sla_ms", "tpot_sla_ms"]
    cols = _columns_arg(columns, wide or fmt != "table", valid)  # csv: every column unless chosen
    if columns is None and (wide or fmt != "table"):
        at = cols.index(KNOB_NAMES[-1]) + 1
        cols[at:at] = [n for n in flag_names if n not in cols]  # every flag a row sets, beside the knobs
    labels = {k: v for sid in {r.run.study_id for r in rows if r.run.study_id is not None}
              for k, v in worker_labels(store.workers(sid)).items()}
    table = with_worker_labels(rows, labels)  # which worker measured each step, as progress lines name it
    pcts = {name: _sla_percentiles(store, name) for name in {r.study_name for r in rows}}
    fixed = fixed_flags(r.config for r in rows)  # labels show only the flags that vary among the rows
    for row, summary in zip(table, rows, strict=True):
        pt, pp = pcts[summary.study_name]
        st = summary.run.stats
        row.update(config=summary.config.label(hide=fixed), ttft_sla_ms=st.percentile_ms("ttft", pt) if st else None,
                   tpot_sla_ms=st.percentile_ms("tpot", pp) if st else None)
    shared = set(pcts.values())  # one study, or several judged alike: the header names the percentile
    at_t, at_p = (f"p{p:g}" for p in next(iter(shared))) if len(shared) == 1 else ("@SLA", "@SLA")
    headers = {**RUNS_HEADERS, "ttft_sla_ms": f"TTFT {at_t} ms", "tpot_sla_ms": f"TPOT {at_p} ms"}
    if fmt == "table" and any(r.get("offered_rps") is not None for r in table):
        # an open-loop window (a rate ladder's step, the soak) is loaded by its offered rate; its concurrency is
        # only the in-flight cap: marked so, the rate beside it
        for r in table:
            if r.get("offered_rps") is not None:
                r["concurrency"] = f"≤{r['concurrency']}"
        if columns is None and "offered_rps" not in cols:
            cols.insert(cols.index("concurrency") + 1, "offered_rps")
    if columns is None and not wide and fmt == "table" and len({r["worker"] for r in table}) > 1:
        cols.append("worker")  # a study of several workers: which one measured each step (left out first)
    emit_rows(table, cols, fmt, wide=wide, headers=headers)


def _sla_percentiles(store: RunsReader, study: str) -> tuple[float, float]:
    """The percentiles a study's SLA judges TTFT and TPOT at."""
    row = store.get_study_by_name(study)
    sla = (json.loads(row.profile_json).get("sla") if row is not None else None) or {}
    return float(sla.get("ttft_percentile", 99)), float(sla.get("tpot_percentile", 99))


@app.command()
def show(ref: str = typer.Argument(..., metavar="RUN_ID|STUDY", help="a run id, or a study name"),
         db: str = typer.Option(DEFAULT_DB), fmt: Literal["table", "json"] = typer.Option("table", "--format")) -> None:
    """Show one run (its configuration, window and every stat) or one study (its status and its stored winner)."""
    from sweep.store import Store

    store = Store(db_url(db), readonly=True)
    if not ref.isdigit():
        from sweep.cli.winners import show_study

        show_study(store, ref, db, fmt)
        return
    row = store.get_run(int(ref))
    if row is None:
        raise NotFound(f"no run {ref} in {db}")
    fields = row.columns()
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit("show", {"run": fields})
        return
    t = Table(title=f"run {ref}" + (" [SIMULATED]" if row.run.simulated else ""))
    t.add_column("field")
    t.add_column("value")
    for k, v in fields.items():
        t.add_row(k, cell_text(v))
    Console().print(t)


@app.command()
def report(study: str, db: str = typer.Option(DEFAULT_DB), out: Path = typer.Option(Path("reports")),
           rank_mixed_hardware: bool = typer.Option(False, help="rank configurations measured on different GPU "
                                                    "models together (their knees are not comparable)"),
           tier: list[Path] = typer.Option([], "--tier", help="YAML file of an SLA tier (name + sla bounds, or a list "
                                           "of them) judged on the stored windows, never measured again"),
           fmt: Literal["text", "json"] = typer.Option("text", "--format", help="text: the report's path | json: "
                                                       "the files written and the answer (docs/json-schema/report.json)"),
           ) -> None:
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
        raise NotFound(f"no study named {study} in {db}")
    ctx = study_context(store, s.id, rank_mixed_hardware)
    answer = build_answer(store, ctx, extra)
    files = write_report(ctx, out / study, answer)
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit("report", {"study": study, "markdown": str(files.markdown),
                        "html": str(files.html) if files.html else None,
                        "answer_json": str(files.markdown.parent / "answer.json"),
                        "plots": [str(p) for p in files.plots], "missing": list(files.missing),
                        "answer": answer.document()})
        return
    console.print(f"report {files.markdown}")


@app.command()
def compare(a: str = typer.Argument(..., help="run id or study name"),
            b: str = typer.Argument(..., help="run id or study name"),
            db: str = typer.Option(DEFAULT_DB), force: bool = typer.Option(False, help="compare across workloads or fixed flags"),
            out: Path | None = typer.Option(None, help="also write the comparison as markdown here"),
            fmt: str = typer.Option("table", "--format", help="table (markdown) | json"),
            overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing --out file (never the "
                                           "results database)")) -> None:
    """Two runs or two studies side by side; refuses when their workload fingerprints or their fixed flags (extra
    args, one-valued space flags) differ (unless --force)."""
    if fmt not in ("table", "json"):
        raise UsageError(f"--format {fmt!r}: expected table or json")
    if out is not None:
        from sweep.cli.outfile import check_out

        check_out(out, "--out", force=overwrite, db_url=db_url(db), force_flag="--overwrite")
    from sweep.report.document import compare_markdown
    from sweep.store import Store
    from sweep.views.fixed_flags import differences

    store = Store(db_url(db), readonly=True)
    fp_a, fp_b = _fingerprint(store, a), _fingerprint(store, b)  # refused before any window is read
    if fp_a != fp_b:
        msg = (f"{a} and {b} ran different workloads (fingerprint {fp_a} vs {fp_b}): "
               "their numbers are not comparable")
        if not force:
            raise UsageError(f"{msg}; pass --force to compare anyway")
        console.print(f"[bold red on yellow]WARNING: {msg}. Comparing anyway because of --force.[/]")
    left, right = _side(store, a), _side(store, b)
    flags_differ = differences(left.fixed, right.fixed)
    if flags_differ:
        msg = f"{a} and {b} ran with different fixed flags ({'; '.join(flags_differ)}): different servers"
        if not force:
            raise UsageError(f"{msg}; pass --force to compare anyway")
        console.print(f"[bold red on yellow]WARNING: {msg}. Comparing anyway because of --force.[/]")
    text = compare_markdown(left, right, forced=left.fingerprint != right.fingerprint)
    if out is not None:
        from sweep.cli.outfile import text_out

        with text_out(out, "--out") as fh:
            fh.write(text)
    if fmt == "json":
        from sweep.cli.jsonout import emit
        from sweep.cli.winners import compare_payload

        emit("compare", compare_payload(store, (left, right), left.fingerprint != right.fingerprint, text))
        return
    typer.echo(text)


def _fingerprint(store: Store, ref: str) -> str:
    """The workload fingerprint of a run id or a study name (one row read)."""
    if ref.isdigit():
        run = store.get_run(int(ref))
        if run is None:
            raise NotFound(f"no run {ref}")
        return run.run.fingerprint
    s = store.get_study_by_name(ref)
    if s is None:
        raise NotFound(f"no run or study named {ref}")
    return s.fingerprint


def _side(store: Store, ref: str) -> CompareSide:
    """A comparison side from a run id or a study name: a study's read model (its winner's ladder), no requests."""
    from sweep.report.document import CompareSide
    from sweep.views.context import answer_context
    from sweep.views.fixed_flags import of_profile_json

    if ref.isdigit():
        run = store.get_run(int(ref))
        if run is None:
            raise NotFound(f"no run {ref}")
        study = store.get_study_by_name(run.study_name)
        return CompareSide(f"run {ref}", run.run.fingerprint, run=run,
                           fixed=of_profile_json(study.profile_json if study is not None else None))
    s = store.get_study_by_name(ref)
    if s is None:
        raise NotFound(f"no run or study named {ref}")
    return CompareSide(ref, s.fingerprint, ctx=answer_context(store, s.id), fixed=of_profile_json(s.profile_json))
