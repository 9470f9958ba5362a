"""After an approver edits a quorum's call, every number that was texted an earlier version
(here staff, by an escalation) is texted the edited call once, by a due job: a YES given
before that text is refused (the reply says the edited call is texted), a YES after it
counts, a restart between the edit and the job neither loses nor repeats the text, and an
opted-out number gets nothing. Through the Twilio emulator and really signed texts, on
SQLite and PostgreSQL; time moves by the app's clock, and several app instances share one
database as replicas (or a restarted server) do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa

from contracts.enums import JobKind
from cosigner.digest import parameters_digest
from storage import jobs
from storage.database import Database
from storage.tables import jobs as jobs_table
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.harness import Harness, ManualClock, cosigner_app, database, until, until_async
from tests.surfaces.sms.test_quorum_edit import EDITED, ask, edit_on_dashboard

ACCOUNT = "AC" + "f" * 32
TOKEN = "quorum-retext-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
STAFF = "+15550000007"
STAFF2 = "+15550000008"
MINUTE = 60.0
POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
editable = ["amountCents"]
timeout = "1h"
escalate = [{{ after = "20m", to = "staff" }}]

[staff]
sms = ["{STAFF}", "{STAFF2}"]

[tenants.acme]
sms_from = "{BOT}"
admins = {{ dashboard = ["u_ann", "u_bob"] }}
"""


@asynccontextmanager
async def instance(
    db: Database, emu: TwilioEmulator, clock: ManualClock, *, workers: bool = True
) -> AsyncIterator[tuple[Harness, TwilioCaller]]:
    """One server on the shared database (its job worker running only with `workers`)."""
    config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
    surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
    async with cosigner_app(POLICY, db=db, surfaces=surfaces, run_workers=workers, clock=clock) as h:
        yield h, TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


async def trail(h: Harness, key: str, aid: str) -> list[dict[str, Any]]:
    r = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
    events: list[dict[str, Any]] = r.json()["events"]
    return events


async def retext_jobs(db: Database, aid: str) -> list[tuple[str, float | None]]:
    """(payload, done_at) of the approval's retext jobs."""

    def read(tx: Any) -> list[tuple[str, float | None]]:
        rows = tx.conn.execute(
            sa.select(jobs_table.c.payload, jobs_table.c.done_at).where(
                jobs_table.c.approval_id == aid, jobs_table.c.kind == JobKind.RETEXT.value
            )
        ).all()
        return [(r.payload, r.done_at) for r in rows]

    return await db.run_read(read)


async def escalated_to_staff(h: Harness, emu: TwilioEmulator, key: str, aid: str) -> str:
    """Let the request escalate to staff, until its texts are recorded; the text staff got."""
    h.advance(20 * MINUTE)

    async def recorded() -> bool:
        return any(e["event"] == "escalation_delivered" for e in await trail(h, key, aid))

    await until_async(recorded)
    (texted,) = emu.texts_to(STAFF)
    assert len(emu.texts_to(STAFF2)) == 1
    assert "amountCents=40000" in texted.body and "2 approvers must say YES" in texted.body
    return texted.body


