"""study_definition: the exact text of each study file a job was judged by, once per digest;
job.study_digest: the one its job was ingested with

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03

A database carries its studies: a teammate without a study's file judges its jobs by the
text stored here. Jobs stored before have no digest (NULL) and are judged as before: by the
study file of their name, else listed unjudged. The downgrade drops both.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "study_definition",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
    )
    # plain ALTER TABLE (see 0011): a batch copy of the job table would cascade to its rows
    op.add_column("job", sa.Column("study_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE job DROP COLUMN study_digest")
    op.drop_table("study_definition")
