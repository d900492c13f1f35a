"""README's module table names every module of the tree, and no module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("sweep", "sglang_sim", "bench", "tools")  # a row `pkg/` covers everything below it,
# except in sweep/, where a folder row names each module
ENTRY_POINTS = ("__init__.py", "__main__.py")  # a package's own files need no row (a protocol in one does)


def _named() -> set[str]:
    """The paths the table's first column names: `dir/a.py`, `b.py` is dir/a.py and dir/b.py."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("| module | does one thing |")
    named: set[str] = set()
    for row in lines[start + 2:]:
        if not row.startswith("|"):
            break
        folder = ""
        for code in re.findall(r"`([^`]+)`", row.split("|")[1]):
            if "/" in code:
                folder = code.rstrip("/").rsplit("/", 1)[0] if not code.endswith("/") else code.rstrip("/")
                named.add(code)
            else:
                named.add(f"{folder}/{code}")
    return named


def test_every_module_has_a_row_in_the_readme_table() -> None:
    named = _named()
    # a folder row of sweep/ names its modules one by one; other trees (and Alembic's migrations) are covered whole
    packages = tuple(n for n in named if n.endswith("/") and (not n.startswith("sweep/") or n == "sweep/store/"))
    modules = sorted(str(p.relative_to(ROOT)) for tree in TREES for p in (ROOT / tree).rglob("*.py"))
    missing = [m for m in modules if m not in named and not m.startswith(packages)
               and Path(m).name not in ENTRY_POINTS]
    assert not missing, f"README.md's module table leaves out {missing}"


def test_every_row_of_the_readme_table_names_a_module_that_exists() -> None:
    gone = sorted(n for n in _named() if not (ROOT / n).exists())
    assert not gone, f"README.md's module table names {gone}, which are not in the tree"
