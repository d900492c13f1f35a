"""Alembic environment for results.db: runs on the connection Store hands over, or on sqlalchemy.url."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine

from sweep.store.models import Base
from sweep.store.revisions import VERSION_TABLE


def ours(name: str | None, type_: str, parent_names: Any) -> bool:
    """Keep autogenerate to our own tables: Optuna's share the database and must never be dropped."""
    return type_ != "table" or name in Base.metadata.tables


def _run(connection: Connection) -> None:
    """Configure the context on one connection and run the pending migrations."""
    context.configure(connection=connection, target_metadata=Base.metadata, version_table=VERSION_TABLE,
                      include_name=ours, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Use the caller's connection (Store) if given, else build an engine from the config's URL."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "sqlite:///results.db")
    with engine.connect() as conn:
        _run(conn)
        conn.commit()
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=context.config.get_main_option("sqlalchemy.url"), target_metadata=Base.metadata,
                      version_table=VERSION_TABLE, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
