"""Email through a real SMTP server on loopback (aiosmtpd) that records what it accepts.

A request routed to the tenant admins' addresses is one message: both parts show the call
as a card does (masked values, cut values, the notice), one link to the request's inbox
page, no List-Unsubscribe; what the server said is on the audit chain. A server that
refuses for now, is slow or drops the connection is retried with backoff by the job worker;
one that refuses for good denies the request, unless the policy escalates it. The reminder
and the escalation are emails too. Time moves by the app's manual clock.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from surfaces.email import EmailAdapter, EmailConfig
from tests.databases import DESK, postgres_elsewhere
from tests.harness import Harness, ManualClock, cosigner_app, until, until_async
from tests.mailbox import Running, smtp_server

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK)

PUBLIC = "https://cosigner.example.com"
SENDER = "cosigner@acme.example"
ADA, CY, OPS = "ada@acme.example", "cy@acme.example", "ops@operator.example"
MINUTE = 60.0
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

POLICY = f"""
[defaults]
timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
redact = ["cardToken"]

[tools.wire_money]
kind = "danger"
approvers = ["tenant_admins"]
remind_after = "10m"

[tools.close_account]
kind = "danger"
approvers = ["requester"]
escalate = [{{ after = "20m", to = "tenant_admins" }}]

[tools.purge_backups]
kind = "danger"
approvers = ["tenant_admins"]
escalate = [{{ after = "20m", to = "staff" }}]

[tenants.acme]
admins = {{ email = ["{ADA}", "{CY}"] }}

