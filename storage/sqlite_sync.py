"""How SQLite syncs a commit (`COSIGNER_SQLITE_SYNC`), apart from the database handle so that
reading the settings does not load SQLAlchemy."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SqliteSync"]


class SqliteSync(StrEnum):
    """How SQLite syncs a commit to disk (`PRAGMA synchronous`, in WAL mode).

    NORMAL: a commit survives Cosigner crashing or being killed, and the database is never
    corrupted, but the last commits before a power cut or an operating-system crash may be
    lost (SQLite syncs the write-ahead log at checkpoints). FULL: the log is synced at every
    COMMIT, so a commit is on disk before anyone is answered; transactions committed
    together (group commit) share one sync.
    """

    NORMAL = "NORMAL"
    FULL = "FULL"
