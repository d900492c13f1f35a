"""Report sections of the cross-checks: sweep vs the reference client, and every window vs the server's histograms.

Markdown lines from a study context (sweep.views.context: runs, reference_runs, histograms, profile); the
verdicts are recomputed by sweep.analysis.crosscheck with the profile's tolerance, so a report always judges alike.
"""

from __future__ import annotations

import math

from sweep.analysis.crosscheck import Tolerance, compare_runs, server_checks
from sweep.report.tables import cell, load_text, plain
from sweep.views.study import StudyContext

DIFFERS = "**DIFFERS**"


def _tolerance(ctx: StudyContext) -> Tolerance:
    return Tolerance.of(ctx.raw("crosscheck"))


def _v(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "—"
    return "∞" if math.isinf(x) else f"{x:,.{nd}f}"


# decimals a figure is shown with (default 1: a latency in ms)
_DECIMALS = {"output_tps": 0, "sessions_completed": 0, "later_prompt_tokens": 0, "session_p50_s": 2,
             "session_p90_s": 2, "cache_hit_turn1": 3, "cache_hit_later": 3}


def _verdict(agrees: bool | None, note: str = "") -> str:
    if agrees is None:
        return f"not judged: {note}" if note else "—"
    return "agrees" if agrees else DIFFERS


def reference_lines(ctx: StudyContext) -> list[str]:
    """The sweep-vs-reference table, one row per figure of every cross-checked step; [] without reference rows."""
    refs = ctx.reference_runs
    if not refs:
        return []
    tol = _tolerance(ctx)
    ours = {r.id: r for r in ctx.runs}
    lines = ["## Cross-check: an independent client on the same server", "",
             f"Right after sweep's own window at each step, a reference client measured the same server instance "
             f"with the same requests, concurrency and window (sessions: the same conversations, think times and "
             f"fan-out). A figure differs when the two are further apart than {tol.describe()} (throughput and "
             f"prompt tokens: {tol.rel:.0%}; sessions completed: {tol.rel:.0%} or {tol.count_floor:g}; session time: "
             f"{tol.rel:.0%} or {tol.abs_ms / 1000:g} s; cache hit: {tol.rel:.0%} or {tol.share_floor * 100:g} "
             "points).", ""]
    judged = agreed = 0
    body: list[str] = []
    notes = [f"- run {r.id} ({r.driver}): {plain(r.reason)}" for r in refs if r.status == "completed"
             and r.reason]
    for ref in refs:
        mine = ours.get(ref.reference_for_run_id) if ref.reference_for_run_id is not None else None
        if mine is None:
            continue
        label = ctx.labels.get(mine.server_config_id, str(mine.server_config_id))
        if ref.status != "completed" or mine.status != "completed":
            why = cell(ref.reason or ref.status)
            body.append(f"| {label} | {mine.concurrency} | {ref.driver} | — | — | — | — | — | not run: {why} |")
            continue
        check = compare_runs(mine.columns(), ref.columns(), tol)
        if check.agrees is not None:
            judged += 1
            agreed += int(check.agrees)
        for f in check.figures:
            nd = _DECIMALS.get(f.column, 1)
            rel = "" if f.rel_diff is None else f" ({f.rel_diff:+.1%})"
            body.append(f"| {label} | {mine.concurrency} | {ref.driver} | {f.label} | {_v(f.ours, nd)} "
                        f"(run {mine.id}) | {_v(f.reference, nd)} (run {ref.id}) | {_v(f.diff, nd)}{rel} | "
                        f"{_v(f.allowed, nd)} | {_verdict(f.agrees, f.note)} |")
    lines += [f"**{agreed} of {judged} cross-checked steps agree.**" if judged else "No step could be judged.", "",
              "| config | concurrency | reference | figure | sweep | reference | reference − sweep | allowed | "
              "verdict |", "|---|---|---|---|---|---|---|---|---|", *body, ""]
    return lines + ([*notes, ""] if notes else [])


def server_histogram_lines(ctx: StudyContext) -> list[str]:
    """Every window's client percentiles against the server's own histograms; [] where no window has any."""
    hists = ctx.histograms
    tol = _tolerance(ctx)
    body: list[str] = []
    judged = agreed = 0
    for r in sorted(ctx.runs, key=lambda r: (r.server_config_id, r.concurrency, r.id)):
        if r.status != "completed" or r.id not in hists:
            continue
        label = ctx.labels.get(r.server_config_id, str(r.server_config_id))
        for c in server_checks(r.columns(), hists[r.id], tol):
            if c.agrees is not None:
                judged += 1
                agreed += int(c.agrees)
            body.append(f"| {label} | {r.phase} | {load_text(r)} | {c.metric} P{c.q} | "
                        f"{_v(c.client_ms)} | {_v(c.server_ms)} | {_v(c.bucket_low_ms)}–{_v(c.bucket_high_ms)} | "
                        f"{c.observations:,.0f} | {_verdict(c.agrees, c.note)} |")
    if not body:
        return []
    return ["## Client vs the server's own histograms", "",
            "Each window's client percentiles against the server's Prometheus histograms over the same window "
            "(the delta of the /metrics scrapes at the window's start and end). A histogram only places a "
            f"percentile in a bucket, so the client agrees when it lies in that bucket widened by {tol.describe()}.",
            "", f"**{agreed} of {judged} figures agree.**", "",
            "| config | phase | concurrency | figure | client (ms) | server (ms) | server bucket (ms) | observations | "
            "verdict |", "|---|---|---|---|---|---|---|---|---|", *body, ""]


def crosscheck_lines(ctx: StudyContext) -> list[str]:
    """Both cross-check sections, in report order."""
    return reference_lines(ctx) + server_histogram_lines(ctx)
