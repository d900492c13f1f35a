"""What every verb of the `sweep` command shares: the typer app, the console, the database argument, the profile
argument with its `--set` overrides, and rows printed as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import typer
from rich.console import Console

from sweep.core.errors import ProfileError, UsageError
from sweep.core.numbers import number
from sweep.core.types import KNOB_LABELS, Cell
from sweep.ui.console import make_console

if TYPE_CHECKING:
    from sweep.profile import (
        Profile,  # pydantic: loaded by the commands that read a profile (load_profile_arg)
    )

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Find the SLA-constrained goodput knee of an SGLang server configuration.")


console = make_console()


DEFAULT_DB = "sqlite:///results.db"


def db_url(db: str) -> str:
    """A bare path is a SQLite file; anything with :// is an SQLAlchemy URL."""
    return db if "://" in db else f"sqlite:///{db}"


def load_profile_arg(profile: str, overrides: list[str]) -> Profile:
    from sweep.profile import load_profile, resolve_profile_path

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


def since_arg(raw: str | None) -> datetime | None:
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


def cell_text(v: object) -> str:
    """One value as a table cell: numbers by sweep.core.numbers.number, flags yes/no, times to the second."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return number(v)  # 10,300, never 1.03e+04
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


RowFormat = Literal["table", "json", "csv"]


def _numeric(rows: list[dict[str, Cell]], col: str) -> bool:
    """Whether every value of the column is a number (then it is right-aligned and never broken)."""
    vals = [r.get(col) for r in rows if r.get(col) is not None]
    return bool(vals) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals)


def emit_rows(rows: list[dict[str, Cell]], cols: list[str], fmt: str, wide: bool = False,
              headers: dict[str, str] | None = None, command: str = "runs") -> None:
    """Rows on stdout: the command's JSON document (sweep/cli/jsonout.py: every field, the rows under `command`), CSV (`cols`), or a table of `cols` that fits the terminal (columns
    from the right left out, and named on stderr, where they do not fit; `wide`: every one, at full width)."""
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit(command, {command.split()[-1]: rows})
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        typer.echo(buf.getvalue().rstrip("\n"))
    elif fmt == "table":
        from sweep.cli.table import fit

        names = {**SHORT, **(headers or {})}
        out = Console()
        fitted = fit(cols, [[cell_text(r.get(c)) for c in cols] for r in rows], lambda c: names.get(c, c),
                     lambda c: _numeric(rows, c), out, wide)
        Console(width=fitted.width).print(fitted.table)
        if fitted.left_out:
            console.print(f"{len(fitted.left_out)} column(s) left out to fit {out.width} columns: "
                          f"{', '.join(fitted.left_out)} (--wide shows every column, --columns chooses)",
                          highlight=False, markup=False)
    else:
        raise UsageError(f"--format {fmt!r}: expected table, json or csv")
