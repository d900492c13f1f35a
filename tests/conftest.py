"""Fixtures shared by the test modules: a results database of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sweep.store import Store


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The SQLAlchemy URL of a fresh SQLite results file in the test's folder (created on first use)."""
    return f"sqlite:///{tmp_path / 'r.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """The results store on `sqlite_url`, closed after the test."""
    with Store(sqlite_url) as store:
        yield store
