"""A step-up request asked in Slack or by text: the inbox lists it under "Asked of you in
Slack" / "Texted to your phone" with "Approve with a passkey", and so does its page, for its
approvers only (the step-up page checks the same); a request without step-up offers no link."""

from __future__ import annotations

from typing import Any

from tests.inbox.world import SENDER, World, inbox_world

SLACK_POLICY = """
[tools.wire_funds]
kind = "danger"
approvers = ["requester"]
step_up = true

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""
TEXT_POLICY = f"""
[tools.wire_funds]
kind = "danger"
step_up = true

[tenants.acme]
sms_from = "{SENDER}"
admins = {{ dashboard = ["ada@acme.example"] }}
"""
PHONE = "+15550100200"
SLACK = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U0ADMIN"}


async def ask(w: World, key: str, tool: str, call: str, surface: dict[str, Any]) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": "run_l",
            "toolCallId": call,
            "toolName": tool,
            "parameters": {"amountCents": 4_500_000},
            "surface": surface,
        },
    )
    assert r.status_code == 201, r.text
    aid = str(r.json()["approvalId"])
    await w.h.delivered(aid)
    return aid


def link(aid: str) -> str:
    return f'href="/inbox/approvals/{aid}/step-up">Approve with a passkey</a>'


async def test_a_slack_step_up_request_offers_the_passkey_to_its_approver_in_the_list_and_on_its_page() -> (
    None
):
    async with inbox_world(SLACK_POLICY, slack=True) as w:
        key = await w.h.create_tenant("acme")
        wire = await ask(w, key, "wire_funds", "s1", SLACK)
        refund = await ask(w, key, "issue_refund", "s2", SLACK)
        await w.sign_in(w.h.client, "U0ADMIN")
        listed = (await w.h.client.get("/inbox/")).text.split("Asked of you in Slack")[1]
        assert wire in listed and refund in listed
        assert link(wire) in listed and link(refund) not in listed
        assert link(wire) in (await w.h.client.get(f"/inbox/approvals/{wire}")).text
        assert "Approve with a passkey" not in (await w.h.client.get(f"/inbox/approvals/{refund}")).text
        # The link leads where the approver may answer: the step-up page, not a refusal.
        assert (await w.h.client.get(f"/inbox/approvals/{wire}/step-up")).status_code == 200
        # Bob sees the request in the tenant, but it is not his to answer: no link.
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            page = (await bob.get(f"/inbox/approvals/{wire}")).text
            assert wire in page and "Approve with a passkey" not in page
            assert (await bob.get(f"/inbox/approvals/{wire}/step-up")).status_code == 404


async def test_a_texted_step_up_request_offers_the_passkey_to_the_verified_number() -> None:
    async with inbox_world(TEXT_POLICY, texts=True) as w:
        w.emu.openid.add_person("U0ADA2", "Ada Phone", "ada@phone.example", phone=PHONE)
        key = await w.h.create_tenant("acme")
        aid = await ask(w, key, "wire_funds", "t1", {"type": "sms", "phone": PHONE})
        await w.sign_in(w.h.client, "U0ADA2")
        texted = (await w.h.client.get("/inbox/")).text.split("Texted to your phone")[1]
        assert aid in texted and link(aid) in texted
        assert link(aid) in (await w.h.client.get(f"/inbox/approvals/{aid}")).text
        assert (await w.h.client.get(f"/inbox/approvals/{aid}/step-up")).status_code == 200
