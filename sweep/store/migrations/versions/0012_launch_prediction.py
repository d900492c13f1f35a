"""The launch prediction beside what the server did: four server_configs columns.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

Before a configuration is launched, sweep predicts its start-up memory plan (sweep.launchers.prediction, issue 21
§3): the KV pool SGLang will size (`predicted_pool_tokens`), whether it starts at all (`predicted_starts`) and how
long it takes (`predicted_startup_s`). The server's own pool, max_total_num_tokens from /server_info, lands in
`pool_tokens` once it is ready, beside the prediction (the real start-up time already has `startup_s`). NULL for
rows written before this revision and for launches nothing was predicted for (launcher attach, an unknown GPU).
Both SQLite and PostgreSQL add nullable columns by ALTER TABLE.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = (("predicted_pool_tokens", sa.Integer), ("predicted_starts", sa.Boolean),
           ("predicted_startup_s", sa.Float), ("pool_tokens", sa.Integer))


def upgrade() -> None:
    """Add the prediction and the real pool to server_configs."""
    for name, kind in COLUMNS:
        op.add_column("server_configs", sa.Column(name, kind))


def downgrade() -> None:
    """Back to 0009: the columns go (their values with them)."""
    for name, _ in reversed(COLUMNS):
        op.drop_column("server_configs", name)
