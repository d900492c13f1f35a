"""The report's tables: every step, every configuration, and the winner's latency per modality."""

from __future__ import annotations

import re

from sweep.analysis.knee import ConfigKnee
from sweep.analysis.loads import knee_load
from sweep.analysis.loads import load_text as knee_at
from sweep.analysis.window_edges import drain_note
from sweep.core.numbers import fixed
from sweep.store import RunRecord
from sweep.views.study import StudyContext, StudyView

CLIENT_BOUND_WHY = ("the load generator, not the server, may have limited these windows (client dispatch lag P99 "
                    "> 50 ms or client CPU > 90% of a core): their throughput may understate the server and "
                    "their latencies overstate it")


def fmt(v: object, nd: int = 0, scale: float = 1.0) -> str:
    """A number for a table cell: thousands separators, `—` for no data, yes/no for flags (other values as text)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, int | float):
        return str(v)
    return fixed(v * scale, nd)


_OPENS_HTML = re.compile(r"<(?=[A-Za-z/!?])")  # what CommonMark reads as raw HTML: a tag, comment or declaration
_OPENS_ENTITY = re.compile(r"&(?=#?\w+;)")  # an entity reference (`&lt;`, `&#60;`)


def plain(text: object) -> str:
    """Free text (a failure reason, a log line, a label) for report.md, on one line: a `<` that would open raw HTML
    and an `&` that would start an entity as entities, so no text read from a server or a worker is raw HTML in a
    markdown viewer, while `TTFT P99 534 ms > 500 ms` and `(9 < 20)` read as written, raw or rendered."""
    one_line = " ".join(str(text or "").split())
    return _OPENS_HTML.sub("&lt;", _OPENS_ENTITY.sub("&amp;", one_line))


def cell(text: object) -> str:
    """Free text as one markdown table cell: plain(), its `|` escaped so it cannot open a column."""
    return plain(text).replace("|", "\\|")


def steps_table(ctx: StudyContext) -> list[str]:
    """Every measured window of every configuration, client-bound windows flagged; the requests the drain cut
    counted beside the errors (not as errors), and a window whose drain was too short for its requests named."""
    lines = ["## Every configuration and step", "",
             "Screening rows (phase `screen`) ran short windows and only rank configurations; the winner comes "
             "from `final` rows and the `refine` rows between them (bisection windows on the same server, profile section "
             "refine). Rows of an aborted attempt (orchestrator killed) are kept but never counted. \"window opened\" says "
             "how each measured window opened: the warm-up condition met last (requests completed, seconds, load: every "
             "user had a request in flight; bound: the warm-up did not end in time), when, and how many requests had "
             "completed by then.", "",
             "| config | phase | concurrency (soak: offered rate) | throughput (tok/s) | goodput (tok/s) | TTFT P50 (s) | TTFT P99 (s) | "
             "TPOT P50 (ms) | TPOT P99 (ms) | cache hit | preemptions | KV max | queue mean | peak GPU mem (GiB) | "
             "client-bound | window opened | errors / cut by the drain | SLA |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    aborted = {c.id for c in ctx.configs if c.status == "aborted"}
    bound, cut = [], []
    drain = ctx.raw("window").get("drain_seconds")
    for r in sorted(ctx.runs, key=lambda r: (r.server_config_id, r.phase == "soak", r.concurrency)):
        label = ctx.labels.get(r.server_config_id)
        phase = r.phase + (" (aborted attempt)" if r.server_config_id in aborted else "")
        load = load_text(r)
        if r.status != "completed":
            lines.append(f"| {label} | {phase} | {load} | {r.status}: {cell(r.reason)} |"
                         + " |" * 14)
            continue
        at = f"{label} at {'c=' + load if load.isdigit() else load} ({phase})"
        s = r.stats  # None: a completed row stored without statistics (its cells read —)
        if s and s.client_bound:
            bound.append(at)
        if s is not None and (note := drain_note(s, drain if isinstance(drain, int | float) else None)):
            cut.append(f"{at}: {note}")
        lines.append(
            f"| {label} | {phase} | {load} | {fmt(s and s.output_tps)} | "
            f"{fmt(s and s.goodput_tps)} | {fmt(s and s.ttft_p50_ms, 2, 1e-3)} | {fmt(s and s.ttft_p99_ms, 2, 1e-3)} | "
            f"{fmt(s and s.tpot_p50_ms, 1)} | {fmt(s and s.tpot_p99_ms, 1)} | {fmt(s and s.cache_hit_rate, 0, 100)}% | "
            f"{fmt(s and s.retractions)} | {fmt(s and s.kv_usage_max, 2)} | {fmt(s and s.queue_len_mean, 1)} | "
            f"{fmt(s and s.peak_gpu_mem_mib, 1, 1 / 1024)} | {'**yes**' if s and s.client_bound else 'no'} | "
            f"{opened_text(r)} | {fmt(s and s.n_errors)} / {fmt(s and s.n_cut)} | "
            f"{'pass' if s and s.passes_sla else 'fail: ' + cell(s and s.sla_failures)} |")
    lines.append("")
    if bound:
        lines += [f"> **Client-bound**: {', '.join(bound)}. {CLIENT_BOUND_WHY[0].upper()}{CLIENT_BOUND_WHY[1:]}.", ""]
    if cut:
        lines += ["> **Cut by the drain**: " + "; ".join(cell(c) for c in cut) + ". Their latencies are read from "
                  "the requests that finished; raise window.drain_seconds so every request ends inside the drain.", ""]
    return lines


def opened_text(run: RunRecord) -> str:
    """How a window opened, e.g. "requests after 9.6 s, 100 done"; — for a row stored before it was recorded."""
    s = run.stats
    if s is None:
        return "—"
    by, seconds, done = s.window_opened_by, s.warmup_s, s.warmup_requests
    if not by or not isinstance(seconds, int | float) or not isinstance(done, int | float):
        return "—"
    return f"{cell(by)} after {seconds:,.1f} s, {done:,.0f} done"


def load_text(run: RunRecord) -> str:
    """A window's load for the concurrency column: its client concurrency, or, for an open-loop window (the soak's
    Poisson arrivals, a rate ladder), the rate it was offered: its concurrency is only the in-flight cap."""
    if run.offered_rps is not None:
        return f"{run.offered_rps:,.2f} req/s"
    return f"≤ {run.concurrency} in flight" if run.phase == "soak" else str(run.concurrency)


def knee_cell(knee: ConfigKnee) -> str:
    """The knee's load for a table cell: its concurrency, or its offered rate in an open-loop rate ladder."""
    return f"{knee.offered_rps:,.2f} req/s" if knee.offered_rps is not None else str(knee.concurrency)


