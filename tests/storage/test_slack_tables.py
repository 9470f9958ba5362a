"""Migrations own slack_sdk's OAuth tables: created with its columns, adopted if present."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import command
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore

from storage import raw
from storage.database import _alembic_config, head_revision
from tests.harness import database

SLACK_TABLES = {"slack_installations", "slack_bots", "slack_oauth_states"}


def slack_sdk_tables() -> sa.MetaData:
    """The tables as slack_sdk defines them (and would have created them)."""
    metadata = sa.MetaData()
    SQLAlchemyInstallationStore.build_installations_table(metadata, "slack_installations")
    SQLAlchemyInstallationStore.build_bots_table(metadata, "slack_bots")
    SQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, "slack_oauth_states")
    return metadata


def shape(conn: Any) -> dict[str, Any]:
    inspector = sa.inspect(conn)
    return {
        name: (
            [c["name"] for c in inspector.get_columns(name)],
            sorted(i["name"] for i in inspector.get_indexes(name)),
        )
        for name in sorted(SLACK_TABLES)
    }


def token_length(conn: Any) -> int | None:
    (bot_token,) = [c for c in sa.inspect(conn).get_columns("slack_bots") if c["name"] == "bot_token"]
    return getattr(bot_token["type"], "length", None)


async def test_upgrade_creates_exactly_the_tables_slack_sdk_uses(db_kind: str) -> None:
    expected = {
        table.name: ([c.name for c in table.columns], sorted(str(i.name) for i in table.indexes))
        for table in slack_sdk_tables().sorted_tables
    }
    async with database(db_kind) as db:
        async with raw.read(db) as conn:
            found = await conn.run_sync(shape)
            names = set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))
    assert found == dict(sorted(expected.items()))
    assert SLACK_TABLES <= names


async def test_tables_slack_sdk_created_before_are_adopted(db_kind: str) -> None:
    async with database(db_kind) as db:
        async with raw.write(db) as conn:  # back to the first schema, as an older Cosigner left it
            await conn.run_sync(lambda c: command.downgrade(_alembic_config(c), "0001"))
            await conn.run_sync(slack_sdk_tables().create_all)
            await conn.execute(
                sa.text(
                    "INSERT INTO slack_oauth_states (state, expire_at) VALUES ('kept', '2030-01-01 00:00:00')"
                )
            )
        await db.migrate()
        async with raw.read(db) as conn:
            kept = (await conn.execute(sa.text("SELECT state FROM slack_oauth_states"))).scalars().all()
            length = await conn.run_sync(token_length)
        assert await db.revision() == head_revision()
    assert kept == ["kept"]
    # PostgreSQL enforces lengths, so sealed tokens need the wider column; SQLite does not.
    assert length == (200 if db_kind == "sqlite" else 1000)
