"""The first schema: models, runs (figures as columns), compressed profiles, budgets, tokens.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("upload_id", sa.String(64), nullable=False, unique=True),
        sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), nullable=False),
        sa.Column("version", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("program", sa.Text, nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("machine", sa.Text),
        sa.Column("python_version", sa.String(100)),
        sa.Column("peak_bytes", sa.BigInteger),
        sa.Column("peak_rss_bytes", sa.BigInteger),
        sa.Column("gpu_peak_bytes", sa.BigInteger),
        sa.Column("cpu_s", sa.Float, nullable=False),
        sa.Column("wall_s", sa.Float, nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("baseline_run_id", sa.Integer),
        sa.Column("verdict_json", sa.Text, nullable=False),
        sa.Column("timeline_json", sa.Text, nullable=False),
        sa.Column("metadata_json", sa.Text, nullable=False),
    )
    op.create_index("ix_runs_model_id", "runs", ["model_id", "id"])
    op.create_index("ix_runs_model_version", "runs", ["model_id", "version", "id"])
    op.create_index("ix_runs_model_verdict", "runs", ["model_id", "verdict", "id"])
    op.create_table(
        "profiles",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "budgets",
        sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), primary_key=True),
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("value", sa.String(100), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("tokens", "budgets", "profiles", "runs", "models"):
        op.drop_table(table)
