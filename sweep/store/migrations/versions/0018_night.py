"""Issue 29 (the answer in one night): short far windows and the prior's predicted knee.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03

runs.short_window: the window ran measure_seconds x search.far_windows.fraction because its step lay far from the
knee the simulated prior predicts (it draws the curve, never decides the answer); runs.planned_measure_s: the
measured length the window was planned with (seconds on the driver's clock). study_priors.knee_concurrency: the
simulated knee's concurrency (the refined boundary where the simulated ladder bracketed it); study_priors.reason:
why the prior dropped the configuration (NULL: kept). NULL for rows written before. The run_summary view is left
as it was (these are not statistics). SQLite and PostgreSQL add the nullable columns by ALTER TABLE.

Self-contained on purpose (no import of models): a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add runs.short_window, runs.planned_measure_s, study_priors.knee_concurrency and study_priors.reason."""
    op.add_column("runs", sa.Column("short_window", sa.Boolean))
    op.add_column("runs", sa.Column("planned_measure_s", sa.Float))
    op.add_column("study_priors", sa.Column("knee_concurrency", sa.Float))
    op.add_column("study_priors", sa.Column("reason", sa.Text))


def downgrade() -> None:
    """Back to 0016: the four columns go."""
    op.drop_column("study_priors", "reason")
    op.drop_column("study_priors", "knee_concurrency")
    op.drop_column("runs", "planned_measure_s")
    op.drop_column("runs", "short_window")
