"""Alembic environment: URL from the tracker's configuration, metadata from its models.

The tracker passes an open connection in ``config.attributes["connection"]``; the ``alembic``
command line gets one from ``tracker.config.database_url()``.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine

from tracker.config import database_url
from tracker.models import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


given = config.attributes.get("connection")
if given is not None:
    run_on(given)
else:
    if config.config_file_name is not None:
        fileConfig(config.config_file_name)
    engine = create_engine(database_url())
    with engine.connect() as connection:
        run_on(connection)
    engine.dispose()
