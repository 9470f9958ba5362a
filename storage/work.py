"""The unit of work: what storage's functions run in.

A transaction is storage's, not a connection handed upward: `Database.run_write(fn)` and
`Database.run_read(fn)` call `fn` with a `Work`, and code outside storage/ can do nothing
with it but hand it to storage's functions, which alone reach the connection inside.
"""

from __future__ import annotations

from typing import final

from sqlalchemy.engine import Connection

SCHEMA = "cosigner_schema"  # the key of a connection's `info` that holds its schema


@final
class Work:
    """A unit of work: one write transaction (`Database.run_write`) or one read
    (`Database.run_read`), owned by storage.

    Code outside storage/ receives it in the function it gives `run_write` or `run_read`
    and only hands it on to storage's functions; they reach the connection inside (`conn`).
    It is made by `Database` alone and lives as long as that call."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema the work's connection is on (`Database(schema=...)`), which
        names its NOTIFY channels; None: the default one (and always on SQLite)."""
        schema: str | None = self.conn.info.get(SCHEMA)
        return schema
