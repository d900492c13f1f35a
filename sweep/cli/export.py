"""`sweep export STUDY --format csv|jsonl|parquet --what requests|windows|samples [--out FILE]`: a study's rows
for other programs (DuckDB, pandas, a spreadsheet). windows: one row per measured window (the run_summary view:
knobs, phase, concurrency, every statistic); requests: one row per request, with its window's run id, config id,
phase and concurrency; samples: one row per probe reading, likewise. An aborted window's rows (an interrupted
attempt's step, measured again after it) are left out unless --include-aborted. Parquet needs pyarrow (the
`export` extra). --out never replaces the results database, nor an existing file unless --force
(sweep/cli/outfile.py).
`--format mlflow --tracking-uri URI` writes the study as MLflow runs instead (sweep/report/mlflow_runs.py; the
`mlflow` extra)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

import typer

from sweep.cli.app import DEFAULT_DB, app, db_url
from sweep.cli.jsonout import iso_utc
from sweep.cli.outfile import check_out, replaced, text_out
from sweep.core.errors import NotFound, SweepError, UsageError
from sweep.core.types import Cell

if TYPE_CHECKING:
    import pyarrow as pa  # `--format parquet` only

    from sweep.store import RunSummary, Store  # SQLAlchemy: loaded when the command runs

FORMATS = ("csv", "jsonl", "parquet", "mlflow")
WHATS = ("requests", "windows", "samples")
_WINDOW_KEYS = ("run_id", "server_config_id", "phase", "concurrency", "status")  # on every request and sample row


def _plain(value: Cell) -> Cell:
    return iso_utc(value) if isinstance(value, datetime) else value  # ISO 8601 with its UTC offset


SET_ASIDE = ("aborted", "running")  # an interrupted attempt's windows (each step is measured again) and a live one


def rows(store: Store, study: str, what: str, set_aside: bool = True) -> Iterator[dict[str, Cell]]:
    """The study's rows of one kind, oldest window first (see the module docstring); the rows of aborted and
    still-running windows are left out unless set_aside is False (each step then counts once, as in `sweep runs
    --status completed` and the report)."""
    windows: list[RunSummary] = sorted(store.list_runs(study=study), key=lambda r: int(r.run.id or 0))
    if set_aside:
        windows = [w for w in windows if w.run.status not in SET_ASIDE]
    flags = sorted({name for w in windows for name in w.config.flags})  # every searched flag: a column of each row
    for w in windows:
        head = {**w.columns(), **{name: w.config.flags.get(name) for name in flags}}
        if what == "windows":
            yield {k: _plain(v) for k, v in head.items()}
            continue
        keys = {k: head.get(k) for k in _WINDOW_KEYS}
        rid = int(w.run.id or 0)
        if what == "requests":
            for r in store.requests_for_run(rid):
                yield {**keys, **{k: v for k, v in r.columns().items() if k not in ("id", "run_id")}}
        else:
            for s in store.samples_for_run(rid):
                yield {**keys, **asdict(s)}


def _write_text(items: Iterator[dict[str, Cell]], fmt: str, out: IO[str]) -> int:
    n = 0
    writer: csv.DictWriter[str] | None = None
    for row in items:
        if fmt == "jsonl":
            out.write(json.dumps(row, default=str) + "\n")
        else:
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row), extrasaction="ignore")
                writer.writeheader()
            writer.writerow(row)
        n += 1
    return n


# "sweep" on PyPI is another project: the extra is installed from this checkout (or pyarrow alone).
PYARROW_HINT = "pip install pyarrow (or, in sweep's checkout, `make install`, or pip install -e '.[export]')"


def need_pyarrow() -> None:
    """pyarrow is importable, else one UsageError line saying how to install it (before anything is read)."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError(f"--format parquet needs pyarrow: {PYARROW_HINT}") from None


PARQUET_BATCH = 20_000  # rows held at once: an export's memory is flat in the study's size


def _arrow_hints() -> dict[str, pa.DataType]:
    """Each stored column's Arrow type by name (the requests, samples, runs and server_configs tables), for a column
    the first batch holds only nulls of (an `error` column in a study without errors so far)."""
    import pyarrow as pa

    from sweep.store.models import RequestRow, SampleRow, ServerConfigRow, runs_table

    by_python = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    hints: dict[str, pa.DataType] = {}
    for table in (ServerConfigRow.__table__, runs_table, SampleRow.__table__, RequestRow.__table__):
        for col in table.columns:
            try:
                kind = col.type.python_type
            except NotImplementedError:
                continue
            hints[col.name] = by_python.get(kind, pa.string())
    return hints


