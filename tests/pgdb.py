"""A throwaway PostgreSQL database per test module on the server SWEEP_TEST_PG_URL names (skipped without one).

The server is shared by concurrent test runs: every module gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_URL = os.environ.get("SWEEP_TEST_PG_URL")
needs_pg = pytest.mark.skipif(not PG_URL, reason="set SWEEP_TEST_PG_URL to a PostgreSQL SQLAlchemy URL")


@contextmanager
def fresh_database(prefix: str = "sweep_t") -> Iterator[str]:
    """The URL of a new, empty database on the test server; dropped (connections and all) on exit."""
    from sqlalchemy import create_engine, make_url

    assert PG_URL is not None
    base = make_url(PG_URL)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
