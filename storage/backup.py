"""A consistent copy of the SQLite database while `serve` writes to it, and the advice for
PostgreSQL, whose own `pg_dump` is the tool for it.

SQLite's online backup API (`sqlite3.Connection.backup`) copies every page in one step under
one read transaction: in WAL mode writers go on meanwhile, and the copy is the database as
it was at one commit, what is still in the `-wal` file included (copying the file alone
misses that). The copy is written beside PATH under a temporary name, checked
(`PRAGMA quick_check`), synced, and only then renamed to PATH, so PATH is never half a
database.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from shlex import quote as quoted
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url

from storage.health import sqlite_file
from storage.permissions import make_private

BUSY_MS = 10_000  # how long the copy waits for a write that holds the database's lock


class BackupError(Exception):
    """The backup cannot be made; the message says why and what to do."""


@dataclass(frozen=True)
class Backup:
    """A finished backup: where, how large, and the schema revision it holds."""

    path: Path
    size: int
    revision: str | None


def pg_dump_advice(url: str, destination: Path) -> str:
    """How to back up the PostgreSQL database `url` names to `destination` with pg_dump (its
    password not shown)."""
    given = make_url(url)
    target = URL.create(
        "postgresql", given.username, None, given.host, given.port, given.database, given.query
    ).render_as_string()
    return (
        "`cosigner backup` copies SQLite only; back up PostgreSQL with its own pg_dump, which reads "
        "one consistent snapshot while Cosigner serves: "
        f"pg_dump --format=custom --file={quoted(str(destination))} {quoted(target)} "
        "(the password from PGPASSWORD or ~/.pgpass; the whole database, no --table, --schema-only or "
        "--data-only). Restoring it: docs/operators.md#backup-and-restore"
    )


def backup_sqlite(url: str, destination: Path, *, force: bool = False) -> Backup:
    """Copy the SQLite database `url` names to `destination` while it may be serving.

    Refuses (`BackupError`) a missing source, a destination that exists (unless `force`), is
    a folder, or is the database itself."""
    source = sqlite_file(url)
    if source is None:
        raise BackupError("COSIGNER_DATABASE_URL does not name a SQLite file")
    if not source.is_file():
        raise BackupError(f"no database at {source}; check COSIGNER_DATABASE_URL")
    target = destination.expanduser()
    if target.is_dir():
        raise BackupError(f"{target} is a folder; give the backup's file name, e.g. {target / 'cosigner.db'}")
    if target.exists() and target.resolve() == source.resolve():
        raise BackupError(f"{target} is the database itself; give another path")
    if target.exists() and not force:
        raise BackupError(f"{target} exists; give a new path, or --force to replace it")
    if not target.parent.is_dir():
        raise BackupError(f"no folder {target.parent}; create it first")
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    try:
        make_private(partial)  # owner-only, as the database itself: it holds the same secrets
        revision = _copy(source, partial)
        _sync(partial)
        os.replace(partial, target)
        _sync(target.parent)
    except sqlite3.Error as exc:
        raise BackupError(f"the copy failed ({type(exc).__name__}: {exc})") from exc
    except OSError as exc:
        raise BackupError(f"could not write {target} ({type(exc).__name__}: {exc.strerror})") from exc
    finally:
        for leftover in (partial, *(Path(f"{partial}{s}") for s in ("-wal", "-shm", "-journal"))):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return Backup(target, target.stat().st_size, revision)


def _copy(source: Path, partial: Path) -> str | None:
    """Copy `source` into the empty file `partial` in one step; check it; its revision."""
    # mode=rw: never create a database where there was none.
    uri = f"file:{quote(str(source.resolve()))}?mode=rw"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=BUSY_MS / 1000)) as src:
        with contextlib.closing(sqlite3.connect(partial)) as dst:
            src.backup(dst)  # pages=-1: every page in one step, one consistent snapshot
            problems = [row[0] for row in dst.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise BackupError(f"the copy does not check out: {'; '.join(problems[:3])}")
            try:
                row = dst.execute("SELECT version_num FROM alembic_version").fetchone()
            except sqlite3.OperationalError:
                row = None  # never migrated
            # The copy stays a single file: nothing of it is left in a -wal beside it.
            dst.execute("PRAGMA journal_mode=DELETE")
    return str(row[0]) if row else None


def _sync(path: Path) -> None:
    """Make what was written to `path` (a file, or a folder's entries) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
