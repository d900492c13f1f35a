"""The winner as one stored fact: a study_winners table (issue 22 §1).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

The report, the live page, `sweep show` and hand-written SQL named different winners when each chose its own (a
screening row ranked above a final one in SQL). When a study ends, the read model's winner decision is written
here, one row per SLA tier (the single-`sla` profile's tier is "default"): its configuration, knee, goodput and
its 95% interval (output tokens/s, goodput's unit), and why (the binding constraint, or why no winner is named).
Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add study_winners."""
    op.create_table(
        "study_winners",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("tier", sa.String(100), nullable=False),
        sa.Column("is_primary", sa.Boolean, nullable=False),
        sa.Column("server_config_id", sa.Integer),
        sa.Column("label", sa.Text),
        sa.Column("knobs_json", sa.Text),
        sa.Column("phase", sa.String(20)),
        sa.Column("concurrency", sa.Integer),
        sa.Column("goodput_tps", sa.Float),
        sa.Column("goodput_ci_low", sa.Float),
        sa.Column("goodput_ci_high", sa.Float),
        sa.Column("why", sa.Text),
        sa.Column("written_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_study_winners"),
        sa.ForeignKeyConstraint(["study_id"], ["sweep_studies.id"], name="fk_study_winners_study_id_sweep_studies",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("study_id", "tier", name="uq_study_winners_study_id"),
    )


def downgrade() -> None:
    """Back to 0009: the table goes (its rows with it)."""
    op.drop_table("study_winners")
