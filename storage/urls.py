"""What a database URL names: its backend, the default SQLite file, the URL with its
password masked, and the error of a URL Cosigner does not run on."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url


def default_sqlite_url(directory: str | Path = ".") -> str:
    """The default database: a SQLite file in the working directory."""
    return f"sqlite+aiosqlite:///{Path(directory) / 'cosigner.db'}"


def database_backend(url: str) -> str | None:
    """The database a URL names (`sqlite`, `postgresql`, ...), or None when it does not parse
    (`Database` says why)."""
    try:
        return make_url(url).get_backend_name()
    except sa.exc.ArgumentError:
        return None


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"


def missing_sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names when it does not exist yet (None otherwise, or if unparseable)."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return None  # Database() reports it
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        if not Path(parsed.database).is_file():
            return parsed.database
    return None


class DatabaseUrlError(ValueError):
    """COSIGNER_DATABASE_URL names a driver Cosigner does not run on."""
