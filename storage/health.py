"""What `cosigner doctor` asks of the database, changing nothing: whether the SQLite file can
be made or written where the URL says, how the schema's revision compares with this code's,
and what time the database server reads.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from storage.database import MIGRATIONS, Database
from storage.work import Work

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for another database or a URL that does not parse."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def sqlite_unusable(path: Path) -> str | None:
    """Why Cosigner could not create or write the SQLite database at `path`, or None.

    SQLite writes its `-wal` and `-shm` files beside the database, so the folder must be
    writable as well as the file; a missing folder is created (so its nearest existing
    ancestor must be a writable folder)."""
    if path.exists():
        if not path.is_file():
            return f"{path} is not a file"
        if not os.access(path, os.R_OK | os.W_OK):
            return f"{path} cannot be read and written by this user"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder, so {path} cannot be created there"
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"{folder} is not writable by this user "
            "(SQLite keeps its -wal and -shm files beside the database)"
        )
    return None


class SchemaStanding(enum.Enum):
    """How the database's schema revision stands against the newest this code knows."""

    CURRENT = "current"
    EMPTY = "empty"  # never migrated
    BEHIND = "behind"  # an older revision this code can upgrade
    UNKNOWN = "unknown"  # a revision this code does not know: a newer version migrated it


@dataclass(frozen=True)
class Schema:
    """The database's schema revision, this code's newest, and how they stand."""

    revision: str | None
    head: str | None
    standing: SchemaStanding


def _scripts() -> ScriptDirectory:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg)


async def schema(db: Database) -> Schema:
    """Where the database's schema stands (it is read, never changed)."""
    from alembic.util import CommandError

    revision = await db.revision()
    scripts = _scripts()
    head = scripts.get_current_head()
    if revision is None:
        return Schema(None, head, SchemaStanding.EMPTY)
    if revision == head:
        return Schema(revision, head, SchemaStanding.CURRENT)
    try:
        known = scripts.get_revision(revision) is not None
    except CommandError:  # alembic's ResolutionError: no such revision here
        known = False
    return Schema(revision, head, SchemaStanding.BEHIND if known else SchemaStanding.UNKNOWN)


def _server_time(tx: Work) -> float:
    if tx.conn.dialect.name == "postgresql":
        # clock_timestamp(): the time now, not the start of the transaction as now() is.
        return float(tx.conn.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
    return float(tx.conn.execute(sa.text("SELECT (julianday('now') - 2440587.5) * 86400.0")).scalar_one())


async def server_time(db: Database) -> float:
    """The database server's clock, in UNIX seconds."""
    return await db.run_read(_server_time)
