"""One mapper (sweep/store/errors.py) turns database failures into one-line StoreErrors for the store, the search
and the CLI boundary; real SQLite errors, no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from sweep.core.errors import StoreError
from sweep.store import Store
from sweep.store.errors import DatabaseError, database_error, map_errors


def test_a_sqlite_failure_becomes_one_line_with_its_kind(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(DatabaseError) as caught, map_errors("cannot read"), engine.connect() as conn:
        conn.execute(text("SELECT * FROM no_such_table"))
    assert caught.value.kind == "operational" and isinstance(caught.value, StoreError)
    assert str(caught.value) == "cannot read: no such table: no_such_table"
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
        conn.execute(text("INSERT INTO t VALUES (1)"))
    with pytest.raises(DatabaseError) as dup, map_errors("cannot write"), engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    assert dup.value.kind == "constraint" and "\n" not in str(dup.value)


def test_anything_else_passes_through_and_a_wrapped_failure_is_found() -> None:
    assert database_error(ValueError("no"), "x") is None
    with pytest.raises(KeyError), map_errors("x"):
        raise KeyError("k")
    assert database_error(OSError("disk"), "x") is None  # an OSError is a database's only where the store opens it
    assert database_error(OSError("disk"), "x", opening=True) is not None


def test_the_store_refuses_a_missing_database_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        Store(f"sqlite:///{tmp_path / 'nope' / 'r.db'}", create=False)
    assert "\n" not in str(caught.value)


def test_a_full_disk_names_the_database_and_says_the_disk_is_full(tmp_path: Path) -> None:
    """ENOSPC (no file name in it, as a write() raises it) and SQLite's "database or disk is full": the line names
    the database file and says its disk is full, not "[Errno 28] No space left on device" alone."""
    import errno
    import sqlite3

    from sqlalchemy.exc import OperationalError

    db = str(tmp_path / "r.db")
    full = OperationalError("INSERT INTO requests ...", {}, sqlite3.OperationalError("database or disk is full"))
    for exc in (OSError(errno.ENOSPC, "No space left on device"), full):
        mapped = database_error(exc, "cannot store run 3", path=db)
        assert mapped is not None, exc
        assert str(mapped) == f"cannot store run 3: the disk holding {db} is full (no space left on device)"
    with pytest.raises(DatabaseError) as caught, map_errors("cannot store run 3", path=db):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert db in str(caught.value) and "disk" in str(caught.value) and "full" in str(caught.value)


def test_a_database_sqlite_cannot_open_says_why_and_names_the_path(tmp_path: Path) -> None:
    """"unable to open database file" said nothing about which file or why. Real failures (root can write anywhere
    chmod allows, so no permission bits): a database path under a regular file, and a database path that is a
    folder; each line names the path and what is in its way."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder")
    under = blocker / "r.db"
    with pytest.raises(sqlite3.OperationalError) as raw:
        sqlite3.connect(under).execute("CREATE TABLE t (x)")
    assert str(raw.value) == "unable to open database file"  # what the user saw
    wrapped = OperationalError("connect", {}, raw.value)  # as SQLAlchemy raises it
    mapped = database_error(wrapped, "cannot open the results database", path=str(under))
    assert mapped is not None
    assert str(mapped) == (f"cannot open the results database: cannot open {under}: {blocker} is a file, not a folder, "
                           f"so {under} cannot be made")
    with pytest.raises(StoreError) as via_store:
        Store(f"sqlite:///{under}")
    assert f"{blocker} is a file, not a folder" in str(via_store.value) and "\n" not in str(via_store.value)
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(StoreError) as is_dir:
        Store(f"sqlite:///{folder}")
    assert str(is_dir.value).endswith(f"cannot open {folder}: {folder} is a folder, not a database file"), is_dir.value
