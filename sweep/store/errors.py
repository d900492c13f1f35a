"""The one mapper from database failures to one-line StoreErrors (httpx's map_exceptions, for SQL).

SQLAlchemy, its drivers (sqlite3, psycopg) and Alembic raise many types; every caller that can meet one (the
store, the SQLite reader, the Optuna search sharing the database, the CLI boundary) turns it into a DatabaseError
here: a StoreError (exit 5) whose message is one line, `<what failed>: <the driver's first line>`, and whose `kind`
says which row of _errors() matched. Where the driver's line says too little and the database file is known (`path`), the line says
what happened to that file instead: a full disk ("database or disk is full", ENOSPC), a file SQLite cannot open
("unable to open database file": a folder in its way, a read-only mount, no permission), a read-only database.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sweep.core.errors import StoreError


def _errors() -> tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...]:
    """(exception types, kind), first match wins. The drivers' own errors arrive wrapped in SQLAlchemy's (DBAPIError
    keeps the driver's in .orig); Optuna's StorageInternalError carries the SQLAlchemy error as its cause. SQLAlchemy's
    rows count once it is loaded, as it is wherever it could raise (a reading command on a SQLite file reads through
    Python's own sqlite3, sweep/store/sqlite_reader.py, and never loads it); sqlite3's own errors follow."""
    sa = sys.modules.get("sqlalchemy.exc")
    wrapped: tuple[tuple[type[BaseException], str], ...] = () if sa is None else (
        (sa.IntegrityError, "constraint"),  # a unique or foreign key violated
        (sa.OperationalError, "operational"),  # locked, disk full, read-only, unreachable server, bad credentials
        (sa.SQLAlchemyError, "database"),  # any other failure of SQLAlchemy or the driver
    )
    return (*wrapped, (sqlite3.IntegrityError, "constraint"), (sqlite3.OperationalError, "operational"),
            (sqlite3.Error, "database"))


# Only where the store itself opens the database: a path it cannot make, a driver not installed.
OPENING: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (OSError, "file"),
    (ImportError, "driver"),
)


def _migration_errors() -> tuple[tuple[type[BaseException], str], ...]:
    """Alembic cannot migrate (a database from a newer sweep): matched once Alembic is loaded, as it is wherever
    it could raise; a reading command never imports it (its start-up stays short)."""
    exc = sys.modules.get("alembic.util.exc")
    return ((exc.CommandError, "migration"),) if exc is not None else ()


_CHAIN_DEPTH = 4  # how far to follow __cause__/__context__ (Optuna wraps the SQLAlchemy error once or twice)


class DatabaseError(StoreError):
    """A database failure as one line; `kind` is the _errors() (or OPENING) row that matched."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def first_line(exc: BaseException) -> str:
    """The driver's own first line (DBAPIError.orig when there is one), else the type's name."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


_FULL = (errno.ENOSPC, errno.EDQUOT)
_UNOPENABLE = (errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS)


def why_unopenable(path: str) -> str:
    """Why the SQLite file `path` cannot be opened or made, in words, found by looking at it and its folders."""
    p = Path(path).expanduser()
    if p.is_dir():
        return f"{p} is a folder, not a database file"
    folder = next((a for a in p.parents if a.exists()), None)
    if folder is not None and not folder.is_dir():
        return f"{folder} is a file, not a folder, so {p} cannot be made"
    if folder is not None and folder != p.parent:
        return f"its folder {p.parent} does not exist"
    if folder is not None and os.statvfs(folder).f_flag & os.ST_RDONLY:
        return f"{folder} is on a read-only file system"
    if p.exists() and not os.access(p, os.R_OK | os.W_OK):
        return f"no permission to read and write {p}"
    if folder is not None and not p.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"no permission to make a file in {folder}"
    return f"SQLite cannot open or make {p} (is its folder read-only, a read-only mount, or out of space?)"


def _in_words(seen: BaseException, path: str | None) -> str | None:
    """What happened, said plainly, for the failures whose driver line names no file or no cause; else None."""
    cause = getattr(seen, "orig", None) or seen
    text = str(cause)
    if (isinstance(cause, OSError) and cause.errno in _FULL) or "database or disk is full" in text:
        where = path or (cause.filename if isinstance(cause, OSError) else None)
        return f"the disk holding {where} is full (no space left on device)" if where else \
            "the disk is full (no space left on device)"
    if path is None:
        return None
    if "unable to open database file" in text or (isinstance(cause, OSError) and cause.errno in _UNOPENABLE):
        return f"cannot open {path}: {why_unopenable(path)}"
    if "readonly database" in text:
        return f"{path} is read-only (a read-only file or mount: sweep must write to its results database)"
    return None


def database_error(exc: BaseException, what: str, opening: bool = False,
                   path: str | None = None) -> DatabaseError | None:
    """The DatabaseError `exc` is (`what` failed: its first line, or what happened in words where _in_words knows,
    `path` being the database file when it is one), or None when no exception in its chain is a database failure.
    An AssertionError Optuna raises while handling a storage error counts as that error."""
    table = _errors() + _migration_errors() + (OPENING if opening else ())
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if seen is None or isinstance(seen, StoreError):
            return None
        if path is not None and isinstance(seen, OSError) and seen.errno in _FULL:  # the database's disk, full
            return DatabaseError(f"{what}: {_in_words(seen, path)}", "file")
        for types, kind in table:
            if isinstance(seen, types):
                return DatabaseError(f"{what}: {_in_words(seen, path) or first_line(seen)}", kind)
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def map_errors(what: str, opening: bool = False, path: str | None = None) -> Iterator[None]:
    """Inside: a database failure leaves as the one-line DatabaseError of database_error; a StoreError and any
    other exception pass unchanged."""
    try:
        yield
    except Exception as exc:
        mapped = database_error(exc, what, opening, path)
        if mapped is None:
            raise
        raise mapped from exc
