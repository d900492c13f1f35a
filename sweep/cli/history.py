"""`sweep history`: one workload's studies over time (sweep/views/history.py) as a table, the `history` JSON
document (docs/json-schema/history.json) and, with --plot FILE, history.png (sweep/report/trend.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import typer

from sweep.cli.app import DEFAULT_DB, app, console, db_url, emit_rows
from sweep.core.types import Cell


@app.command()
def history(profile: str | None = typer.Option(None, "--profile", help="the profile's name (its newest study's "
                                               "workload fingerprint; studies of another are named, not mixed in)"),
            fingerprint: str | None = typer.Option(None, "--fingerprint", help="a workload fingerprint"),
            db: str = typer.Option(DEFAULT_DB), fmt: Literal["table", "json"] = typer.Option("table", "--format"),
            plot: Path | None = typer.Option(None, "--plot", help="write the trend plot (PNG) here"),
            overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing --plot file"),
            force: bool = typer.Option(False, "--force", help="list studies whose fixed flags differ (extra args, "
                                       "one-valued space flags) anyway")) -> None:
    """Each study of one workload: its stored winner and knee over time, with SGLang version, GPU and host;
    regressions (a knee goodput below the previous study's beyond both intervals) marked."""
    from dataclasses import asdict

    from sweep.store import Store
    from sweep.views.history import HISTORY_SCHEMA_VERSION, study_history

    if plot is not None:
        from sweep.cli.outfile import check_out

        check_out(plot, "--plot", force=overwrite, db_url=db_url(db), force_flag="--overwrite")
    hist = study_history(Store(db_url(db), readonly=True), profile, fingerprint, force)
    written = None
    if plot is not None and any(p.goodput_tps is not None for p in hist.points):  # else nothing to draw
        from sweep.cli.outfile import replaced
        from sweep.report.trend import write_trend

        plot.parent.mkdir(parents=True, exist_ok=True)
        with replaced(plot, "--plot") as part:
            write_trend(hist, part)
        written = plot
    rows: list[dict[str, Cell]] = [{**asdict(p), "where": p.where()} for p in hist.points]
    if fmt == "json":
        from sweep.cli.jsonout import emit

        emit("history", {"history_version": HISTORY_SCHEMA_VERSION, "fingerprint": hist.fingerprint,
                         "profile": hist.profile, "other_fingerprints": list(hist.other_fingerprints),
                         "plot": str(written) if written else None, "studies": rows})
        return
    for r, p in zip(rows, hist.points, strict=True):
        r["created_at"] = f"{p.created_at:%Y-%m-%d}" if p.created_at else ""
        r["knee"] = f"c={p.concurrency}" if p.concurrency is not None else ""
        r["ci"] = (f"{p.goodput_ci_low:,.0f}–{p.goodput_ci_high:,.0f}"
                   if p.goodput_ci_low is not None and p.goodput_ci_high is not None else "")
        r["change"] = ("" if p.change_pct is None else f"{p.change_pct:+.1f}%") + (" REGRESSION" if p.regression else "")
        r["winner"] = p.winner or f"none: {p.why or ''}"
    # what answers "did it get worse, and which configuration won" first: a narrow terminal leaves columns out from
    # the right, so where it ran goes before the winner's interval; a column with nothing in it is not printed
    order = ["study", "created_at", "goodput_tps", "change", "knee", "ci", "winner", "sglang_version", "gpu_name",
             "host"]
    emit_rows(rows, [c for c in order if any(r.get(c) not in (None, "") for r in rows)], "table",
              headers={"created_at": "when", "sglang_version": "SGLang", "gpu_name": "GPU", "goodput_tps": "goodput",
                       "ci": "95% CI tok/s"}, command="history")
    console.print(f"workload {hist.fingerprint}" + (f" (profile {hist.profile})" if hist.profile else "")
                  + (f"; {len(hist.other_fingerprints)} other workload fingerprint(s) of this profile left out: "
                     + ", ".join(hist.other_fingerprints) if hist.other_fingerprints else "")
                  + (f"; plot: {written}" if written else ""), highlight=False, markup=False)
