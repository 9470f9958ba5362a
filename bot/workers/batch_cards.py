"""Batch cards kept in step with what waits: posted, updated, withdrawn by the job worker.

After a card is delivered, and after a card is updated because its request was answered
(counted or closed), the worker looks at that request's group (`bot.approvals.batches`):
with two or more requests waiting together it posts the group's batch card, or updates the
one posted, so that its buttons list exactly what waits; with fewer it withdraws the buttons.
A surface that cannot show every call whole on one card posts none (and withdraws one it
showed). A batch card never decides anything by itself: a press is checked against what
waits at that moment (`BatchAnswers`).

Refreshes of one group are serialized in this process; two replicas refreshing the same group
at the same moment could each post a card, and only the card recorded last is answerable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from bot.approvals import batch_of, group_key, listed_of, place_of, together
from contracts.batches import MIN_BATCH, Batch, BatchSurface
from contracts.enums import SurfaceType
from contracts.ports import Delivered, SurfaceAdapter
from storage import batches as batch_store
from storage import ledger
from storage.database import Database

log = logging.getLogger("cosigner.jobs")


class BatchCards:
    """Refreshes the batch card of a request's group."""

    def __init__(
        self, surfaces: Mapping[str, SurfaceAdapter], *, db: Database, clock: Callable[[], float]
    ) -> None:
        self.surfaces = surfaces
        self.db = db
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}

    async def refresh(self, approval_id: str) -> None:
        """Bring the batch card of this request's group in step with what waits; never raises
        (a batch card is a convenience: each request's own card stays the way to answer it)."""
        try:
            await self._refresh(approval_id)
        except Exception:
            log.exception("updating a batch card failed", extra={"approval_id": approval_id})

    async def _refresh(self, approval_id: str) -> None:
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        key = group_key(rec) if rec is not None else None
        place = place_of(rec) if rec is not None else None
        if rec is None or key is None or place is None or rec.route is None:
            return
        adapter = self.surfaces.get(rec.route.surface)
        if not isinstance(adapter, BatchSurface):
            return
        route = rec.route
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            waiting, card = await self.db.run_read(
                lambda tx: (batch_store.waiting_at(tx, place), batch_store.find(tx, key))
            )
            members = together(waiting, key, self.clock())
            offer = len(members) >= MIN_BATCH
            if card is None and not offer:
                return
            if card is not None and card.listed == (listed_of(members) if offer else ()):
                return  # the card lists what waits (or was withdrawn and nothing waits together)
            batch = batch_of(key, members) if offer else Batch(key, rec.tool_name, "", ())
            before = (
                Delivered(SurfaceType(card.surface), card.conversation, (card.message_ref,))
                if card is not None
                else None
            )
            shown = await adapter.show_batch(batch, route, before)
            got = shown.delivered
            if got is None or not got.message_refs:
                return
            saved = batch_store.BatchCard(
                key=key,
                tenant=rec.tenant,
                surface=SurfaceType(got.surface),
                conversation=got.conversation,
                message_ref=got.message_refs[0],
                place=place,
                listed=batch.listed if shown.offered else (),
            )
            now = self.clock()
            await self.db.run_write(lambda tx: batch_store.save(tx, saved, now))
