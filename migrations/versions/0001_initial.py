"""initial schema: jobs, provenance, probes, runs, curves and points

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("source_path", sa.Text(), nullable=False),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content_digest", sa.String(64), nullable=False),
    )
    op.create_table(
        "job_meta",
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("job.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.create_table(
        "source_file",
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("job.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("path", sa.Text(), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "probe",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("job.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("n_params", sa.BigInteger()),
        sa.Column("bpp_params", sa.Float()),
        sa.Column("bpp_state", sa.Float()),
        sa.Column("bpp_grads", sa.Float()),
        sa.Column("bpp_params_state_grads", sa.Float()),
        sa.Column("peak_steady", sa.BigInteger()),
        sa.Column("error", sa.Text()),
        sa.Column("extra", sa.Text(), nullable=False),
        sa.UniqueConstraint("job_id", "model", "variant"),
    )
    op.create_index("ix_probe_job_id", "probe", ["job_id"])
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("job.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("arm", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("val_loss", sa.Float()),
        sa.Column("final_loss", sa.Float()),
        sa.Column("diverged", sa.Boolean()),
        sa.Column("extra", sa.Text(), nullable=False),
        sa.UniqueConstraint("job_id", "arm"),
    )
    op.create_index("ix_run_job_id", "run", ["job_id"])
    op.create_table(
        "curve",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "run_id", sa.Integer(), sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("first_step", sa.BigInteger()),
        sa.Column("last_step", sa.BigInteger()),
        sa.Column("first_value", sa.Float()),
        sa.Column("last_value", sa.Float()),
        sa.Column("min_value", sa.Float()),
        sa.Column("max_value", sa.Float()),
        sa.UniqueConstraint("run_id", "metric"),
    )
    op.create_index("ix_curve_run_id", "curve", ["run_id"])
    op.create_table(
        "point",
        sa.Column(
            "curve_id",
            sa.Integer(),
            sa.ForeignKey("curve.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("value", sa.Float()),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("point")
    op.drop_index("ix_curve_run_id", table_name="curve")
    op.drop_table("curve")
    op.drop_index("ix_run_job_id", table_name="run")
    op.drop_table("run")
    op.drop_index("ix_probe_job_id", table_name="probe")
    op.drop_table("probe")
    op.drop_table("source_file")
    op.drop_table("job_meta")
    op.drop_table("job")
