"""A folder's face, loaded lazily: `from sweep.store import Store` imports the one module that defines it, and
importing any module of the folder (`sweep.store.records`) imports none of its siblings (no SQLAlchemy for a reading
command). A face names its modules in strings, which neither mypy nor import-linter follows: each face also holds an
`if TYPE_CHECKING:` block importing exactly what its map lends (tests/house/test_house.py compares the two), so the type
checker sees the real types and the lint sees the arrows. Only `sweep.store` keeps one; the other folders lend
nothing and their docstrings point at the modules."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy(package: str, exports: Mapping[str, Sequence[str]]
         ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """(__getattr__, __dir__, __all__) of a face: `exports` maps each module of the folder to the names it lends."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
