"""Compare sweep's attach-mode windows with the independent client's, step by step (stdlib only).

    python3 attach_compare.py --db results.db --independent ind-16.json ind-32.json --out attach-proof.md

sweep's figures are read from the runs table of its results.db (completed runs, the newest per concurrency);
the independent client's from its JSON lines. A figure agrees when |sweep − independent| <= max(10% of the
independent figure, 20 ms) for latencies and within 10% for output tok/s (issue 10's tolerance). An independent run
with --sessions (issue 31 §4) adds the session figures, judged against sweep's runs columns with the cross-check's
session tolerance (sweep.analysis.crosscheck): sessions completed 10% or 2, session time P50/P90 10% or 0.02 s,
cache hits 10% or 5 points, later-turn prompt tokens 10%; a session-time percentile is judged only with at least 5
completed sessions beyond it on both sides (the cross-check's min_tail: a P50 needs 10). The two clients draw their conversations from the same
distributions, not the same draws, so these agree only as far as two samples of a window do.
Writes a markdown table and prints it; exits 1 when any figure disagrees.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from typing import Any

FIGURES = (("ttft_p50_ms", "TTFT P50 ms"), ("ttft_p99_ms", "TTFT P99 ms"), ("tpot_p50_ms", "TPOT P50 ms"),
           ("tpot_p99_ms", "TPOT P99 ms"), ("output_tps", "output tok/s"))
SESSION_FIGURES = (("sessions_completed", "sessions completed"), ("session_p50_s", "session time P50 s"),
                   ("session_p90_s", "session time P90 s"), ("cache_hit_turn1", "cache hit turn 1"),
                   ("cache_hit_later", "cache hit turns 2+"), ("later_prompt_tokens", "prompt tokens turns 2+"))
REL, ABS_MS, MIN_TAIL = 0.10, 20.0, 5
FLOORS = {"output_tps": 0.0, "later_prompt_tokens": 0.0, "sessions_completed": 2.0, "session_p50_s": ABS_MS / 1000,
          "session_p90_s": ABS_MS / 1000, "cache_hit_turn1": 0.05, "cache_hit_later": 0.05}


def agrees(name: str, sweep: float | None, ref: float | None) -> bool:
    if sweep is None or ref is None:
        return False
    return abs(sweep - ref) <= max(REL * abs(ref), FLOORS.get(name, ABS_MS))


def sweep_rows(db: str) -> dict[int, dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    cols = ", ".join(["concurrency", *(f for f, _ in FIGURES), "n_completed", "loop_lag_p99_ms", "client_bound",
                      *(f for f, _ in SESSION_FIGURES if f in have)])
    rows = con.execute(f"SELECT {cols} FROM runs WHERE status = 'completed' ORDER BY id").fetchall()
    return {int(r["concurrency"]): dict(r) for r in rows}  # the newest run per concurrency wins


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--independent", nargs="+", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    sweep = sweep_rows(a.db)
    lines = ["| concurrency | figure | independent | sweep attach | agrees (10% / 20 ms) |", "|---|---|---|---|---|"]
    notes = []
    ok = True
    for path in a.independent:
        with open(path) as f:
            ind = json.loads(f.read().strip().splitlines()[-1])
        c = int(ind["concurrency"])
        sw = sweep.get(c, {})
        sessions = min(ind.get("sessions_completed") or 0, sw.get("sessions_completed") or 0)
        for key, label in FIGURES + (SESSION_FIGURES if "sessions_completed" in ind else ()):
            q = {"session_p50_s": 50, "session_p90_s": 90}.get(key)
            if q is not None and sessions * (1 - q / 100) < MIN_TAIL:
                verdict = f"not judged ({sessions} sessions)"
            else:
                good = agrees(key, sw.get(key), ind.get(key))
                ok, verdict = ok and good, "yes" if good else "NO"
            lines.append(f"| {c} | {label} | {fmt(ind.get(key))} | {fmt(sw.get(key))} | {verdict} |")
        notes.append(f"- concurrency {c}: independent client {ind['client']} measured {ind['n']} requests "
                     f"({ind['errors']} errors); sweep {sw.get('n_completed', 'n/a')} completed, event-loop lag P99 "
                     f"{fmt(sw.get('loop_lag_p99_ms'))} ms, client_bound {bool(sw.get('client_bound'))}")
    text = "\n".join(["# Attach mode against an independent client (same server, one after the other)", "",
                      *lines, "", *notes, "", f"verdict: {'all figures agree' if ok else 'some figures DISAGREE'}", ""])
    with open(a.out, "w") as f:
        f.write(text)
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
