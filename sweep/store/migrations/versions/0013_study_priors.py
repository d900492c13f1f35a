"""The simulated prior of a study: a study_priors table (issue 21 §4).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

With `search.prior: sim` the same study first runs on the simulator (a separate study, labelled simulated) and the
real study measures configurations in the simulator's order. Each row is one configuration of that ranking: its
rank (1 = the simulator's best), knobs, simulated knee goodput (NULL: infeasible on the simulator), and whether the
real study measures it (`dropped`: more than `margin` below the simulated best). The report's setup section says
the prior was used and how it ordered the trials from these rows.
Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add study_priors."""
    op.create_table(
        "study_priors",
        sa.Column("id", sa.Integer),
        sa.Column("study_id", sa.Integer, nullable=False),
        sa.Column("prior_study", sa.String(200), nullable=False),
        sa.Column("rank", sa.Integer, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("knobs_json", sa.Text, nullable=False),
        sa.Column("sim_goodput_tps", sa.Float),
        sa.Column("dropped", sa.Boolean, nullable=False),
        sa.Column("margin", sa.Float),
        sa.PrimaryKeyConstraint("id", name="pk_study_priors"),
        sa.ForeignKeyConstraint(["study_id"], ["sweep_studies.id"], name="fk_study_priors_study_id_sweep_studies",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("study_id", "rank", name="uq_study_priors_study_id"),
    )


def downgrade() -> None:
    """Back to 0012: the table goes (its rows with it)."""
    op.drop_table("study_priors")
