"""The server's tables. Each run's figures are columns (history and planner queries read only
these); its profile is stored zlib-compressed in ``profiles``, read only to show a report or
to serve as the baseline of the next run. Migrations (migrations/versions/) create exactly
this schema; a change here needs a new revision there.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

models = sa.Table(
    "models", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    # kept by store.add_run in the run's transaction (migration 0002)
    sa.Column("run_count", sa.Integer, nullable=False, server_default="0"),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    # chosen by the client for each push: a retried push stores nothing twice
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
    sa.Column("verdict", sa.String(8), nullable=False),  # "pass" or "fail"
    sa.Column("baseline_run_id", sa.Integer),  # the previous passing run it was compared with
    sa.Column("verdict_json", sa.Text, nullable=False),  # budgets, figures, reasons
    sa.Column("timeline_json", sa.Text, nullable=False),  # summary.py: <= 256 points
    sa.Column("metadata_json", sa.Text, nullable=False),  # packages, machine details
    sa.Index("ix_runs_model_id", "model_id", "id"),
    sa.Index("ix_runs_model_version", "model_id", "version", "id"),
    sa.Index("ix_runs_model_verdict", "model_id", "verdict", "id"),
)

profiles = sa.Table(
    "profiles", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
    # zlib of the JSON {"profile": ..., "sources": {file: text}}
    sa.Column("data", sa.LargeBinary, nullable=False),
)

budgets = sa.Table(
    "budgets", metadata,
    sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), primary_key=True),
    sa.Column("name", sa.String(40), primary_key=True),  # peakline.gates.budgets names
    sa.Column("value", sa.String(100), nullable=False),  # as given ("2GiB", "90s", "true")
)

tokens = sa.Table(
    "tokens", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
