"""How sweep opens a results database through SQLAlchemy: SQLite pragmas and writer serialisation (the packaged
Alembic config and revisions: revisions.py).

SQLite files get WAL, foreign keys, a busy timeout and BEGIN IMMEDIATE writers, so several processes (study
workers, the live page) share one file; any other URL (PostgreSQL) gets a pre-pinged pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url

from sweep.core.errors import StoreError
from sweep.store.revisions import alembic_config, packaged_revisions

__all__ = ["SQLITE_BUSY_MS", "alembic_config", "make_engine", "packaged_revisions", "serialize_sqlite"]

SQLITE_BUSY_MS = 30_000


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    """Per-connection SQLite setup: WAL, foreign keys, busy timeout; transactions are begun by _sqlite_begin."""
    _pragmas(dbapi_conn, ("journal_mode=WAL", "foreign_keys=ON", f"busy_timeout={SQLITE_BUSY_MS}",
                          "synchronous=NORMAL"))


def _sqlite_connect_readonly(dbapi_conn: Any, _record: Any) -> None:
    """Per-connection setup for a reader that changes nothing: the busy timeout, the file's journal mode as it is."""
    _pragmas(dbapi_conn, (f"busy_timeout={SQLITE_BUSY_MS}", "query_only=ON"))


def _pragmas(dbapi_conn: Any, pragmas: tuple[str, ...]) -> None:
    dbapi_conn.isolation_level = None  # let SQLAlchemy's begin event emit BEGIN (pysqlite's own is unreliable)
    cur = dbapi_conn.cursor()
    for pragma in pragmas:
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    """BEGIN, or BEGIN IMMEDIATE for writers, so two writers queue on the busy timeout instead of deadlocking."""
    conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get('sqlite_begin', '')}".strip())


def _sqlite_begin_immediate(conn: Connection) -> None:
    """BEGIN IMMEDIATE for every transaction (for engines whose code reads then writes, like Optuna's)."""
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def serialize_sqlite(engine: Engine, every_transaction: bool = False) -> None:
    """WAL, busy timeout and BEGIN IMMEDIATE writers on a SQLite engine, so several processes share the file.

    every_transaction: reads begin IMMEDIATE too (Optuna reads a row and then updates it in one transaction;
    under WAL a deferred reader that later writes fails at once with "database is locked").
    """
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin_immediate if every_transaction else _sqlite_begin)
    engine.dispose()  # connections made before the listeners existed would miss the pragmas


def make_engine(url: str, create: bool = True, readonly: bool = False) -> Engine:
    """An engine for url; SQLite files get their parent folder created (create) and the pragmas above.

    With create=False a SQLite file that does not exist is a StoreError: reading commands never make one.
    readonly: a SQLite connection that can write nothing (query_only) and leaves the journal mode as it is.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    db = parsed.database
    if db and db != ":memory:" and not db.startswith("file:"):
        if not create and not Path(db).expanduser().is_file():
            raise StoreError(f"no results database at {db} (run a study first, or pass --db)")
        if create:
            Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_MS / 1000})
    if readonly:
        event.listen(engine, "connect", _sqlite_connect_readonly)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    serialize_sqlite(engine)
    return engine
