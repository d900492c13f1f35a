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
