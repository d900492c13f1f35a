"""Refinement: runs of phase 'refine' (bisection windows of a final ladder) and each configuration's SLA boundary.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

A final ladder that brackets its knee is refined on the same server (profile section refine); those windows
are runs with phase 'refine', and the boundary the windows' requests give (sweep.analysis.boundary) is stored
on server_configs: boundary_concurrency, boundary_ci_low, boundary_ci_high, boundary_shape (smooth | cliff).

The runs phase CHECK gains 'refine'. PostgreSQL drops and re-adds the constraint. SQLite cannot alter a
constraint, and rebuilding runs would cascade-delete its requests (foreign keys are on inside this
transaction), so the table's stored CREATE statement is edited in place: SQLite's documented way for a change
that leaves every stored row valid (https://sqlite.org/lang_altertable.html, "making other kinds of table
schema changes", the simpler procedure), its schema_version bumped so every connection re-reads it.

Self-contained on purpose (no import of models).
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BOUNDARY: list[tuple[str, Any]] = [("boundary_concurrency", sa.Float), ("boundary_ci_low", sa.Float),
                                    ("boundary_ci_high", sa.Float), ("boundary_shape", sa.String(10))]
_OLD = "phase IN ('screen', 'final', 'soak')"
_NEW = "phase IN ('screen', 'final', 'refine', 'soak')"


def _set_phase_check(old: str, new: str) -> None:
    """Replace the runs phase CHECK's text `old` by `new`."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        # the name as created (0001's name under the naming convention: ck_runs_ck_runs_phase), found, not assumed
        names = [str(c["name"]) for c in sa.inspect(bind).get_check_constraints("runs") if "phase" in c["sqltext"]]
        for name in names:
            op.drop_constraint(op.f(name), "runs", type_="check")
        op.create_check_constraint(op.f(names[0] if names else "ck_runs_ck_runs_phase"), "runs", new)
        return
    sql = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").scalar()
    pattern = re.escape(old).replace(r"\ ", r"\s*").replace(",", r",\s*")
    edited, n = re.subn(pattern, new, str(sql))
    if n != 1:
        raise RuntimeError(f"runs: expected one CHECK ({old}) in its schema, found {n}")
    version = int(bind.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        bind.exec_driver_sql("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'runs'", (edited,))
        bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def upgrade() -> None:
    """Allow phase 'refine' on runs; add the boundary columns to server_configs."""
    _set_phase_check(_OLD, _NEW)
    for name, kind in _BOUNDARY:
        op.add_column("server_configs", sa.Column(name, kind))


def downgrade() -> None:
    """Back to 0006: refinement windows become final ones, the boundary columns go."""
    op.execute("UPDATE runs SET phase = 'final' WHERE phase = 'refine'")
    _set_phase_check(_NEW, _OLD)
    with op.batch_alter_table("server_configs") as batch:
        for name, _ in reversed(_BOUNDARY):
            batch.drop_column(name)
