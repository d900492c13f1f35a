"""The `sweep` command: a thin layer of typer verbs over the study, views and report layers.

Commands raise; `main()` alone turns an error into one line and an exit code (sweep/cli/boundary.py), never a
traceback. The verbs live by family: run.py (measure), query.py (read), workers.py (workers and shared studies),
db.py (`sweep db upgrade`), dataset.py (`sweep dataset validate|convert|stats`); app.py holds what they share.
"""

from __future__ import annotations

import typer

from sweep.cli.app import app
from sweep.cli.boundary import run as run_at_boundary

# isort: off
from sweep.cli import run, query, history, explain, export, workers, db, dataset  # the verbs register on `app` in this order (sweep --help)
# isort: on

__all__ = ["app", "main"]

workers.register(app)
_VERBS = (run, query, history, explain, export, db, dataset)


def main(argv: list[str] | None = None) -> int:
    """Run one `sweep` command and return its exit code: errors become one line there (sweep/cli/boundary.py)."""
    return run_at_boundary(lambda: typer.main.get_command(app).main(args=argv, prog_name="sweep",
                                                                   standalone_mode=True), argv)