def ci_text(knee: ConfigKnee) -> str:
    lo, hi = knee.ci_low, knee.ci_high
    return "—" if lo is None or hi is None else f"{lo:,.0f}–{hi:,.0f}"


def boundary_text(knee: ConfigKnee) -> str:
    """The refined SLA boundary: concurrency (req/s for an open-loop rate ladder, so marked), its 95% interval and
    its shape; — when not refined."""
    if knee.boundary is None:
        return "—"
    ci = ("" if knee.boundary_ci_low is None or knee.boundary_ci_high is None
          else f" ({knee.boundary_ci_low:,.1f}–{knee.boundary_ci_high:,.1f})")
    unit = " req/s" if knee.boundary_unit == "req/s" else ""
    return f"{knee.boundary:,.1f}{unit}{ci}, {knee.boundary_shape or '?'}"


def configs_table(ctx: StudyContext, view: StudyView) -> list[str]:
    """One row per configuration: its knee, the knee's interval, whether it is bracketed, the refined SLA
    boundary, why the ladder stopped."""
    by_rate = any(k.boundary_unit == "req/s" for k in ctx.knees.values())
    lines = ["## Configurations", "",
             f"| config | status | phase | knee {'(offered rate)' if by_rate else 'concurrency'} | knee goodput (tok/s) | "
             "95% CI (tok/s) | "
             f"SLA boundary {'req/s' if by_rate else 'c'} (95% CI), shape | why the ladder stopped |",
             "|---|---|---|---|---|---|---|---|"]
    for c in ctx.configs:
        knee = ctx.knees.get(c.id)
        at = ("" if not knee else " (top of ladder: not bracketed)" if c.id in view.knee_at_top else "")
        lines.append(f"| {ctx.labels.get(c.id)} | {c.status} | {knee.phase if knee else '—'} | "
                     f"{knee_cell(knee) + at if knee else '—'} | {fmt(knee.goodput_tps) if knee else '—'} | "
                     f"{ci_text(knee) if knee else '—'} | {boundary_text(knee) if knee else '—'} | "
                     f"{cell(c.stop_reason or c.failure_reason)} |")
    lines.append("")
    tops: dict[str, set[tuple[float, str]]] = {}  # each configuration once (its screen and final ladders: two rows)
    for cid in sorted(view.knee_at_top):
        if cid in ctx.knees:
            k = ctx.knees[cid]
            tops.setdefault(str(ctx.labels.get(cid)), set()).add((knee_load(k), knee_at(k.concurrency, k.offered_rps)))
    top = [f"{label} ({', '.join(t for _, t in sorted(cs))})" for label, cs in tops.items()]
    if top:
        lines += [f"> **Not bracketed** (the knee is the highest step its ladder measured, so a higher concurrency "
                  f"may do better: extend the ladder past it): {', '.join(top)}.", ""]
    return lines


def modality_table(ctx: StudyContext, view: StudyView) -> list[str]:
    """The winner's latency per input modality at every step (mixed workloads only)."""
    winner = ctx.winner
    if winner is None or not view.mixed():
        return []
    knee_c = winner.knee.concurrency
    lines = ["## Per modality (winner)", "",
             "Each modality's requests in the winner's measured windows; a mixed workload's averages hide these.", "",
             "| phase | concurrency | modality | requests | errors | TTFT P50 (s) | TTFT P99 (s) | TPOT P50 (ms) | "
             "TPOT P99 (ms) | E2E P50 (s) | E2E P99 (s) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    runs = {r.id: r for r in ctx.runs}
    for run_id in sorted(view.modalities, key=lambda i: (runs[i].phase, runs[i].concurrency)):
        r = runs[run_id]
        phase = r.phase
        c = f"{r.concurrency}" + (" (knee)" if r.concurrency == knee_c and phase == winner.knee.phase
                                     else "")
        for m in view.modalities[run_id]:
            lines.append(f"| {phase} | {c} | {m.modality} | {m.count:,} | {m.errors:,} | {fmt(m.ttft_p50_ms, 2, 1e-3)} | "
                         f"{fmt(m.ttft_p99_ms, 2, 1e-3)} | {fmt(m.tpot_p50_ms, 1)} | {fmt(m.tpot_p99_ms, 1)} | "
                         f"{fmt(m.e2e_p50_ms, 2, 1e-3)} | {fmt(m.e2e_p99_ms, 2, 1e-3)} |")
    return lines + [""]