def _write_parquet(items: Iterator[dict[str, Cell]], out: Path) -> int:
    """The rows in batches of PARQUET_BATCH through one ParquetWriter: the schema is the first batch's, a column it
    holds only nulls of (or whole numbers of a float column) typed from the store's tables, so later batches fit."""
    from itertools import islice

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    with replaced(out, "--out") as part:
        writer = None
        schema = None
        try:
            while batch := list(islice(items, PARQUET_BATCH)):
                if schema is None:
                    hints = _arrow_hints()
                    first = pa.Table.from_pylist(batch).schema
                    schema = pa.schema([pa.field(f.name, hints.get(f.name, pa.string()))
                                        if pa.types.is_null(f.type)
                                        or (pa.types.is_integer(f.type) and hints.get(f.name) == pa.float64())
                                        else f for f in first])
                    writer = pq.ParquetWriter(part, schema)
                assert writer is not None
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n += len(batch)
            if writer is None:  # no rows: an empty file Parquet readers open
                pq.write_table(pa.table({}), part)
        finally:
            if writer is not None:
                writer.close()
    return n


@app.command()
def export(study: str = typer.Argument(..., help="study name"), db: str = typer.Option(DEFAULT_DB),
           fmt: str = typer.Option("csv", "--format", help="csv | jsonl | parquet | mlflow"),
           what: str = typer.Option("windows", "--what", help="requests | windows | samples"),
           out: Path | None = typer.Option(None, "--out", help="file to write (default: stdout; parquet needs it)"),
           tracking_uri: str | None = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (--format "
                                                   "mlflow: e.g. file:/path/mlruns or http://host:5000)"),
           force: bool = typer.Option(False, "--force", "--overwrite", help="replace an existing --out file (never "
                                      "the results database)"),
           include_aborted: bool = typer.Option(False, "--include-aborted", help="also the rows of aborted (and "
                                                "still running) windows: an interrupted attempt's steps, measured "
                                                "again after it"),
           ) -> None:
    """Export a study's requests, windows or probe samples as CSV, JSON lines or Parquet."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if what not in WHATS:
        raise UsageError(f"--what {what!r}: expected one of {', '.join(WHATS)}")
    if fmt == "mlflow":
        _export_mlflow(study, db, tracking_uri)
        return
    if tracking_uri is not None:
        raise UsageError("--tracking-uri goes with --format mlflow")
    if fmt == "parquet" and out is None:
        raise UsageError("--format parquet writes a binary file: give --out FILE")
    if fmt == "parquet":
        need_pyarrow()
    if out is not None:
        check_out(out, "--out", force=force, db_url=db_url(db))
    from sweep.store import Store

    store = Store(db_url(db), readonly=True)
    if store.get_study_by_name(study) is None:
        raise NotFound(f"no study named {study} in {db}")
    items = rows(store, study, what, set_aside=not include_aborted)
    if fmt == "parquet":
        assert out is not None
        n = _write_parquet(items, out)
    elif out is None:
        _write_text(items, fmt, sys.stdout)
        return
    else:
        try:
            with text_out(out, "--out") as fh:
                n = _write_text(items, fmt, fh)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
    typer.echo(f"{n} {what} rows of study {study} -> {out}", err=True)


def _export_mlflow(study: str, db: str, tracking_uri: str | None) -> None:
    """`--format mlflow`: the study as a parent run and a child run per configuration (sweep/report/mlflow_runs.py)."""
    import tempfile

    from sweep.report.mlflow_runs import export_study, load_mlflow

    if tracking_uri is None:
        raise UsageError("--format mlflow needs --tracking-uri URI (e.g. file:./mlruns)")
    load_mlflow()  # not installed: one line, exit 2, before the database is opened
    from sweep.cli.tracking_uri import check_tracking_uri, redacted, shown

    check_tracking_uri(tracking_uri, db_url(db))
    from sweep.store import Store

    store = Store(db_url(db), readonly=True)
    if store.get_study_by_name(study) is None:
        raise NotFound(f"no study named {study} in {db}")
    mlflow_error = load_mlflow().exceptions.MlflowException
    with tempfile.TemporaryDirectory(prefix="sweep-mlflow-") as scratch:
        try:
            done = export_study(store, study, tracking_uri, Path(scratch))
        except mlflow_error as exc:  # a store MLflow refuses or cannot reach: its first line, no traceback
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SweepError(f"MLflow at {shown(tracking_uri)}: {redacted(first, tracking_uri)}") from None
    typer.echo(f"study {study} -> MLflow {shown(tracking_uri)}: parent run {done.parent_run_id}, "
               f"{len(done.child_run_ids)} configuration runs", err=True)
