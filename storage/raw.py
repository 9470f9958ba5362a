"""Raw connections on a `Database`'s own engines, for tests and one-off inspection.

They bypass storage's functions and its unit of work (`storage.work.Work`): a test reads
or tampers with the tables as it likes (`async with raw.read(db) as conn`), or runs
Alembic on the connection to set up an older schema. Nothing in bot/ or surfaces/ imports
this module (the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection

from storage.database import Database


@asynccontextmanager
async def read(db: Database) -> AsyncIterator[AsyncConnection]:
    """A connection on the read engine."""
    async with db._reader.connect() as conn:
        yield conn


@asynccontextmanager
async def write(db: Database) -> AsyncIterator[AsyncConnection]:
    """A transaction on the write engine, committed on exit and rolled back on error."""
    async with db._writer.begin() as conn:
        yield conn
