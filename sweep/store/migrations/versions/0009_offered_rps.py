"""An open-loop rate ladder's offered rate per window: a runs.offered_rps column.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

With arrival.rates a ladder step is an offered request rate, and refinement (issue 19 §1) bisects that rate between
the bracket's passing and failing steps: a refinement window's rate is no ladder step's, so each window stores the
rate it was offered (requests/s). NULL for every other window (a closed loop, an open loop without per-step rates,
and rows written before it), whose load is its concurrency. Both SQLite and PostgreSQL add a nullable column by
ALTER TABLE; the run_summary view lists explicit columns and is left as it is.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add runs.offered_rps."""
    op.add_column("runs", sa.Column("offered_rps", sa.Float))


def downgrade() -> None:
    """Back to 0008: the column goes (its values with it)."""
    op.drop_column("runs", "offered_rps")  # ALTER TABLE DROP COLUMN (SQLite 3.35+): no rebuild, no cascade
