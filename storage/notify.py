"""Cross-replica wake-ups on PostgreSQL: the NOTIFY channel and the LISTEN connection.

A closing transaction sends `NOTIFY <channel>, '<approval id>'` (see
`storage.approvals.notify_closed`); every replica keeps one LISTEN connection and hands
each id to a callback that wakes its local waiters. SQLite has one process, so neither
is used there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import make_url

log = logging.getLogger("cosigner.notify")
CHANNEL = "cosigner_decided"


def channel_for(schema: str | None) -> str:
    """The channel of one schema, so apps on different schemas of a database never mix."""
    return f"{CHANNEL}_{schema}" if schema else CHANNEL


class Listener:
    """One asyncpg LISTEN connection that calls `on_closed(approval_id)` per notification."""

    def __init__(self) -> None:
        self._conn: Any = None

    async def start(self, database_url: str, schema: str | None, on_closed: Callable[[str], None]) -> None:
        """Connect and listen on the schema's channel."""
        import asyncpg

        url = make_url(database_url).set(drivername="postgresql")
        self._conn = await asyncpg.connect(url.render_as_string(hide_password=False))

        def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            on_closed(payload)

        await self._conn.add_listener(channel_for(schema), on_notify)

    async def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            try:
                await self._conn.close()
            except Exception:  # closing a broken connection must not stop shutdown
                log.warning("notify listener did not close cleanly")
            self._conn = None
