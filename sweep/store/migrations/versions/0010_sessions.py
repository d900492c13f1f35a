"""Sessions (issue 20): which turn of which conversation each request was.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

With workload.sessions a request is one turn (or one fan-out sub-request of a turn) of a conversation: requests.idx
is then the session's number, and four nullable columns say the rest: turn (1 = the first), branch (the sub-request,
0 unless the turn fans out), context_tokens (the conversation's tokens before this turn's new message) and
session_turns (the turns the session ran, set when it ended; NULL when the window cut it off). All NULL for a
single-turn workload and for rows written before. SQLite and PostgreSQL add nullable columns by ALTER TABLE.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("turn", "branch", "context_tokens", "session_turns")


def upgrade() -> None:
    """Add the four session columns to requests."""
    for name in COLUMNS:
        op.add_column("requests", sa.Column(name, sa.Integer))


def downgrade() -> None:
    """Back to 0009: the columns go (their values with them)."""
    for name in reversed(COLUMNS):
        op.drop_column("requests", name)
