"""One person, several ids: a Slack sign-in ties the person's Slack user id and verified
email, and the policy's `[people]` ties more; separation of duties and "no one counts twice"
compare the person, whichever id they answer with."""

from __future__ import annotations

import html
from typing import Any

from surfaces.sms.caller import TwilioCaller
from tests.harness import press, until, until_async
from tests.inbox.test_answers import post_answer
from tests.inbox.world import (
    PUBLIC_URL,
    SENDER,
    SLACK_SECRET,
    TWILIO_ACCOUNT,
    TWILIO_TOKEN,
    World,
    inbox_world,
)

POLICY = """
[defaults]
timeout = "5m"

[tools.wire_funds]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
separate_duties = true

[tenants.demo]
admins = { dashboard = ["U0ALICE", "U0ADMIN", "ben@demo.example"] }
"""


async def wire(w: World, key: str, user: str) -> str:
    """The tenant's app starts a run for its signed-in `user`, which asks to wire funds."""
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "c1",
            "toolName": "wire_funds",
            "parameters": {"amountCents": 9_000_000, "iban": "DE89370400440532013000"},
            "surface": {"type": "dashboard", "userId": user},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def decision(w: World, key: str, aid: str) -> dict[str, Any]:
    r = await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_the_requester_signed_in_with_slack_never_counts_toward_her_own_quorum(db_kind: str) -> None:
    async with inbox_world(POLICY, database_kind=db_kind) as w:
        w.emu.openid.add_person("U0ALICE", "Alice", "alice@demo.example")
        w.emu.openid.add_person("U0BEN", "Ben", "ben@demo.example")
        key = await w.h.create_tenant("demo")
        # The app names Alice by her email; her Slack sign-in vouches for U0ALICE too.
        aid = await wire(w, key, "alice@demo.example")
        await w.sign_in(w.h.client, "U0ALICE")
        assert aid in (await w.h.client.get("/inbox/")).text, "she is listed as an approver"
        own = await post_answer(w, w.h.client, aid, "approve")
        assert own.status_code == 403, own.text
        assert "the requester&#39;s own Approve never counts (separate_duties)" in own.text, own.text
        assert (await decision(w, key, aid))["status"] == "pending"
        # A second admin approves through the tenant's app (the decision endpoint): one of two.
        ada = await w.h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=w.h.auth(w.h.approver_key("demo")),
            json={"decision": "approve", "userId": "U0ADMIN"},
        )
        assert ada.status_code == 200, ada.text
        body = await decision(w, key, aid)
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ADMIN"]
        # Only another person makes the quorum.
        async with w.browser() as ben:
            await w.sign_in(ben, "U0BEN")
            assert (await post_answer(w, ben, aid, "approve")).status_code == 303
        body = await decision(w, key, aid)
        assert body["status"] == "approved" and body["grant"]
        assert [a["by"] for a in body["approvals"]] == ["U0ADMIN", "ben@demo.example"]
        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        refused = [e for e in trail["events"] if e["event"] == "decision_refused"]
        assert len(refused) == 1 and refused[0]["data"]["code"] == "NOT_AN_APPROVER", refused
        assert refused[0]["actor"]["userId"] == "U0ALICE", "the audit keeps the id she answered with"


async def test_an_approver_counted_by_one_id_is_not_counted_again_by_another_her_sign_in_vouched_for(
    db_kind: str,
) -> None:
    # No [people]: the policy lists Alice twice, by email and by Slack user id, as if two people.
    twice = POLICY.replace(
        '["U0ALICE", "U0ADMIN", "ben@demo.example"]', '["U0ALICE", "alice@demo.example", "ben@demo.example"]'
    )
    async with inbox_world(twice, database_kind=db_kind) as w:
        w.emu.openid.add_person("U0ALICE", "Alice", "alice@demo.example")
        w.emu.openid.add_person("U0BEN", "Ben", "ben@demo.example")
        key = await w.h.create_tenant("demo")
        aid = await wire(w, key, "u_carol")
        await w.sign_in(w.h.client, "U0ALICE")
        assert (await post_answer(w, w.h.client, aid, "approve")).status_code == 303
        # The app answers for her by the other id: her sign-in tied the two, the vote kept both.
        again = await w.h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=w.h.auth(w.h.approver_key("demo")),
            json={"decision": "approve", "userId": "alice@demo.example"},
        )
        assert again.status_code == 403, again.text
        error = again.json()["error"]
        assert error["code"] == "NOT_AN_APPROVER" and "same person as U0ALICE" in error["message"]
        body = await decision(w, key, aid)
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ALICE"]
        async with w.browser() as ben:
            await w.sign_in(ben, "U0BEN")
            assert (await post_answer(w, ben, aid, "approve")).status_code == 303
        body = await decision(w, key, aid)
        assert body["status"] == "approved"
        assert [a["by"] for a in body["approvals"]] == ["U0ALICE", "ben@demo.example"]


# --- [people]: one person on Slack and by text ------------------------------------------

ALICE_PHONE, DAN_PHONE, EVE_PHONE = "+15550100200", "+15550100300", "+15550100400"
PEOPLE = f"""
[people]
alice = ["U0ALICE", "alice@demo.example", "{ALICE_PHONE}"]
"""
ACROSS = (
    f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.wire_funds]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
