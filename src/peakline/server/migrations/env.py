"""Alembic environment: always called from peakline.server.database.migrate with an open
connection (config.attributes["connection"]); there is no alembic.ini."""

from alembic import context

from peakline.server.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
