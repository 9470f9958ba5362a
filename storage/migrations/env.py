"""Alembic environment: runs migrations on the connection `storage.database` hands it."""

from __future__ import annotations

from alembic import context

from storage.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `cosigner migrate`, which supplies the connection")
context.configure(
    connection=connection, target_metadata=metadata, render_as_batch=connection.dialect.name == "sqlite"
)
with context.begin_transaction():
    context.run_migrations()
