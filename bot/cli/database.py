"""Opening the database for a command: the schema checked first, a missing SQLite file refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.cli.errors import UsageError

if TYPE_CHECKING:
    from storage.database import Database


async def require_schema(db: Database) -> None:
    """SQLite is migrated in place (one process owns it); PostgreSQL must be migrated
    explicitly, once per upgrade, so replicas never race to change the schema."""
    from storage.database import head_revision
    from storage.urls import safe_url

    if db.is_sqlite:
        await db.migrate()
        return
    current, newest = await db.revision(), head_revision()
    if current != newest:
        from bot.http import ConfigurationError

        found = "no schema" if current is None else f"schema revision {current}"
        raise ConfigurationError(
            f"the database at {safe_url(db.url)} has {found}; this "
            f"Cosigner needs {newest}. Run `cosigner migrate` first."
        )


def require_file(url: str) -> None:
    """Reading commands refuse a SQLite file that does not exist rather than create an empty one."""
    from storage.urls import missing_sqlite_file

    missing = missing_sqlite_file(url)
    if missing is not None:
        raise UsageError(
            f"no database at {missing}; check COSIGNER_DATABASE_URL (`cosigner migrate` creates a new one)"
        )


async def with_db(fn: Any, *, create: bool = False) -> Any:
    """`await fn(db, settings)` on the configured database, its schema checked (`create`: a
    SQLite file that does not exist yet is made), closed after."""
    from bot.settings import load_settings
    from storage.database import Database

    settings = load_settings()
    if not create:
        require_file(settings.database_url)
    db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_sync)
    try:
        await require_schema(db)
        return await fn(db, settings)
    finally:
        await db.close()
