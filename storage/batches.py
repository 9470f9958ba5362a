"""Batch cards: where the card of a group of waiting requests is, and what its buttons list.

One row per group (`key`, made by `bot.approvals.batches`): its conversation and message,
and `listed`, the (approval id, digest) pairs the card's buttons answer now (empty once the
card was withdrawn). A press is found by the message it came from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from contracts.batches import Listed
from contracts.enums import SurfaceType
from storage import ledger
from storage.records import Record
from storage.tables import batch_cards
from storage.work import Work


@dataclass(frozen=True)
class BatchCard:
    """A posted batch card: its group, tenant, where it is, and what its buttons list."""

    key: str
    tenant: str
    surface: SurfaceType
    conversation: str
    message_ref: str
    place: str  # the delivery key of the requests it lists (`slack:C…`)
    listed: Listed


def _card(row: sa.Row[tuple[object, ...]] | None) -> BatchCard | None:
    if row is None:
        return None
    m = row._mapping
    listed = tuple((str(a), str(d)) for a, d in json.loads(str(m["listed"])))
    return BatchCard(
        key=str(m["key"]),
        tenant=str(m["tenant"]),
        surface=SurfaceType(str(m["surface"])),
        conversation=str(m["conversation"]),
        message_ref=str(m["message_ref"]),
        place=str(m["place"]),
        listed=listed,
    )


def find(tx: Work, key: str) -> BatchCard | None:
    """The group's card, if one was posted."""
    return _card(tx.conn.execute(sa.select(batch_cards).where(batch_cards.c.key == key)).first())


def at_message(tx: Work, conversation: str, message_ref: str) -> BatchCard | None:
    """The batch card that is this message, if it is one."""
    q = sa.select(batch_cards).where(
        batch_cards.c.conversation == conversation, batch_cards.c.message_ref == message_ref
    )
    return _card(tx.conn.execute(q).first())


def save(tx: Work, card: BatchCard, now: float) -> None:
    """Record where the group's card is and what its buttons list now."""
    values = {
        "tenant": card.tenant,
        "surface": card.surface.value,
        "conversation": card.conversation,
        "message_ref": card.message_ref,
        "place": card.place,
        "listed": json.dumps([list(pair) for pair in card.listed], separators=(",", ":")),
        "updated_at": now,
    }
    done = tx.conn.execute(sa.update(batch_cards).where(batch_cards.c.key == card.key).values(**values))
    if done.rowcount == 0:
        tx.conn.execute(sa.insert(batch_cards).values(key=card.key, **values))


def waiting_at(tx: Work, delivery_key: str, limit: int = 200) -> list[Record]:
    """The pending requests delivered at `delivery_key` (`slack:C…`), oldest first, with the
    approvals counted toward their quorums."""
    found = ledger.by_delivery(tx, delivery_key, pending=True, limit=limit)
    return [ledger.with_votes(tx, rec) for rec in reversed(found)]
