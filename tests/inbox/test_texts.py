"""Requests texted by SMS or WhatsApp to the signed-in person's verified number: listed
read-only, because an answer counts only from the phone it was asked on."""

from __future__ import annotations

from typing import Any

from bot.inbox.people import person_from_claims, verified_phone
from tests.inbox.test_answers import post_answer
from tests.inbox.world import SENDER, World, inbox_world

ADA_PHONE, BOB_PHONE = "+15550000002", "+15550000003"

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
slack_team = "T0ACME"
admins = { sms = ["+15550000002"] }

[tenants.globex]
slack_team = "T0GLOBEX"
"""


async def ask(w: World, key: str, surface: dict[str, Any], call: str) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": f"run_{call}",
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"amountCents": 12900},
            "surface": surface,
        },
    )
    assert r.status_code == 201, r.text
    aid = str(r.json()["approvalId"])
    await w.h.delivered(aid)
    return aid


async def test_requests_texted_to_the_verified_number_are_listed_read_only(db_kind: str) -> None:
    async with inbox_world(POLICY, texts=True, database_kind=db_kind) as w:
        w.emu.openid.add_person("U0ADA2", "Ada Phone", "ada@phone.example", phone="+1 (555) 000-0002")
        acme, globex = await w.h.create_tenant("acme"), await w.h.create_tenant("globex")
        by_sms = await ask(w, acme, {"type": "sms", "phone": ADA_PHONE}, "s1")
        # Another tenant's run texted to the same number: she is its approver there too.
        on_whatsapp = await ask(w, globex, {"type": "whatsapp", "phone": ADA_PHONE}, "w1")
        someone_else = await ask(w, acme, {"type": "sms", "phone": BOB_PHONE}, "s2")
        done = await w.sign_in(w.h.client, "U0ADA2")
        assert done.status_code == 303
        # The sign-in asks for the phone scope, which the issuer offers; the number came from
        # userinfo (the emulated issuer, like most, keeps scope claims out of the ID token).
        start = await w.browser().get("/inbox/login")
        assert "scope=openid+email+profile+phone" in start.headers["location"]
        page = (await w.h.client.get("/inbox/")).text
        texted = page.split("Texted to your phone")[1]
        assert by_sms in texted and on_whatsapp in texted and someone_else not in page
        # Each names the Cosigner number that texted it, not her own.
        assert f"reply to the text from {SENDER} with <code>YES" in texted
        assert "reply to the text from +15550000002" not in texted
        # Its own page says the same, for the other tenant's text too, and offers no form.
        for aid in (by_sms, on_whatsapp):
            own = (await w.h.client.get(f"/inbox/approvals/{aid}")).text
            assert f"reply to the text from {SENDER} with <code>YES" in own
            assert f'action="/inbox/approvals/{aid}/answer"' not in own
        assert "On WhatsApp" in texted and "By SMS" in texted
        # Listed, not answerable here: it was asked by text.
        refused = await post_answer(w, w.h.client, by_sms, "approve")
        assert refused.status_code == 403 and "only dashboard requests" in refused.text
        assert (await w.h.client.get(f"/v1/approvals/{by_sms}", headers=w.h.auth(acme))).json()[
            "status"
        ] == "pending"
        # Her number is one of acme's SMS admins: the inbox counts her as acme's.
        assert "No tenant's policy names you" not in page


async def test_an_unverified_number_lists_nothing() -> None:
    async with inbox_world(POLICY, texts=True) as w:
        w.emu.openid.add_person(
            "U0ADA2", "Ada Phone", "ada@phone.example", phone=ADA_PHONE, phone_verified=False
        )
        acme = await w.h.create_tenant("acme")
        by_sms = await ask(w, acme, {"type": "sms", "phone": ADA_PHONE}, "s1")
        await w.sign_in(w.h.client, "U0ADA2")
        page = (await w.h.client.get("/inbox/")).text
        assert "Ada Phone" in page
        assert by_sms not in page and "Texted to your phone" not in page


def test_only_a_verified_e164_number_names_a_phone() -> None:
    assert verified_phone({"phone_number": "+1 555.000-0002", "phone_number_verified": True}) == ADA_PHONE
    assert verified_phone({"phone_number": ADA_PHONE}) is None  # not said to be verified
    assert verified_phone({"phone_number": ADA_PHONE, "phone_number_verified": "true"}) is None
    assert verified_phone({"phone_number": "+15550000002;ext=5", "phone_number_verified": True}) is None
    assert verified_phone({"phone_number": "5550000002", "phone_number_verified": True}) is None
    person = person_from_claims(
        "https://issuer.example",
        {
            "sub": "s",
            "email": "a@x.example",
            "email_verified": True,
            "phone_number": ADA_PHONE,
            "phone_number_verified": True,
        },
    )
    assert person.numbers == (ADA_PHONE, f"whatsapp:{ADA_PHONE}")
