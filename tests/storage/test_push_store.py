"""Web Push subscriptions and the sealed VAPID key in storage, on SQLite and PostgreSQL."""

from __future__ import annotations

from storage import push as push_store
from storage.sealing import TokenSeal
from tests.harness import database

SUB = push_store.Subscription("https://push.example/a", "p256dh-a", "auth-a")
OTHER = push_store.Subscription("https://push.example/b", "p256dh-b", "auth-b")


async def test_a_browser_is_found_by_any_id_of_its_person_once_and_forgotten_by_endpoint(
    db_kind: str,
) -> None:
    async with database(db_kind) as db:
        ids = ["U0ADA", "ada@acme.example"]
        await db.run_write(lambda tx: push_store.subscribe(tx, ids, SUB, "iss", "ada", 1.0))
        await db.run_write(
            lambda tx: push_store.subscribe(tx, ["bob@acme.example"], OTHER, "iss", "bob", 1.0)
        )
        both = await db.run_read(lambda tx: push_store.devices_for(tx, ["U0ADA", "ada@acme.example", "x"]))
        assert both == [SUB]
        # The same browser subscribed again (another person signed in on it) is theirs now.
        await db.run_write(lambda tx: push_store.subscribe(tx, ["cy@acme.example"], SUB, "iss", "cy", 2.0))
        assert await db.run_read(lambda tx: push_store.devices_for(tx, ids)) == []
        assert await db.run_read(lambda tx: push_store.devices_for(tx, ["cy@acme.example"])) == [SUB]
        # Only its own person can unsubscribe it; a gone endpoint is forgotten whoever held it.
        assert not await db.run_write(lambda tx: push_store.unsubscribe(tx, SUB.endpoint, "iss", "bob"))
        assert await db.run_write(lambda tx: push_store.unsubscribe(tx, SUB.endpoint, "iss", "cy"))
        await db.run_write(lambda tx: push_store.forget(tx, OTHER.endpoint))
        assert await db.run_read(lambda tx: push_store.devices_for(tx, ["bob@acme.example"])) == []


async def test_the_first_vapid_key_kept_wins_and_a_new_one_drops_every_subscription(db_kind: str) -> None:
    seal = TokenSeal("storage-test-secret-0123456789-abcdefghijkl")
    async with database(db_kind) as db:
        first, second = seal.seal("key one", "vapid:private"), seal.seal("key two", "vapid:private")
        assert await db.run_write(lambda tx: push_store.keep_vapid_key(tx, first, 1.0)) == first
        assert await db.run_write(lambda tx: push_store.keep_vapid_key(tx, second, 2.0)) == first
        await db.run_write(lambda tx: push_store.subscribe(tx, ["ada@acme.example"], SUB, "iss", "ada", 1.0))
        assert (
            await db.run_write(lambda tx: push_store.keep_vapid_key(tx, second, 3.0, replace=True)) == second
        )
        assert await db.run_read(push_store.vapid_key) == second
        assert await db.run_read(lambda tx: push_store.devices_for(tx, ["ada@acme.example"])) == []
