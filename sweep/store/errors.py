"""The one mapper from database failures to one-line StoreErrors (httpx's map_exceptions, for SQL).

SQLAlchemy, its drivers (sqlite3, psycopg) and Alembic raise many types; every caller that can meet one (the
store, the Optuna search sharing the database, the CLI boundary) turns it into a DatabaseError here: a StoreError
(exit 5) whose message is one line, `<what failed>: <the driver's first line>`, and whose `kind` says which row
of ERRORS matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic.util.exc import CommandError
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from sweep.core.errors import StoreError

# (exception types, kind), first match wins. The drivers' own errors arrive wrapped in SQLAlchemy's (DBAPIError
# keeps the driver's in .orig); Optuna's StorageInternalError carries the SQLAlchemy error as its cause.
ERRORS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (IntegrityError, "constraint"),  # a unique or foreign key violated
    (OperationalError, "operational"),  # locked, disk full, read-only, unreachable server, bad credentials
    (SQLAlchemyError, "database"),  # any other failure of SQLAlchemy or the driver
    (CommandError, "migration"),  # Alembic cannot migrate (a database from a newer sweep)
)
# Only where the store itself opens the database: a path it cannot make, a driver not installed.
OPENING: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (OSError, "file"),
    (ImportError, "driver"),
)
_CHAIN_DEPTH = 4  # how far to follow __cause__/__context__ (Optuna wraps the SQLAlchemy error once or twice)


class DatabaseError(StoreError):
    """A database failure as one line; `kind` is the ERRORS (or OPENING) row that matched."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def first_line(exc: BaseException) -> str:
    """The driver's own first line (DBAPIError.orig when there is one), else the type's name."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def database_error(exc: BaseException, what: str, opening: bool = False) -> DatabaseError | None:
    """The DatabaseError `exc` is (`what` failed: its first line), or None when no exception in its chain is a
    database failure. An AssertionError Optuna raises while handling a storage error counts as that error."""
    table = ERRORS + (OPENING if opening else ())
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if seen is None or isinstance(seen, StoreError):
            return None
        for types, kind in table:
            if isinstance(seen, types):
                return DatabaseError(f"{what}: {first_line(seen)}", kind)
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def map_errors(what: str, opening: bool = False) -> Iterator[None]:
    """Inside: a database failure leaves as the one-line DatabaseError of database_error; a StoreError and any
    other exception pass unchanged."""
    try:
        yield
    except Exception as exc:
        mapped = database_error(exc, what, opening)
        if mapped is None:
            raise
        raise mapped from exc
