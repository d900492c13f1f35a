"""Start-up of the reading commands (issue 22 §2, docs/bench-startup.md): `sweep --help` loads none of the heavy
libraries, `sweep runs` on a SQLite file none either (Python's own sqlite3, sweep/store/sqlite_reader.py), and a
read-only open checks the schema revision without Alembic, against the revision Alembic itself names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("sqlalchemy", "alembic", "numpy", "optuna", "matplotlib", "scipy")


def _loaded(args: list[str], cwd: Path) -> set[str]:
    """The heavy top-level packages a `sweep ARGS` process had imported when it finished."""
    code = ("import sys\nfrom sweep.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print('MODULES=' + __import__('json').dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("MODULES="))
    return {m.split(".")[0] for m in json.loads(line.removeprefix("MODULES="))}


def test_help_imports_no_heavy_library(tmp_path: Path) -> None:
    assert _loaded(["--help"], tmp_path) == set()
    assert _loaded(["runs", "--help"], tmp_path) == set()


def test_runs_on_a_sqlite_file_loads_no_heavy_library(tmp_path: Path) -> None:
    from sweep.store import Store

    db = tmp_path / "r.db"
    Store(f"sqlite:///{db}").close()
    assert _loaded(["runs", "--db", str(db)], tmp_path) == set()
    assert _loaded(["runs", "--db", f"sqlite:///{db}?timeout=5"], tmp_path) == {"sqlalchemy"}  # Store reads it


def test_packaged_revisions_agree_with_alembic() -> None:
    from alembic.script import ScriptDirectory

    from sweep.store.engine import alembic_config, packaged_revisions

    script = ScriptDirectory.from_config(alembic_config())
    head, known = packaged_revisions()
    assert head == script.get_current_head()
    assert known == {s.revision for s in script.walk_revisions()}
