"""Every fault test leaves no process behind: whatever still runs in the test's folder is killed after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faultkit import kill_everything_in


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    yield
    kill_everything_in(tmp_path)
