"""The SMS surface's own state: typed on the way in, stored in the rows it always used."""

from __future__ import annotations

import sqlalchemy as sa

from contracts.enums import SurfaceType
from storage import inbound, sms_state
from storage.tables import flags
from storage.work import Work
from tests.harness import database

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
