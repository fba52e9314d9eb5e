"""models.run_count: the number of runs, kept by each push, so the models page does not count
every run of every model (on PostgreSQL a count visits each of them).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("run_count", sa.Integer, nullable=False, server_default="0"))
    op.execute("UPDATE models SET run_count = "
               "(SELECT count(*) FROM runs WHERE runs.model_id = models.id)")


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("run_count")
