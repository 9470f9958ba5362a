"""Cross-replica wake-ups on PostgreSQL: the NOTIFY channels and the LISTEN connection.

A closing transaction sends `NOTIFY <channel>, '<approval id>'` (see
`storage.ledger.notify_closed`, or the decision's own statement); every replica keeps
one LISTEN connection, opened again when it is lost, and hands each id to a callback that
wakes its local waiters. The same connection listens on a second channel, on which a
transaction that removes API keys (`storage.tenants.revoke_key`) names their tenant, so
every replica forgets the keys it had checked at once. SQLite has one process, so neither
is used there.

`listen(db, ...)` starts the listener for a database: the channels are its schema's, and
each close heard makes the database forget its copy of that approval (`storage.known`)
before the caller hears of it, so that what it caches cannot outlive what it hears.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from storage.database import Database
    from storage.known import Known

log = logging.getLogger("cosigner.notify")
CHANNEL = "cosigner_decided"
KEYS_CHANNEL = "cosigner_keys"  # shorter than CHANNEL: a schema that fits one fits both


def channel_for(schema: str | None) -> str:
    """The channel of one schema, so apps on different schemas of a database never mix."""
    return f"{CHANNEL}_{schema}" if schema else CHANNEL


def keys_channel_for(schema: str | None) -> str:
    """The channel API key removals of one schema are told on."""
    return f"{KEYS_CHANNEL}_{schema}" if schema else KEYS_CHANNEL


class Listener:
    """One asyncpg LISTEN connection that calls `on_closed(approval_id)` per notification of a
    close, and `on_keys(tenant)` per removal of API keys.

    When the connection is lost (the database restarted or failed over, or an operator
    ended the session) it is opened again at once, then after 0.5, 1, 2 … 30 s while that
    fails. Notifications sent in between are lost: the waiters' periodic recheck covers
    them, and `on_state` tells the key cache to forget what it may have missed."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._dsn = ""
        self._channel = CHANNEL
        self._keys_channel = KEYS_CHANNEL
        self._on_closed: Callable[[str], None] = lambda _id: None
        self._on_keys: Callable[[str], None] = lambda _tenant: None
        self._on_state: Callable[[bool], None] = lambda _up: None
        self._closing = False
        self._reopening: asyncio.Task[None] | None = None
        self.reconnects = 0  # how many times the connection was opened again

    async def start(
        self,
        database_url: str,
        schema: str | None,
        on_closed: Callable[[str], None],
        on_state: Callable[[bool], None] = lambda _up: None,
        on_keys: Callable[[str], None] = lambda _tenant: None,
    ) -> None:
        """Connect and listen on the schema's channels; `on_state(True)` once listening,
        `on_state(False)` when the connection is lost or closed (closes and key removals go
        unheard until it is `True` again)."""
        url = make_url(database_url).set(drivername="postgresql")
        self._dsn = url.render_as_string(hide_password=False)
        self._channel = channel_for(schema)
        self._keys_channel = keys_channel_for(schema)
        self._on_closed = on_closed
        self._on_keys = on_keys
        self._on_state = on_state
        self._closing = False
        await self._open()

    async def _open(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.add_listener(self._keys_channel, self._on_keys_notify)
            await conn.add_listener(self._channel, self._on_notify)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn
        self._on_state(True)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_closed(payload)

    def _on_keys_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_keys(payload)

    def _on_lost(self, conn: Any) -> None:
        if self._closing or conn is not self._conn:
            return
        self._conn = None
        self._on_state(False)
        log.warning("notify listener lost its connection; opening it again")
        self._reopening = asyncio.get_running_loop().create_task(self._reopen())

    async def _reopen(self) -> None:
        delay = 0.0
        while not self._closing:
            if delay:
                await asyncio.sleep(delay)
            try:
                await self._open()
            except Exception:  # the database may still be down, or refuse connections
                delay = min(max(delay * 2, 0.5), 30.0)
                log.warning("notify listener could not reconnect; retrying in %.1f s", delay)
                continue
            if self._closing:  # closed while connecting
                self._on_state(False)
                await self._conn.close()
                self._conn = None
                return
            self.reconnects += 1
            log.info("notify listener reconnected")
            return

    async def close(self) -> None:
        """Stop listening."""
        self._closing = True
        self._on_state(False)
        if self._reopening is not None:
            self._reopening.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reopening
            self._reopening = None
        if self._conn is not None:
            try:
                await self._conn.close()
            except Exception:  # closing a broken connection must not stop shutdown
                log.warning("notify listener did not close cleanly")
            self._conn = None


async def listen(
    db: Database,
    on_closed: Callable[[str], None],
    on_state: Callable[[bool], None] = lambda _up: None,
    on_keys: Callable[[str], None] = lambda _tenant: None,
) -> Listener:
    """A started `Listener` on `db`'s channels (PostgreSQL): `on_closed(approval_id)` for each
    close, `on_keys(tenant)` for each key removal, `on_state(up)` as the connection comes and
    goes; the database's copies of pending approvals are usable only while it listens."""
    listener = Listener()
    known = db.known

    def state(up: bool) -> None:
        known.listening(up)
        on_state(up)

    await listener.start(db.url, db.schema, forgetting(known, on_closed), state, on_keys)
    return listener


def forgetting(known: Known, on_closed: Callable[[str], None]) -> Callable[[str], None]:
    """`on_closed`, called once the copy of the approval heard closed is forgotten."""

    def heard(approval_id: str) -> None:
        known.forget(approval_id)
        on_closed(approval_id)

    return heard
