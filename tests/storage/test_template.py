"""The harness's migrated template: a test database copied from it equals one Alembic migrated.

`tests.harness.database()` runs Alembic once per process and copies the result into every test
database (a file copy on SQLite, a replay of Alembic's statements into a new schema on
PostgreSQL). These tests hold the copy to a real migration, so the shortcut cannot drift
from what `cosigner migrate` builds.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from storage import raw
from storage.database import Database, head_revision
from tests.harness import REAL_MIGRATIONS_ENV, database


def _plain(value: Any) -> Any:
    """`value` with SQL expressions (a partial index's WHERE) as their text, to compare."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, sa.ClauseElement):
        return str(value)
    return value


def _each(found: list[Any]) -> list[str]:
    return sorted(repr(_plain(item)) for item in found)


def _describe(conn: sa.Connection) -> dict[str, Any]:
    """Everything a migration decides, read back from the database's own catalog."""
    insp = sa.inspect(conn)
    tables: dict[str, Any] = {}
    for name in sorted(insp.get_table_names()):
        tables[name] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], str(c.get("default")), c.get("autoincrement"))
                for c in insp.get_columns(name)
            ],
            "primary key": _plain(insp.get_pk_constraint(name)),
            "foreign keys": _each(insp.get_foreign_keys(name)),
            "indexes": _each(insp.get_indexes(name)),
            "unique": _each(insp.get_unique_constraints(name)),
            "checks": _each(insp.get_check_constraints(name)),
            "rows": sorted(map(repr, conn.execute(sa.text(f'SELECT * FROM "{name}"')).all())),
        }
    described: dict[str, Any] = {"tables": tables}
    if conn.dialect.name == "sqlite":
        described["sqlite_master"] = conn.execute(
            sa.text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        ).all()
    else:
        here = "schemaname = current_schema()"
        described["indexdefs"] = conn.execute(
            sa.text(
                "SELECT indexname, replace(indexdef, current_schema() || '.', '') "
                f"FROM pg_indexes WHERE {here} ORDER BY indexname"
            )
        ).all()
        described["constraints"] = conn.execute(
            sa.text(
                "SELECT c.conname, t.relname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_class t ON t.oid = c.conrelid "
                "WHERE c.connamespace = current_schema()::regnamespace ORDER BY 1, 2"
            )
        ).all()
        described["sequences"] = conn.execute(
            sa.text(
                "SELECT sequencename, data_type::text, start_value, increment_by, last_value "
                f"FROM pg_sequences WHERE {here} ORDER BY 1"
            )
        ).all()
        described["relations"] = conn.execute(
            sa.text(
                "SELECT relname, relkind FROM pg_class "
                "WHERE relnamespace = current_schema()::regnamespace ORDER BY 1"
            )
        ).all()
    return described


async def _described(db: Database) -> dict[str, Any]:
    async with raw.read(db) as conn:
        return await conn.run_sync(_describe)


async def test_a_copied_template_equals_a_real_migration(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with database(db_kind) as copied:
        from_template = await _described(copied)
        assert await copied.revision() == head_revision()
    monkeypatch.setenv(REAL_MIGRATIONS_ENV, "1")
    async with database(db_kind) as migrated:
        from_alembic = await _described(migrated)
        assert await migrated.revision() == head_revision()
    assert from_template["tables"]["alembic_version"]["rows"] == [repr((head_revision(),))]
    assert "approvals" in from_template["tables"]  # the description describes a real schema
    assert from_template == from_alembic


async def test_each_copy_is_its_own_database(db_kind: str) -> None:
    async with database(db_kind) as first, database(db_kind) as second:
        async with raw.write(first) as conn:
            await conn.execute(
                sa.text("INSERT INTO flags (namespace, key, value, created_at) VALUES ('t', 'k', 'v', 1)")
            )
        async with raw.read(second) as conn:
            assert (await conn.execute(sa.text("SELECT count(*) FROM flags"))).scalar() == 0
    async with database(db_kind) as third, raw.read(third) as conn:
        assert (await conn.execute(sa.text("SELECT count(*) FROM flags"))).scalar() == 0
