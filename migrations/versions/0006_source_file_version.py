"""source_file.version: each file's version as its storage listed it at ingest

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``tracker sync`` skips a job without downloading it when the listing shows the names, sizes
and versions (ETag, generation, modification time) kept at ingest. Jobs stored before have no
version: the first sync reads their files once, finds the same content and keeps the versions.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("source_file") as batch:
        batch.add_column(sa.Column("version", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("source_file") as batch:
        batch.drop_column("version")
