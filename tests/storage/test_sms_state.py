"""The SMS surface's own state: typed on the way in, stored in the rows it always used."""

from __future__ import annotations

import sqlalchemy as sa

from contracts.enums import SurfaceType
from contracts.sms import SmsStore
from storage import inbound, sms_state
from storage.sms_state import SmsState
from storage.tables import flags
from storage.work import Work
from tests.harness import ManualClock, database

ALICE = "+15550000001"
BOB = "+15550000003"
NOW = 1_700_000_000.0


def rows(tx: Work) -> set[tuple[str, str, str]]:
    return {(r.namespace, r.key, r.value) for r in tx.conn.execute(sa.select(flags))}


async def test_each_fact_keeps_the_row_an_existing_deployment_has(db_kind: str) -> None:
    async with database(db_kind) as db:

        def write(tx: Work) -> None:
            sms_state.set_opted_out(tx, ALICE, True, NOW)
            sms_state.mark_texting(tx, "apv_1", ALICE, NOW)
            sms_state.record_sent(tx, "apv_1", ALICE, "SM1", NOW)
            assert sms_state.first_outcome(tx, "apv_1", ALICE, NOW)
            assert inbound.record(tx, SurfaceType.SMS, "SM9", NOW)

        await db.run_write(write)
        assert await db.run_read(rows) == {
            ("sms_opt_out", ALICE, "1"),
            ("sms_to", f"apv_1:{ALICE}", "1"),
            ("sms_sid", "SM1", "apv_1"),
            ("sms_sent", f"apv_1:{ALICE}", "SM1"),
            ("sms_outcome", f"apv_1:{ALICE}", "1"),
            ("sms_in", "SM9", "1"),
        }


async def test_facts_read_back_and_repeat_once(db_kind: str) -> None:
    async with database(db_kind) as db:

        def write(tx: Work) -> None:
            sms_state.set_opted_out(tx, ALICE, True, NOW)
            sms_state.record_sent(tx, "apv_1", ALICE, "SM1", NOW)

        await db.run_write(write)

        def read(tx: Work) -> tuple[object, ...]:
            return (
                sms_state.opted_out(tx, ALICE),
                sms_state.sent_sid(tx, "apv_1", ALICE),
                sms_state.approval_of_sid(tx, "SM1"),
                sms_state.was_texted(tx, "apv_1", ALICE),
                inbound.seen(tx, SurfaceType.SMS, "SM9"),
            )

        assert await db.run_read(read) == (True, "SM1", "apv_1", False, False)
        await db.run_write(lambda tx: sms_state.set_opted_out(tx, ALICE, False, NOW))
        assert not await db.run_read(lambda tx: sms_state.opted_out(tx, ALICE))
        assert await db.run_write(lambda tx: sms_state.first_outcome(tx, "apv_1", ALICE, NOW))
        assert not await db.run_write(lambda tx: sms_state.first_outcome(tx, "apv_1", ALICE, NOW))
        assert await db.run_write(lambda tx: inbound.record(tx, SurfaceType.SMS, "SM9", NOW))
        assert not await db.run_write(lambda tx: inbound.record(tx, SurfaceType.SMS, "SM9", NOW))
        assert await db.run_read(lambda tx: inbound.seen(tx, SurfaceType.SMS, "SM9"))


async def test_a_text_too_long_to_show_whole_is_recorded_until_a_whole_one_replaces_it(db_kind: str) -> None:
    async with database(db_kind) as db:
        why = "request 4821 is too long to text whole (3,950 characters of the call do not fit in 15 texts)"
        await db.run_write(lambda tx: sms_state.mark_texting(tx, "apv_1", ALICE, NOW, "sha256:a", why))
        assert await db.run_read(lambda tx: sms_state.texted_unshown(tx, "apv_1", ALICE)) == why
        assert await db.run_read(lambda tx: sms_state.texted_unshown(tx, "apv_1", BOB)) is None
        # The edited call is texted whole: its answers are no longer refused for length.
        await db.run_write(lambda tx: sms_state.mark_texting(tx, "apv_1", ALICE, NOW + 1, "sha256:b"))
        assert await db.run_read(lambda tx: sms_state.texted_unshown(tx, "apv_1", ALICE)) is None


async def test_another_request_texted_lately_or_since_is_found_per_number(db_kind: str) -> None:
    async with database(db_kind) as db:

        def texts(tx: Work) -> None:
            sms_state.mark_texting(tx, "apv_a", ALICE, NOW)
            sms_state.mark_texting(tx, "apv_b", ALICE, NOW + 10)
            sms_state.mark_texting(tx, "apv_c", BOB, NOW + 20)
            sms_state.mark_texting(tx, "apv_b", ALICE, NOW + 30)  # texted again: the latest counts

        await db.run_write(texts)

        async def other(number: str, approval_id: str, since: float) -> str | None:
            return await db.run_read(lambda tx: sms_state.texted_other(tx, number, approval_id, since))

        assert await other(ALICE, "apv_b", NOW + 30 - 120) == "apv_a"  # within the window
        assert await other(ALICE, "apv_b", NOW + 200 - 120) is None  # before B's text, long ago
        assert await other(ALICE, "apv_a", NOW + 200 - 120) == "apv_b"  # texted after A's text
        assert await other(BOB, "apv_c", NOW + 20 - 120) is None  # another number's texts do not count
        # A reminder or MORE of A is a text of A: B's is then no longer the latest.
        await db.run_write(lambda tx: sms_state.shown(tx, "apv_a", ALICE, NOW + 40))
        assert await other(ALICE, "apv_a", NOW + 200 - 120) is None
        assert await other(ALICE, "apv_x", NOW + 200 - 120) is None


async def test_the_store_the_surface_is_handed_keeps_each_fact_in_its_own_transaction(db_kind: str) -> None:
    async with database(db_kind) as db:
        clock = ManualClock(NOW)
        store: SmsStore = SmsState(db, clock)
        assert not await store.message_seen("SM9")
        assert await store.mark_message_seen("SM9") and not await store.mark_message_seen("SM9")
        assert await store.message_seen("SM9")
        await store.set_opted_out(ALICE, True)
        assert await store.opted_out(ALICE) and not await store.opted_out(BOB)
        await store.set_opted_out(ALICE, False)
        assert not await store.opted_out(ALICE)

        assert not await store.was_texted("apv_1", ALICE)
        await store.mark_texting("apv_1", ALICE, "sha256:a", "too long")
        assert await store.was_texted("apv_1", ALICE)
        assert await store.texted_digest("apv_1", ALICE) == "sha256:a"
        assert await store.texted_unshown("apv_1", ALICE) == "too long"
        await store.record_sent("apv_1", ALICE, "SM1")
        assert await store.sent_sid("apv_1", ALICE) == "SM1" and await store.sent_sid("apv_1", BOB) is None
        assert await store.approval_of_sid("SM1") == "apv_1"
        assert await store.first_outcome("apv_1", ALICE) and not await store.first_outcome("apv_1", ALICE)

        # The window of `texted_other` and the time of each text are the store's clock.
        clock.advance(10)
        await store.mark_texting("apv_2", ALICE)
        assert await store.texted_other(ALICE, "apv_2", within=120) == "apv_1"
        clock.advance(200)
        assert await store.texted_other(ALICE, "apv_2", within=120) is None
        assert await store.texted_other(ALICE, "apv_1", within=120) == "apv_2"  # texted since apv_1's text
        await store.shown("apv_1", ALICE)  # a reminder of apv_1 is now its latest text
        assert await store.texted_other(ALICE, "apv_1", within=120) is None
