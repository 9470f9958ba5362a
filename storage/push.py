"""Web Push subscriptions (`push_subscriptions`) and the sealed VAPID key pair (`flags`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from storage.ledger import get_flag, insert_ignore
from storage.tables import flags, push_subscriptions
from storage.work import Work

VAPID = "vapid"  # the flags namespace of the key pair
VAPID_KEY = "private"  # its one key: the sealed PEM of the private key


@dataclass(frozen=True)
class Subscription:
    """One browser's subscription: where its push service takes messages, and its keys."""

    endpoint: str
    p256dh: str
    auth: str


def subscribe(tx: Work, ids: Sequence[str], sub: Subscription, issuer: str, subject: str, now: float) -> None:
    """Store `sub` for each id of the signed-in person (replacing an earlier copy of it)."""
    tx.conn.execute(push_subscriptions.delete().where(push_subscriptions.c.endpoint == sub.endpoint))
    for approver in dict.fromkeys(ids):
        tx.conn.execute(
            push_subscriptions.insert().values(
                approver=approver,
                endpoint=sub.endpoint,
                p256dh=sub.p256dh,
                auth=sub.auth,
                issuer=issuer,
                subject=subject,
                created_at=now,
            )
        )


def unsubscribe(tx: Work, endpoint: str, issuer: str, subject: str) -> bool:
    """Remove a browser's subscription, if it is this person's; True when one was."""
    t = push_subscriptions
    done = tx.conn.execute(
        t.delete().where(t.c.endpoint == endpoint, t.c.issuer == issuer, t.c.subject == subject)
    )
    return bool(done.rowcount)


def forget(tx: Work, endpoint: str) -> None:
    """Delete a subscription the push service says is gone (404, 410)."""
    tx.conn.execute(push_subscriptions.delete().where(push_subscriptions.c.endpoint == endpoint))


def devices_for(tx: Work, approvers: Sequence[str]) -> list[Subscription]:
    """Every subscription of a person with one of these ids, each browser once."""
    if not approvers:
        return []
    t = push_subscriptions
    rows = tx.conn.execute(
        sa.select(t.c.endpoint, t.c.p256dh, t.c.auth).where(t.c.approver.in_(list(approvers)))
    ).all()
    found = {r.endpoint: Subscription(r.endpoint, r.p256dh, r.auth) for r in rows}
    return sorted(found.values(), key=lambda s: s.endpoint)


def vapid_key(tx: Work) -> str | None:
    """The sealed VAPID private key, if one was made."""
    return get_flag(tx, VAPID, VAPID_KEY)


def keep_vapid_key(tx: Work, sealed: str, now: float, *, replace: bool = False) -> str:
    """Store `sealed` unless a key is kept already (or `replace`); the key kept now. A
    replaced key drops every subscription: browsers subscribed to the old public key."""
    if replace:
        tx.conn.execute(flags.delete().where(flags.c.namespace == VAPID, flags.c.key == VAPID_KEY))
        tx.conn.execute(push_subscriptions.delete())
    insert_ignore(tx, flags, {"namespace": VAPID, "key": VAPID_KEY, "value": sealed, "created_at": now})
    return get_flag(tx, VAPID, VAPID_KEY) or sealed
