"""Benchmarks run by `make bench`: each prints its numbers and writes them to reports/bench/ (git-ignored).

Nothing here rewrites a tracked file: docs/bench-*.md are written by people, from these results, with the
reading of them; copy a result there by hand when it should be kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "reports" / "bench"


def write_result(name: str, text: str, doc: str) -> Path:
    """Write benchmark NAME's result as reports/bench/bench-<name>.md and say where on stderr, and which tracked
    `doc` (docs/bench-*.md) keeps a person's copy of it."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"bench-{name}.md"
    path.write_text(text)
    print(f"wrote {path} ({doc} is kept by hand: copy into it what should stay)", file=sys.stderr)
    return path