timeout = "1h"
escalate = [{{ after = "20m", to = "staff" }}]

[staff]
sms = ["{ALICE_PHONE}", "{DAN_PHONE}"]

[tenants.acme]
slack_team = "T0ACME"
sms_from = "{SENDER}"
admins = {{ slack = ["U0ALICE", "U0BOB"] }}
admin_channel = "C0ADMINS"
"""
    + PEOPLE
)


def texter(w: World) -> TwilioCaller:
    return TwilioCaller(
        w.h.client, public_url=PUBLIC_URL, account_sid=TWILIO_ACCOUNT, auth_token=TWILIO_TOKEN
    )


async def test_a_slack_approver_and_her_own_number_under_quorum_2_count_once(db_kind: str) -> None:
    async with inbox_world(ACROSS, slack=True, texts=True, database_kind=db_kind) as w:
        assert w.twilio is not None
        key = await w.h.create_tenant("acme")
        aid = await wire(w, key, "u_carol")
        (card,) = await until(lambda: [m for m in w.emu.messages if m.method == "chat.postMessage"])
        clicked = await press(
            w.h.client, card, secret=SLACK_SECRET, app_id=w.emu.app_id, user="U0ALICE", team="T0ACME"
        )
        assert clicked.status_code == 200
        body = await until_async(lambda: pending_with(w, key, aid, 1))
        assert [(a["by"], a["surface"]) for a in body["approvals"]] == [("U0ALICE", "slack")]
        # Still pending after 20 minutes: escalated to the staff's phones, hers among them.
        w.h.advance(20 * 60)
        await until(
            lambda: w.twilio is not None and w.twilio.texts_to(ALICE_PHONE) and w.twilio.texts_to(DAN_PHONE)
        )
        reply = await texter(w).text(ALICE_PHONE, SENDER, "YES")
        assert "same person as U0ALICE" in html.unescape(reply.text), reply.text
        body = await decision(w, key, aid)
        assert body["status"] == "pending" and len(body["approvals"]) == 1, "her text did not count"
        await texter(w).text(DAN_PHONE, SENDER, "YES")
        body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
        assert body["status"] == "approved"
        assert [(a["by"], a["surface"]) for a in body["approvals"]] == [
            ("U0ALICE", "slack"),
            (DAN_PHONE, "sms"),
        ]
        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        refused = [
            (e["actor"]["userId"], e["data"]["code"])
            for e in trail["events"]
            if e["event"] == "decision_refused"
        ]
        assert refused == [(ALICE_PHONE, "NOT_AN_APPROVER")], "audited with the id she answered by"


async def pending_with(w: World, key: str, aid: str, n: int) -> dict[str, Any] | None:
    body = await decision(w, key, aid)
    return body if len(body.get("approvals", [])) == n else None


BY_TEXT = (
    f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.wire_funds]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
separate_duties = true

[tenants.acme]
slack_team = "T0ACME"
sms_from = "{SENDER}"
admins = {{ sms = ["{ALICE_PHONE}", "{DAN_PHONE}", "{EVE_PHONE}"] }}
"""
    + PEOPLE
)


async def test_the_requester_answering_from_another_surface_is_refused_under_separate_duties(
    db_kind: str,
) -> None:
    async with inbox_world(BY_TEXT, slack=True, texts=True, database_kind=db_kind) as w:
        key = await w.h.create_tenant("acme")
        # Alice starts the run in Slack; the admins are asked by text, her own number among them.
        r = await w.h.client.post(
            "/v1/approvals",
            headers=w.h.auth(key),
            json={
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "wire_funds",
                "parameters": {"amountCents": 9_000_000},
                "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C0OPS", "userId": "U0ALICE"},
            },
        )
        assert r.status_code == 201, r.text
        aid = r.json()["approvalId"]
        await w.h.delivered(aid, every_message=True)
        reply = await texter(w).text(ALICE_PHONE, SENDER, "YES")
        said = html.unescape(reply.text)
        assert "the requester's own Approve never counts (separate_duties)" in said, said
        assert "approvals" not in await decision(w, key, aid)
        await texter(w).text(DAN_PHONE, SENDER, "YES")
        await texter(w).text(EVE_PHONE, SENDER, "YES")
        body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
        assert body["status"] == "approved"
        assert [a["by"] for a in body["approvals"]] == [DAN_PHONE, EVE_PHONE]


async def test_a_route_whose_approvers_are_too_few_persons_is_refused_before_anyone_is_asked() -> None:
    # Alice is listed twice on the dashboard, and [people] says it is her both times.
    policy = (
        POLICY.replace(
            '["U0ALICE", "U0ADMIN", "ben@demo.example"]', '["U0ALICE", "alice@demo.example", "U0ADMIN"]'
        )
        + PEOPLE
    )
    async with inbox_world(policy) as w:
        key = await w.h.create_tenant("demo")
        r = await w.h.client.post(
            "/v1/approvals",
            headers=w.h.auth(key),
            json={
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "wire_funds",
                "parameters": {"amountCents": 1},
                "surface": {"type": "dashboard", "userId": "U0ADMIN"},
            },
        )
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "APPROVAL_MODE_UNSUPPORTED" and error["policy"] == "tools.wire_funds.quorum"
        assert "1 distinct approver besides the requester" in error["message"]
        assert "alice (U0ALICE, alice@demo.example)" in error["message"]
