"""`cosigner backup PATH [--force]`: a consistent copy of the SQLite database, made while
`serve` runs; on PostgreSQL it refuses, naming the `pg_dump` command to run instead.

Restoring is copying the file back as the database while no server runs on it
(docs/operators.md#backup-and-restore).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any, usage_error: type[Exception]) -> None:
    """Add the `backup` command to the CLI's subparsers."""

    def backup(args: argparse.Namespace) -> int:
        from bot.settings import load_settings
        from storage.backup import BackupError, backup_sqlite, pg_dump_advice
        from storage.urls import DatabaseUrlError, database_backend, safe_url

        url = load_settings().database_url
        backend = database_backend(url)
        if backend == "postgresql":
            raise usage_error(pg_dump_advice(url, Path(args.path)))
        if backend != "sqlite":
            raise DatabaseUrlError(
                f"{safe_url(url)!r}: Cosigner runs on sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        try:
            made = backup_sqlite(url, Path(args.path), force=args.force)
        except BackupError as exc:
            raise usage_error(str(exc)) from exc
        revision = made.revision or "none (never migrated)"
        print(f"backed up {safe_url(url)} to {made.path}: {made.size} bytes, schema revision {revision}")
        return 0

    p = sub.add_parser(
        "backup",
        help="copy the SQLite database to PATH while it serves (PostgreSQL: names the pg_dump to run)",
    )
    p.add_argument("path", help="the backup file to write (a new file, unless --force)")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")
    p.set_defaults(fn=backup)