async def test_edited_call_is_texted_once_across_a_restart_and_only_its_yes_counts(db_kind: str) -> None:
    clock = ManualClock()
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu, database(db_kind) as db:
        async with instance(db, emu, clock) as (h, _):
            key = await h.create_tenant("acme")
            aid = await ask(h, key)
            first = await escalated_to_staff(h, emu, key, aid)

        # The edit lands on a server whose worker is not running (it stops right after).
        async with instance(db, emu, clock, workers=False) as (h, phone):
            await edit_on_dashboard(h, key, aid)
            assert [(p, done) for p, done in await retext_jobs(db, aid)] == [
                (json.dumps({"digest": parameters_digest(EDITED)}), None)
            ]
            # A YES now answers the text staff has, which showed the call before the edit.
            reply = await phone.text(STAFF, BOT, "YES")
            assert reply.status_code == 200
            assert "was edited by an approver after it was texted to you" in reply.text, reply.text
            assert "The edited call has been texted to you (or will be in a moment)" in reply.text
            assert len(emu.texts_to(STAFF)) == 1  # nothing texted by the stopped worker

        # Restarted: the job is still due, and texts the edited call to each number once.
        async with instance(db, emu, clock) as (h, phone):
            texts = await until(lambda: len(emu.texts_to(STAFF)) == 2 and emu.texts_to(STAFF))
            await until(lambda: len(emu.texts_to(STAFF2)) == 2)
            edited = texts[1].body
            code = first.split(":")[0].removeprefix("Cosigner request ")
            assert edited.startswith(f"Cosigner request {code}: approve issue_refund?"), edited
            assert "(edited by an approver: this call, not the agent's)" in edited
            assert "\nParams: amountCents=4000, orderId=ord_1\nChanged: amountCents 40000->4000.\n" in edited
            assert "2 approvers must say YES" in edited
            await until_async(lambda: _all_done(db, aid))

            # The same version queued again (another replica's copy, a retried attempt): no text.
            now = clock()
            await db.run_write(
                lambda tx: jobs.queue(
                    tx, JobKind.RETEXT, aid, jobs.Version(parameters_digest(EDITED)), now, now + 60
                )
            )
            h.advance(1)
            await until_async(lambda: _all_done(db, aid, count=2))
            assert len(emu.texts_to(STAFF)) == 2 and len(emu.texts_to(STAFF2)) == 2
            events = [e for e in await trail(h, key, aid) if e["event"] == "edit_texted"]
            assert [(e["data"]["texted"], e["data"]["digest"]) for e in events] == [
                ([STAFF, STAFF2], parameters_digest(EDITED))
            ]

            answered = await phone.text(STAFF, BOT, "YES")
            assert answered.status_code == 200 and "Not accepted" not in answered.text, answered.text
            body = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
            assert body["status"] == "approved" and body["parameters"] == EDITED
            assert [(a["by"], a["surface"]) for a in body["approvals"]] == [
                ("u_ann", "dashboard"),
                (STAFF, "sms"),
            ]
            assert body["digest"] == parameters_digest(EDITED)
            refused = [e for e in await trail(h, key, aid) if e["event"] == "decision_refused"]
            assert [(e["actor"]["userId"], e["data"]["code"]) for e in refused] == [
                (STAFF, "PARAMETERS_MISMATCH")
            ]


async def _all_done(db: Database, aid: str, count: int = 1) -> bool:
    found = await retext_jobs(db, aid)
    return len(found) == count and all(done is not None for _, done in found)


async def test_a_running_server_texts_the_edit_at_once_and_its_yes_counts(db_kind: str) -> None:
    clock = ManualClock()
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu, database(db_kind) as db:
        async with instance(db, emu, clock) as (h, phone):
            key = await h.create_tenant("acme")
            aid = await ask(h, key)
            await escalated_to_staff(h, emu, key, aid)
            await edit_on_dashboard(h, key, aid)
            (_, edited) = await until(lambda: len(emu.texts_to(STAFF2)) == 2 and emu.texts_to(STAFF2))
            assert "amountCents=4000," in edited.body
            # The version is recorded for the number once Twilio took the text (until then a
            # YES still answers the text before it, and is refused).
            await until_async(lambda: _all_done(db, aid))
            answered = await phone.text(STAFF2, BOT, "YES")
            assert "Not accepted" not in answered.text, answered.text
            body = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
            assert body["status"] == "approved"
            assert sorted(a["by"] for a in body["approvals"]) == sorted(["u_ann", STAFF2])


async def test_an_opted_out_number_is_not_texted_the_edited_call(db_kind: str) -> None:
    clock = ManualClock()
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu, database(db_kind) as db:
        async with instance(db, emu, clock) as (h, _):
            key = await h.create_tenant("acme")
            aid = await ask(h, key)
            await escalated_to_staff(h, emu, key, aid)
            # Twilio told us of a STOP this number sent elsewhere (error 21610 records it).
            await h.desk.sms_store.set_opted_out(STAFF2, True)
            await edit_on_dashboard(h, key, aid)
            await until(lambda: len(emu.texts_to(STAFF)) == 2)
            await until_async(lambda: _all_done(db, aid))
            assert len(emu.texts_to(STAFF2)) == 1
            (event,) = [e for e in await trail(h, key, aid) if e["event"] == "edit_texted"]
            assert event["data"]["texted"] == [STAFF]
            assert event["data"]["problems"] == ["…0008 cannot be texted (opted out by STOP)"]
