"""The results database: the one place that talks SQL (SQLite by default, PostgreSQL for several hosts).

Store(url) (database.py) opens any SQLAlchemy URL, migrates it to head with the packaged Alembic scripts (version
table `sweep_alembic_version`, so Optuna's RDB storage can share the database) and offers typed writes and typed
reads (records.py). A reading command on a SQLite file may read through SqliteReader (sqlite_reader.py: Python's
own sqlite3, no SQLAlchemy). Every database failure surfaces as a one-line StoreError. Timestamps are naive UTC.
The face is lazy (sweep/core/face.py): `from sweep.store.records import RunRecord` loads no SQLAlchemy.
"""

from typing import TYPE_CHECKING

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.store.database": ("Store", "schema_revision"),
    "sweep.store.engine": ("serialize_sqlite",),
    "sweep.store.environment_record": ("EnvironmentRecord",),
    "sweep.store.revisions": ("alembic_config",),
    "sweep.store.errors": ("DatabaseError", "database_error", "map_errors"),
    "sweep.store.queries": ("RequestTokens", "UnknownColumnError"),
    "sweep.store.records": ("STAT_COLUMNS", "ConfigRecord", "PriorRecord", "RunRecord", "RunSummary",
                            "StoredRequestRow", "StudyRecord", "WinnerRecord", "WorkerRecord"),
    "sweep.store.sqlite_reader": ("SqliteReader", "open_reader"),
})

if TYPE_CHECKING:  # what the face lends, for the type checker (at run time each loads on first use)
    from sweep.store.database import Store as Store
    from sweep.store.database import schema_revision as schema_revision
    from sweep.store.engine import serialize_sqlite as serialize_sqlite
    from sweep.store.environment_record import EnvironmentRecord as EnvironmentRecord
    from sweep.store.errors import DatabaseError as DatabaseError
    from sweep.store.errors import database_error as database_error
    from sweep.store.errors import map_errors as map_errors
    from sweep.store.queries import RequestTokens as RequestTokens
    from sweep.store.queries import UnknownColumnError as UnknownColumnError
    from sweep.store.records import STAT_COLUMNS as STAT_COLUMNS
    from sweep.store.records import ConfigRecord as ConfigRecord
    from sweep.store.records import PriorRecord as PriorRecord
    from sweep.store.records import RunRecord as RunRecord
    from sweep.store.records import RunSummary as RunSummary
    from sweep.store.records import StoredRequestRow as StoredRequestRow
    from sweep.store.records import StudyRecord as StudyRecord
    from sweep.store.records import WinnerRecord as WinnerRecord
    from sweep.store.records import WorkerRecord as WorkerRecord
    from sweep.store.revisions import alembic_config as alembic_config
    from sweep.store.sqlite_reader import SqliteReader as SqliteReader
    from sweep.store.sqlite_reader import open_reader as open_reader
