"""A study sends fresh requests: no request repeats on one server, and no step inherits the previous step's cache."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sweep.app import Orchestrator
from sweep.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _smoke(tmp_path: Path, **overrides: Any) -> Path:
    """One configuration of the smoke profile through its ladder on the virtual driver; returns the DB path."""
    base = {"search.space.max_running_requests": [8], "window.measure_seconds": 20.0, "ladder": [2, 4, 8, 16]}
    prof = load_profile(SMOKE, {**base, **overrides})
    db = tmp_path / "r.db"
    Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual").knee("fresh")
    return db


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_no_request_is_sent_twice_to_one_server_across_its_ladder(tmp_path: Path) -> None:
    db = _smoke(tmp_path)
    per_config = _rows(db, "SELECT r.server_config_id, q.idx FROM requests q JOIN runs r ON r.id = q.run_id")
    seen: dict[int, set[int]] = {}
    repeats = 0
    for cid, idx in per_config:
        repeats += idx in seen.setdefault(cid, set())
        seen[cid].add(idx)
    assert len(per_config) > 500  # the smoke pool holds 500: the old code had to cycle it
    assert repeats == 0, f"{repeats} requests sent twice to one server"


def test_cache_hit_rate_does_not_climb_the_ladder(tmp_path: Path) -> None:
    db = _smoke(tmp_path)
    hits = [h for (h,) in _rows(db, "SELECT cache_hit_rate FROM runs ORDER BY concurrency")]
    assert len(hits) == 4
    # smoke's shared prefixes predict ~11% (half the prompts start with one of two 64-token prefixes)
    assert max(hits) - min(hits) < 0.05, hits
    assert max(hits) < 0.2, hits
