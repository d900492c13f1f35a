"""proof.sh kvdtype: one table per KV-cache dtype, the GPU's measurement beside the simulator's prediction.

usage: kvdtype_summary.py GPU_DB SIM_DB   (SQLite results databases of sweep; prints Markdown)

For each study named *-kvdtype-<dtype>: the KV pool predicted before the launch (sweep.launchers.prediction,
stored as server_configs.predicted_pool_tokens), the server's own pool (/server_info max_total_num_tokens) and the
server log's "KV Cache is allocated. #tokens: N", the error of the prediction, and the primary tier's knee
(concurrency, goodput and its interval) from study_winners, then each window's goodput and TTFT / TPOT P95.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

LOG_POOL = re.compile(r"KV Cache is allocated\. #tokens: (\d+)")


def log_pool(path: str | None) -> int | None:
    """The pool in the server log's "KV Cache is allocated. #tokens: N" line (None: no log or no line)."""
    if not path or not Path(path).is_file():
        return None
    found = LOG_POOL.findall(Path(path).read_text(errors="replace"))
    return int(found[-1]) if found else None


def dtype_of(row: sqlite3.Row) -> str:
    """The configuration's kv_cache_dtype: its searched flag (flags_json), else the launch flags', else auto."""
    flags = json.loads(row["flags_json"] or "{}") if "flags_json" in row.keys() else {}
    if "kv_cache_dtype" in flags:
        return str(flags["kv_cache_dtype"])
    argv = json.loads(row["argv_json"] or "[]")
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--kv-cache-dtype"), "auto")


def summarise(db: str, title: str) -> list[str]:
    if not Path(db).is_file():
        return [f"## {title}", "", f"(no database at {db})", ""]
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    out = [f"## {title}", "", "| study | kv_cache_dtype | status | predicted pool | server pool | log pool | "
           "error | knee c | knee goodput tok/s (95% CI) |", "|---|---|---|---|---|---|---|---|---|"]
    rows = con.execute("SELECT c.*, s.name AS study FROM server_configs c JOIN sweep_studies s ON s.id = c.study_id "
                       "WHERE s.name LIKE '%kvdtype%' ORDER BY c.id").fetchall()
    for r in rows:
        w = con.execute("SELECT * FROM study_winners WHERE study_id = ? ORDER BY is_primary DESC",
                        (r["study_id"],)).fetchone()
        pred, pool, logged = r["predicted_pool_tokens"], r["pool_tokens"], log_pool(r["log_path"])
        real = logged or pool
        err = f"{(pred - real) / real:+.2%}" if pred and real else "-"
        knee = (f"{w['concurrency']} | {w['goodput_tps']:.0f} ({w['goodput_ci_low'] or 0:.0f}-{w['goodput_ci_high'] or 0:.0f})"
                if w is not None and w["goodput_tps"] is not None else f"- | - ({w['why'] if w is not None else 'no winner'})")
        out.append(f"| {r['study']} | {dtype_of(r)} | {r['status']} | {pred} | {pool} | {logged} | {err} | "
                   f"{knee} |")
    out += ["", "| study | concurrency | status | goodput tok/s | TTFT P95 ms | TPOT P95 ms | retractions |",
            "|---|---|---|---|---|---|---|"]
    for r in con.execute("SELECT r.*, s.name AS study FROM runs r JOIN sweep_studies s ON s.id = r.study_id "
                         "WHERE s.name LIKE '%kvdtype%' ORDER BY r.id"):
        keys = r.keys()

        def num(name: str, scale: float = 1.0, row: sqlite3.Row = r, keys: list[str] = keys) -> str:
            v = row[name] if name in keys else None
            return "-" if v is None else f"{v * scale:.0f}"
        out.append(f"| {r['study']} | {r['concurrency']} | {r['status']} | {num('goodput_tps')} | "
                   f"{num('ttft_p95_ms')} | {num('tpot_p95_ms')} | {num('retractions')} |")
    return [*out, ""]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    lines = summarise(argv[0], "Measured (GPU launcher)") + summarise(argv[1], "Simulator's prediction (virtual clock)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
