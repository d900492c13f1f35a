"""The SQLite reader (sweep/store/sqlite_reader.py, Python's own sqlite3) reads what Store reads, record for record,
and refuses what Store(readonly=True) refuses, in the same words, leaving the file as it was."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from sweep.core.errors import StoreError
from sweep.core.types import Placement, ServerConfig
from sweep.store import STAT_COLUMNS, Store, alembic_config
from sweep.store.sqlite_reader import SqliteReader, open_reader, sqlite_path


def _stats(**kw: Any) -> dict[str, Any]:
    stats: dict[str, Any] = dict.fromkeys(STAT_COLUMNS)
    stats.update(n_started=3, n_completed=2, n_errors=1, error_rate=1 / 3, ttft_p99_ms=200.0, goodput_rps=0.5,
                 output_tps=812.5, passes_sla=True, steady=False, client_bound=False, sla_failures="",
                 window_s=60.0, warmup_requests=1, warmup_s=0.0)
    stats.update(kw)
    return stats


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """Two studies of two profiles: a finished, a running and an old window; two workers; placements."""
    db = tmp_path / "results.db"
    with Store(f"sqlite:///{db}") as store:
        a = store.create_study("alpha", "interactive", '{"sla": {"ttft_percentile": 95}}', "fp1", "tpe", True,
                               "virtual", "optuna-alpha")
        b = store.create_study("beta", "throughput", '{"sla": {}}', "fp2", "grid", False, "http", "optuna-beta")
        w1 = store.register_worker(a, "gpu0", "hostA", 11, 1.5, "0", "0.1", "fp1")
        store.register_worker(a, "gpu1", "hostA", 12, 2.5, "1", "0.1", "fp1")
        store.set_worker_status(w1, "done")
        ca = store.create_server_config(a, ServerConfig(16, 0.85), "sim", ["--x"], 0,
                                        placement=Placement(w1, "hostA", "H200", "0", 143771.0, "550"))
        cb = store.create_server_config(b, ServerConfig(64), "sim", [], 1)
        old = store.create_run(a, ca, 16, "fp1", True, "virtual")
        done = store.create_run(a, ca, 32, "fp1", True, "virtual", phase="screen")
        store.create_run(b, cb, 16, "fp2", False, "http")
        store.finish_run(done, _stats(), [], [], 0.0)
        store.mark_run(old, "failed", "the server died")
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE runs SET started_at = :t WHERE id = :id"), {"t": datetime(2020, 1, 1), "id": old})
    return db


def test_every_read_equals_stores(filled: Path) -> None:
    reader = SqliteReader(str(filled))
    store = Store(f"sqlite:///{filled}", readonly=True)
    filters: list[dict[str, Any]] = [
        {}, {"study": "alpha"}, {"profile": "throughput"}, {"status": "completed"}, {"status": "failed"},
        {"since": datetime.now(UTC) - timedelta(hours=1)}, {"since": datetime(2019, 6, 1), "study": "alpha"},
        {"limit": 1}, {"study": "gamma"}]
    for kw in filters:
        assert reader.list_runs(**kw) == store.list_runs(**kw), kw
    rows = reader.list_runs()
    assert len(rows) == 3 and rows[0].run.started_at is not None and isinstance(rows[0].run.simulated, bool)
    assert any(r.run.stats is not None and r.run.stats.passes_sla is True for r in rows)
    for sid in (1, 2, 99):
        assert reader.workers(sid) == store.workers(sid)
    assert [w.label for w in reader.workers(1)] == ["gpu0", "gpu1"]
    for name in ("alpha", "beta", "nope"):
        assert reader.get_study_by_name(name) == store.get_study_by_name(name)
    assert reader.opened_at == store.opened_at
    store.close()


def test_open_reader_takes_sqlite_files_only(filled: Path) -> None:
    assert isinstance(open_reader(f"sqlite:///{filled}"), SqliteReader)
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path(f"sqlite:///{filled}?mode=ro") is None
    assert sqlite_path("postgresql+psycopg://u:p@h/db") is None
    assert isinstance(open_reader(f"sqlite:///{filled}?timeout=5"), Store)


def test_refusals_say_what_store_says(tmp_path: Path) -> None:
    def both(db: Path) -> tuple[str, str]:
        with pytest.raises(StoreError) as lite:
            SqliteReader(str(db))
        with pytest.raises(StoreError) as full:
            Store(f"sqlite:///{db}", readonly=True, create=False)
        return str(lite.value), str(full.value)

    missing = tmp_path / "none.db"
    lite, full = both(missing)
    assert lite == full and "no results database at" in lite
    assert not missing.exists()

    old = tmp_path / "old.db"
    command.upgrade(alembic_config(f"sqlite:///{old}"), "0007")
    before = old.read_bytes()
    lite, full = both(old)
    assert lite == full and "older schema (revision 0007" in lite and "sweep db upgrade" in lite
    assert old.read_bytes() == before  # never migrated, never touched

    newer = tmp_path / "newer.db"
    Store(f"sqlite:///{newer}").close()
    with sqlite3.connect(newer) as con:
        con.execute("UPDATE sweep_alembic_version SET version_num = '9999'")
    lite, full = both(newer)
    assert lite == full and "written by a newer sweep" in lite

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE t (x)")
    lite, full = both(other)
    assert lite == full and "not a sweep results database" in lite

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(StoreError, match="cannot open the results database"):
        SqliteReader(str(junk))
