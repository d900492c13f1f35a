"""The sessions section (workload.sessions): each window's completed sessions, and each knee's figures by turn."""

from __future__ import annotations

from sweep.analysis.loads import knee_load
from sweep.report.tables import fmt, load_text
from sweep.views.study import StudyContext

TURNS_SHOWN = 8  # turn indexes listed per configuration; later ones are rare and noisy


def session_lines(ctx: StudyContext) -> list[str]:
    """Sessions per window (the cache hits of turn 1 and of the later turns from the runs columns, issue 31 §4; a
    row stored before them shows —), then TTFT and cache hit by turn index at each configuration's knee (or its last
    measured step when it has no knee): turn 1 against later turns is where the prefix cache shows."""
    if not ctx.sessions:
        return []
    out = ["## Sessions (multi-turn)", "",
           "Every turn sends the whole conversation so far (the server's own replies included) plus a new message; "
           "a session is completed when its last turn ends inside the window.", "",
           "| configuration | c | sessions completed | turns / session | session P50 s | session P90 s | "
           "cache hit turn 1 | cache hit turns 2+ |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in ctx.runs:
        s = ctx.sessions.get(r.id)
        if s is not None and r.phase != "soak":
            st = r.stats
            hits = " | ".join(_share(v) for v in ((st.cache_hit_turn1, st.cache_hit_later) if st else (None, None)))
            out.append(f"| {ctx.labels.get(r.server_config_id, '?')} | {load_text(r)} | {s.sessions_completed} | "
                       f"{fmt(s.turns_per_session, 1)} | {fmt(s.session_p50_s, 2)} | {fmt(s.session_p90_s, 2)} | "
                       f"{hits} |")
    out += ["", "| configuration | c | turn | requests | TTFT P50 ms | TTFT P95 ms | cache hit |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for cid, label in ctx.labels.items():
        runs = [r for r in ctx.runs if r.server_config_id == cid and r.id in ctx.sessions and r.phase != "soak"]
        if not runs:
            continue
        knee = ctx.knees.get(cid)
        at = next((r for r in reversed(runs) if knee is not None and (r.offered_rps if r.offered_rps is not None else r.concurrency) == knee_load(knee)), runs[-1])
        for t in ctx.sessions[at.id].by_turn[:TURNS_SHOWN]:
            hit = f"{t.cache_hit:.0%}" if t.cache_hit is not None else "—"
            out.append(f"| {label} | {load_text(at)} | {t.turn} | {t.requests} | {fmt(t.ttft_p50_ms, 1)} | "
                       f"{fmt(t.ttft_p95_ms, 1)} | {hit} |")
    return out + [""]


def _share(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else "—"
