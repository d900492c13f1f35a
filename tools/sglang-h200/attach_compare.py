"""Compare sweep's attach-mode windows with the independent client's, step by step (stdlib only).

    python3 attach_compare.py --db results.db --independent ind-16.json ind-32.json --out attach-proof.md

sweep's figures are read from the runs table of its results.db (completed runs, the newest per concurrency);
the independent client's from its JSON lines. A figure agrees when |sweep − independent| <= max(10% of the
independent figure, 20 ms) for latencies and within 10% for output tok/s (issue 10's tolerance).
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
REL, ABS_MS = 0.10, 20.0


def agrees(name: str, sweep: float | None, ref: float | None) -> bool:
    if sweep is None or ref is None:
        return False
    tol = REL * abs(ref) if name == "output_tps" else max(REL * abs(ref), ABS_MS)
    return abs(sweep - ref) <= tol


def sweep_rows(db: str) -> dict[int, dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    cols = ", ".join(["concurrency", *(f for f, _ in FIGURES), "n_completed", "loop_lag_p99_ms", "client_bound"])
    rows = con.execute(f"SELECT {cols} FROM runs WHERE status = 'completed' ORDER BY id").fetchall()
    return {int(r["concurrency"]): dict(r) for r in rows}  # the newest run per concurrency wins


def fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f}"


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
        for key, label in FIGURES:
            good = agrees(key, sw.get(key), ind.get(key))
            ok = ok and good
            lines.append(f"| {c} | {label} | {fmt(ind.get(key))} | {fmt(sw.get(key))} | {'yes' if good else 'NO'} |")
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