[staff]
email = ["{OPS}"]
"""


@asynccontextmanager
async def mail_app(
    server: Running, db_kind: str = "sqlite", *, smtp_timeout: float = 5.0, **settings: Any
) -> AsyncIterator[Harness]:
    clock = ManualClock()
    config = EmailConfig(
        host="127.0.0.1",
        port=server.port,
        implicit_tls=False,
        sender=SENDER,
        public_url=PUBLIC,
        timeout=smtp_timeout,
    )
    surfaces = [lambda desk: EmailAdapter(config, desk, clock)]
    async with cosigner_app(
        POLICY, surfaces=surfaces, database_kind=db_kind, clock=clock, public_url=PUBLIC, **settings
    ) as h:
        yield h


async def ask(h: Harness, key: str, tool: str = "issue_refund", /, **parameters: Any) -> str:
    r = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": f"c_{tool}",
            "toolName": tool,
            "parameters": parameters or {"amountCents": 12900},
            "reason": "the customer <b>asked</b> twice",
            "surface": {"type": "dashboard", "userId": "u_requester"},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def events(h: Harness, key: str, approval_id: str, name: str) -> list[dict[str, Any]]:
    body = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()
    return [e for e in body["events"] if e["event"] == name]


async def status(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return body


async def test_the_request_is_one_message_with_both_parts_masked_values_and_one_link(db_kind: str) -> None:
    with smtp_server() as server:
        async with mail_app(server, db_kind) as h:
            key = await h.create_tenant("acme")
            long_note = "n" * 450
            approval_id = await ask(
                h, key, amountCents=12900, cardToken="4111 1111 1111 1111", memo=f"see {JWT}", note=long_note
            )
            (got,) = await until(lambda: server.box.received)
            msg = got.message
            # The envelope names both admins; the headers name neither.
            assert got.sender == SENDER and sorted(got.recipients) == [ADA, CY]
            assert msg["To"] == "undisclosed-recipients:;" and msg["From"] == SENDER
            assert msg["Subject"] == "Approval needed: issue_refund (acme)"
            assert msg["Auto-Submitted"] == "auto-generated" and msg["X-Cosigner-Approval"] == approval_id
            assert msg["Message-ID"].endswith("@acme.example>")
            assert msg["List-Unsubscribe"] is None and msg["Reply-To"] is None
            text, page = got.part("plain"), got.part("html")
            link = f"{PUBLIC}/inbox/approvals/{approval_id}"
            for part in (text, page):
                # Policy redaction, a masked credential, a cut value, and the notice that says so.
                assert "[REDACTED]" in part and "4111" not in part
                assert "[hidden: JWT" in part and JWT not in part
                assert "[+252 chars cut]" in part and "n" * 201 not in part
                assert "12900" in part
                assert "1 value partly hidden, 1 value cut: the inbox shows the whole call" in part
                assert "not an approval and signs nobody in" in part
                # One link, to the request's page, carrying nothing but the id.
                assert re.findall(r"https?://[^\s\"<]+", part) == [link]
            assert "<b>" not in page and "&lt;b&gt;asked&lt;/b&gt;" in page
            assert "the customer <b>asked</b> twice" in text
            (sent,) = await until_async(lambda: events(h, key, approval_id, "email_sent"))
            assert sorted(sent["data"]["to"]) == [ADA, CY] and sent["data"]["messageId"] == msg["Message-ID"]
            # Told by email, still pending: the answer is given in the inbox.
            assert (await status(h, key, approval_id))["status"] == "pending"


async def test_a_refused_recipient_is_recorded_and_the_others_get_it() -> None:
    with smtp_server() as server:
        server.box.refuse_rcpt[CY] = "550 5.1.1 no such mailbox"
        async with mail_app(server) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            (got,) = await until(lambda: server.box.received)
            assert got.recipients == [ADA]
            (sent,) = await until_async(lambda: events(h, key, approval_id, "email_sent"))
            assert sent["data"]["to"] == [ADA] and sent["data"]["refused"] == {
                CY: "550 5.1.1 no such mailbox"
            }


@pytest.mark.parametrize(
    ("trouble", "reason"),
    [
        ("451 4.3.0 mailbox busy, try later", "the SMTP server answered 451 4.3.0 mailbox busy, try later"),
        ("drop", "the SMTP server dropped the connection"),
        ("slow", "the SMTP server did not answer in 0.2 s"),
    ],
)
async def test_a_server_failing_for_now_is_retried_with_backoff(trouble: str, reason: str) -> None:
    with smtp_server() as server:
        server.box.script = [trouble, trouble]
        async with mail_app(server, smtp_timeout=0.2) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            failed = await until_async(lambda: events(h, key, approval_id, "email_failed"))
            assert failed[0]["data"]["reason"].startswith(reason)
            assert failed[0]["data"]["retrying"] is True and failed[0]["data"]["attempt"] == 1
            assert server.box.received == []
            # Backoff: the second try one second later, the third two seconds after that.
            h.advance(1.0)
            second = await until_async(lambda: _at_least(events(h, key, approval_id, "email_failed"), 2))
            assert second[1]["data"]["attempt"] == 2 and second[1]["data"]["retrying"] is True
            h.advance(1.0)
            assert server.box.received == []
            h.advance(1.0)
            (got,) = await until(lambda: server.box.received)
            assert sorted(got.recipients) == [ADA, CY]
            await until_async(lambda: events(h, key, approval_id, "email_sent"))
            assert (await status(h, key, approval_id))["status"] == "pending"


async def _at_least(found: Any, n: int) -> list[dict[str, Any]] | None:
    got: list[dict[str, Any]] = await found
    return got if len(got) >= n else None


async def test_a_server_refusing_for_good_denies_the_request_never_approves(db_kind: str) -> None:
    with smtp_server() as server:
        server.box.script = ["554 5.7.1 relay denied"]
        async with mail_app(server, db_kind) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
            assert decided["status"] == "denied"
            assert decided["decidedBy"]["kind"] == "system"
            assert "554 5.7.1 relay denied" in str(decided)
            (failed,) = await events(h, key, approval_id, "email_failed")
            assert failed["data"]["retrying"] is False and failed["data"]["then"] == "denied: nobody was told"
            assert server.box.attempts == 1


async def test_a_server_refusing_for_good_leaves_the_request_to_its_escalation() -> None:
    with smtp_server() as server:
        server.box.script = ["554 5.7.1 relay denied"]
        async with mail_app(server) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key, "purge_backups")
            (failed,) = await until_async(lambda: events(h, key, approval_id, "email_failed"))
            assert failed["data"]["then"] == "waits for its escalation"
            assert (await status(h, key, approval_id))["status"] == "pending"
            h.advance(20 * MINUTE)
            (got,) = await until(lambda: server.box.received)
            assert got.message["Subject"] == "Escalated: approval needed: purge_backups (acme)"
            assert got.recipients == [OPS] and "to staff at" in got.part("plain")


async def test_the_reminder_is_an_email_to_the_admins_still_to_answer() -> None:
    with smtp_server() as server:
        async with mail_app(server) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key, "wire_money")
            await until(lambda: server.box.received)
            h.advance(10 * MINUTE)
            reminder = await until(lambda: server.box.received[1:])
            assert reminder[0].message["Subject"] == "Reminder: approval still needed: wire_money (acme)"
            assert sorted(reminder[0].recipients) == [ADA, CY]
            assert f"{PUBLIC}/inbox/approvals/{approval_id}" in reminder[0].part("plain")
            (reminded,) = await until_async(lambda: events(h, key, approval_id, "reminded"))
            assert reminded["data"]["sent"] is True


async def test_an_escalation_to_admins_told_by_email_is_emailed() -> None:
    with smtp_server() as server:
        async with mail_app(server) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key, "close_account")  # asked of the requester first
            h.advance(20 * MINUTE)
            (got,) = await until(lambda: server.box.received)
            assert got.message["Subject"] == "Escalated: approval needed: close_account (acme)"
            assert sorted(got.recipients) == [ADA, CY]
            assert f"{PUBLIC}/inbox/approvals/{approval_id}" in got.part("html")
            (shown,) = await until_async(lambda: events(h, key, approval_id, "escalation_delivered"))
            assert shown["data"]["conversation"] == "email"


async def test_starttls_and_auth_are_used_when_the_server_asks_for_them() -> None:
    with smtp_server(tls=True, login=("cosigner", "s3cret pw")) as server:
        clock = ManualClock()
        config = EmailConfig.from_url(f"smtp://cosigner:s3cret%20pw@127.0.0.1:{server.port}", SENDER, PUBLIC)
        good = EmailConfig(**{**config.__dict__, "tls": server.client_tls})
        async with cosigner_app(
            POLICY, surfaces=[lambda desk: EmailAdapter(good, desk, clock)], clock=clock
        ) as h:
            key = await h.create_tenant("acme")
            await ask(h, key)
            (got,) = await until(lambda: server.box.received)
            assert sorted(got.recipients) == [ADA, CY]


async def test_a_wrong_password_is_recorded_and_the_request_denied() -> None:
    with smtp_server(tls=True, login=("cosigner", "right")) as server:
        clock = ManualClock()
        config = EmailConfig.from_url(f"smtp://cosigner:wrong@127.0.0.1:{server.port}", SENDER, PUBLIC)
        bad = EmailConfig(**{**config.__dict__, "tls": server.client_tls})
        async with cosigner_app(
            POLICY, surfaces=[lambda desk: EmailAdapter(bad, desk, clock)], clock=clock
        ) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            (failed,) = await until_async(lambda: events(h, key, approval_id, "email_failed"))
            assert failed["data"]["reason"].startswith("the SMTP server answered 535")
            assert "wrong" not in str(failed)
            assert server.box.received == []


async def test_a_parameter_name_with_a_line_break_cannot_start_a_line_of_its_own() -> None:
    with smtp_server() as server:
        async with mail_app(server) as h:
            key = await h.create_tenant("acme")
            name = "x\nOpen the request in the inbox to answer: https://evil.example/"
            await ask(h, key, "issue_refund", **{name: 1})
            (got,) = await until(lambda: server.box.received)
            text = got.part("plain")
            assert '"x\\nOpen the request' in text
            assert not any(
                line.startswith("Open the request") and "evil" in line for line in text.splitlines()
            )


def test_a_message_id_is_never_masked_as_a_card_number_on_the_audit_record() -> None:
    """The standard library's Message-ID held 19 digits often enough that `email_sent`
    recorded `[hidden: card number, 19 chars]` instead of the id it sent (one run in a few)."""
    from bot.policy import redact
    from surfaces.email.message import message_id

    ids = [message_id("cosigner.example") for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    masked = [i for i in ids if redact({"messageId": i}) != {"messageId": i}]
    assert masked == []
