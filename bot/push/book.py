"""The subscriptions a push goes to, over the database: `contracts.reach.PushBook`."""

from __future__ import annotations

from collections.abc import Callable

from bot.push.keys import vapid_pem
from contracts.reach import Device
from storage import push as push_store
from storage.database import Database
from storage.sealing import TokenSeal


class Book:
    """Each person's subscribed browsers, and the VAPID key, in the database."""

    def __init__(self, db: Database, seal: TokenSeal, clock: Callable[[], float]) -> None:
        self.db, self.seal, self.clock = db, seal, clock

    async def devices_for(self, approvers: tuple[str, ...]) -> list[Device]:
        """Every browser of a person with one of these ids."""
        found = await self.db.run_read(lambda tx: push_store.devices_for(tx, approvers))
        return [Device(s.endpoint, s.p256dh, s.auth) for s in found]

    async def forget(self, endpoint: str) -> None:
        """Remove a subscription its push service says is gone."""
        await self.db.run_write(lambda tx: push_store.forget(tx, endpoint))

    async def vapid_pem(self) -> bytes:
        """The VAPID private key, made and sealed at first use."""
        return await vapid_pem(self.db, self.seal, self.clock())
