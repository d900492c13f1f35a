"""`python -m bench.startup_db DB [--requests N]`: a results database for timing read commands' start-up
(docs/bench-startup.md): one smoke study measured on the virtual driver (two configurations, three steps each, real
rows), then its request rows copied within their own windows until the requests table holds N rows (1,000,000 by
default). The database is a measuring fixture: it is never committed."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(db: Path, requests: int) -> int:
    """Measure the smoke study into `db` and grow its requests table to `requests` rows; returns the row count."""
    from sweep.profile import load_profile
    from sweep.study.orchestrator import Orchestrator

    if db.exists():
        raise SystemExit(f"error: {db} exists; give a new path")
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    with tempfile.TemporaryDirectory() as out:
        Orchestrator(prof, f"sqlite:///{db}", Path(out), driver="virtual").knee("startup")
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(requests)") if r[1] != "id"]
    names = ", ".join(cols)
    n = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    while n < requests:  # double the table (each copy stays in its run), the last round cut to the target
        con.execute(f"INSERT INTO requests ({names}) SELECT {names} FROM requests LIMIT ?", (min(n, requests - n),))
        n = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    con.commit()
    con.execute("VACUUM")
    con.close()
    return int(n)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.startup_db", description=__doc__)
    ap.add_argument("db", type=Path)
    ap.add_argument("--requests", type=int, default=1_000_000)
    a = ap.parse_args(argv)
    print(f"{a.db}: {build(a.db, a.requests):,} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
