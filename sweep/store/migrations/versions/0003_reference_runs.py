"""Reference-client rows: runs.reference_for_run_id links a cross-check's reference run to sweep's own run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A reference row (driver e.g. reference-httpx or sglang-bench_serving) measured the same server, configuration
and step right after sweep's own window; it is never a ladder step of its own (knees and reports skip it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the link column and its index."""
    op.add_column("runs", sa.Column("reference_for_run_id", sa.Integer))
    op.create_index("ix_runs_reference_for_run_id", "runs", ["reference_for_run_id"])


def downgrade() -> None:
    """Drop the index and the column."""
    op.drop_index("ix_runs_reference_for_run_id", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("reference_for_run_id")
