"""A SQLite results database read through Python's own sqlite3, without SQLAlchemy: the reads `sweep runs` makes.

SQLAlchemy's import alone takes longer than `sweep runs` may (issue 22 §2, docs/bench-startup.md), so a reading
command on a SQLite file reads here: the same records as Store's reads (sweep/store/records.py), from the same
tables and the run_summary view, on a connection that can write nothing (`query_only`, the journal mode left as
it is). Like Store(readonly=True) it never makes, migrates or switches a file: a database at another schema
revision is refused in one line (sweep/store/revisions.py). Any other database (PostgreSQL) is read by Store.
tests/store/test_sqlite_reader.py holds every read here equal to Store's on the same file.

Declared column types come back typed as SQLAlchemy returns them: DATETIME as a naive datetime, BOOLEAN as bool
(sqlite3 converters, applied only on connections that ask for declared types, as this reader's do).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sweep.core.errors import StoreError
from sweep.store.errors import map_errors
from sweep.store.records import RunSummary, StudyRecord, WorkerRecord, as_utc
from sweep.store.revisions import VERSION_TABLE, check_readable, one_revision

if TYPE_CHECKING:
    from sweep.store.database import Store

SQLITE_BUSY_S = 30.0  # as Store's (sweep/store/engine.py SQLITE_BUSY_MS): a writer's transaction is waited out
_PREFIX = "sqlite:///"

sqlite3.register_converter("DATETIME", lambda b: datetime.fromisoformat(b.decode()))
sqlite3.register_converter("BOOLEAN", lambda b: bool(int(b)))


class RunsReader(Protocol):
    """What `sweep runs` reads, by either reader (SqliteReader, or Store for any other URL)."""

    def list_runs(self, study: str | None = None, profile: str | None = None, since: datetime | None = None,
                  status: str | None = None, limit: int | None = None) -> list[RunSummary]: ...

    def workers(self, study_id: int) -> list[WorkerRecord]: ...

    def get_study_by_name(self, name: str) -> StudyRecord | None: ...

    def close(self) -> None: ...


def sqlite_path(url: str) -> str | None:
    """The SQLite file a plain `sqlite:///PATH` URL names; None for any other URL (a query string, memory, a
    `file:` URI, another database), which Store reads."""
    if not url.startswith(_PREFIX) or "?" in url:
        return None
    path = url[len(_PREFIX):]
    return None if not path or path == ":memory:" or path.startswith("file:") else path


def open_reader(url: str) -> RunsReader:
    """The reader for `url`: SqliteReader for a SQLite file, else Store(url, readonly=True)."""
    path = sqlite_path(url)
    if path is not None:
        return SqliteReader(path)
    from sweep.store.database import Store

    store: Store = Store(url, readonly=True)
    return store


class SqliteReader:
    """One SQLite results database, read only, at this sweep's schema revision (else refused on open)."""

    def __init__(self, path: str) -> None:
        self.path = path  # as given: error lines name it so
        self._file = str(Path(path).expanduser())
        if not Path(self._file).is_file():
            raise StoreError(f"no results database at {path} (run a study first, or pass --db)")
        with self._read("open the results database") as con:
            has = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                              (VERSION_TABLE,)).fetchone()
            revs = [str(r[0]) for r in con.execute(f"SELECT version_num FROM {VERSION_TABLE}")] if has else []
        self.opened_at = one_revision(revs)
        check_readable(self.opened_at, self.path)

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        """One connection that can write nothing, errors as one line (sweep/store/errors.py), closed after."""
        with map_errors(f"cannot {action} (sqlite:///{self.path})", opening=True, path=self.path):
            con = sqlite3.connect(self._file, timeout=SQLITE_BUSY_S, detect_types=sqlite3.PARSE_DECLTYPES)
            try:
                con.row_factory = sqlite3.Row
                con.execute("PRAGMA query_only=ON")
                yield con
            finally:
                con.close()

    def _rows(self, action: str, sql: str, params: Sequence[object] = ()) -> list[dict[str, object]]:
        with self._read(action) as con:
            return [dict(r) for r in con.execute(sql, tuple(params))]

    def list_runs(self, study: str | None = None, profile: str | None = None, since: datetime | None = None,
                  status: str | None = None, limit: int | None = None) -> list[RunSummary]:
        """Rows of the run_summary view matching every given filter, newest first (naive `since` = UTC)."""
        where: list[str] = []
        params: list[object] = []
        for column, value in (("study_name", study), ("profile_name", profile), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:  # stored as SQLAlchemy stores a DATETIME on SQLite: compared as text
            where.append("started_at >= ?")
            params.append(as_utc(since).isoformat(sep=" ", timespec="microseconds"))
        sql = "SELECT * FROM run_summary" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY started_at DESC, run_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [RunSummary.from_row(r) for r in self._rows("list runs", sql, params)]

    def workers(self, study_id: int) -> list[WorkerRecord]:
        """Every worker that joined a study, in joining order."""
        return [WorkerRecord.from_row(r) for r in self._rows(
            f"read workers of study {study_id}", "SELECT * FROM sweep_workers WHERE study_id = ? ORDER BY id",
            (study_id,))]

    def get_study_by_name(self, name: str) -> StudyRecord | None:
        """The study row named `name`, or None."""
        rows = self._rows(f"read study {name}", "SELECT * FROM sweep_studies WHERE name = ? LIMIT 1", (name,))
        return StudyRecord.from_row(rows[0]) if rows else None

    def close(self) -> None:
        """Nothing held between reads (each opens and closes its own connection)."""
