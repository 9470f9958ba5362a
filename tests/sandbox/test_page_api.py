"""The sandbox page's JSON API: clicks, modal submits and texts go through the real webhooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from bot.dev.sandbox import SMS_FROM, Sandbox, banner, sandbox
from tests.sandbox.delivery import shown_card

SLACK = {"type": "slack", "teamId": "T0DEMO", "channelId": "C0DEMO", "userId": "U0ALICE"}
PHONE = "+15550100200"


async def ask(
    http: httpx.AsyncClient,
    tool: str,
    parameters: dict[str, Any],
    surface: dict[str, Any] | None = None,
    call: str = "call_1",
) -> str:
    r = await http.post(
        "/v1/approvals",
        json={
            "executionId": "run_1",
            "toolCallId": call,
            "toolName": tool,
            "parameters": parameters,
            "surface": surface or SLACK,
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def state(http: httpx.AsyncClient) -> dict[str, Any]:
    r = await http.get("/sandbox/api/state")
    assert r.status_code == 200
    return dict(r.json())


async def card_of(http: httpx.AsyncClient, tool: str, *, edited: bool = False) -> dict[str, Any]:
    """The card for `tool` as the page shows it (once updated, with `edited=True`)."""
    return await shown_card(http, tool, edited=edited)


async def click(http: httpx.AsyncClient, card: dict[str, Any], action: str, who: str) -> httpx.Response:
    return await http.post(
        "/sandbox/api/click",
        json={"channel": card["channel"], "ts": card["ts"], "actionId": action, "as": who},
    )


async def test_page_and_assets_are_served(sb: Sandbox, http: httpx.AsyncClient) -> None:
    page = await http.get("/sandbox")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "/sandbox/sandbox.js" in page.text
    assert (await http.get("/sandbox/sandbox.js")).headers["content-type"].startswith("text/javascript")
    assert (await http.get("/sandbox/sandbox.css")).status_code == 200
    assert (await http.get("/sandbox/secrets.txt")).status_code == 404
    data = await state(http)
    assert data["team"] == "T0DEMO" and {p["key"] for p in data["people"]} == {
        "requester",
        "admin",
        "second_admin",
        "outsider",
        "other_workspace",
    }


async def test_approve_click_decides_and_updates_the_card(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(
        http, "issue_refund", {"orderId": "o1", "amountCents": 12900, "cardToken": "tok_secret_123"}
    )
    card = await card_of(http, "issue_refund")
    assert "tok_secret_123" not in json.dumps(card) and "[REDACTED]" in json.dumps(card)
    buttons = [b for blk in card["blocks"] if blk["type"] == "actions" for b in blk["elements"]]
    assert buttons[0]["confirm"]["title"]["text"] == "Approve this call?"
    r = await click(http, card, "cosigner.approve", "requester")
    assert r.json() == {"status": 200}
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved"
    assert decision["decidedBy"] == {
        "kind": "person",
        "surface": "slack",
        "userId": "U0ALICE",
        "teamId": "T0DEMO",
    }
    updated = await card_of(http, "issue_refund", edited=True)
    assert not [b for b in updated["blocks"] if b["type"] == "actions"]
    activity = (await state(http))["activity"]
    assert activity[-1]["route"] == "/slack/events" and activity[-1]["status"] == 200
    again = await click(http, card, "cosigner.approve", "requester")
    assert again.status_code == 409 and "buttons removed" in again.json()["error"]["message"]


async def test_outsider_and_other_workspace_are_refused_and_told_why(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(http, "issue_credit", {"orderId": "o1", "amountCents": 500})
    card = await card_of(http, "issue_credit")
    assert (await click(http, card, "cosigner.approve", "outsider")).json() == {"status": 200}
    assert (await click(http, card, "cosigner.approve", "admin")).json() == {"status": 200}
    assert (await click(http, card, "cosigner.approve", "other_workspace")).json() == {"status": 200}
    await wait_until(lambda: len(sb.slack.ephemerals) >= 3)
    notes = {e["user"]: e["text"] for e in (await state(http))["ephemerals"]}
    assert "NOT_AN_APPROVER" in notes["U0MALLORY"] and "NOT_AN_APPROVER" in notes["U0ADMIN"]
    assert "WRONG_TENANT" in notes["U0EVE"]
    assert (await http.get(f"/v1/approvals/{approval}")).json()["status"] == "pending"


async def test_admin_may_answer_a_refund(sb: Sandbox, http: httpx.AsyncClient, wait_until: Any) -> None:
    approval = await ask(http, "issue_refund", {"orderId": "o2", "amountCents": 100})
    card = await card_of(http, "issue_refund")
    await click(http, card, "cosigner.approve", "admin")
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved" and decision["decidedBy"]["userId"] == "U0ADMIN"


async def test_deny_opens_a_modal_whose_comment_reaches_the_agent(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(http, "issue_credit", {"orderId": "o1", "amountCents": 500})
    card = await card_of(http, "issue_credit")
    await click(http, card, "cosigner.deny", "requester")
    await wait_until(lambda: sb.slack.views)
    (view,) = (await state(http))["views"]
    assert view["view"]["title"]["text"] == "Deny request"
    outsider = await http.post(
        "/sandbox/api/submit", json={"viewId": view["id"], "comment": "no", "as": "outsider"}
    )
    assert "NOT_AN_APPROVER" in json.dumps(outsider.json()["errors"])
    r = await http.post(
        "/sandbox/api/submit",
        json={"viewId": view["id"], "comment": "Ask the customer first", "as": "requester"},
    )
    assert r.json()["errors"] is None
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "denied" and decision["comment"] == "Ask the customer first"
    assert (await state(http))["views"] == []


async def test_a_phone_reply_decides_an_sms_request(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(http, "send_email", {"to": "c@example.com"}, surface={"type": "sms", "phone": PHONE})
    await wait_until(lambda: sb.twilio.texts_to(PHONE))
    texts = (await state(http))["phone"]["texts"]
    assert texts[0]["phone"] == PHONE and "send_email" in texts[0]["body"]
    maybe = await http.post("/sandbox/api/text", json={"from": PHONE, "body": "maybe"})
    assert "Nothing was decided" in maybe.json()["replies"][0]
    r = await http.post("/sandbox/api/text", json={"from": PHONE, "body": " yes "})
    assert r.json()["status"] == 200
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved"
    assert decision["decidedBy"]["surface"] == "sms" and decision["decidedBy"]["userId"] == PHONE
    bodies = [t["body"] for t in (await state(http))["phone"]["texts"]]
    assert bodies[:3] == [texts[0]["body"], "maybe", maybe.json()["replies"][0]]


async def test_the_phone_switched_to_whatsapp_taps_approve(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(
        http, "send_email", {"to": "c@example.com"}, surface={"type": "whatsapp", "phone": PHONE}
    )
    await wait_until(lambda: sb.twilio.texts_to(f"whatsapp:{PHONE}"))
    shown = await state(http)
    assert f"whatsapp:{PHONE}" in shown["phone"]["numbers"]
    (text,) = [t for t in shown["phone"]["texts"] if t["phone"] == f"whatsapp:{PHONE}"]
    assert "send_email" in text["body"] and text["buttons"] == ["Approve", "Deny"]
    r = await http.post("/sandbox/api/tap", json={"sid": text["sid"], "title": "Approve"})
    assert r.json()["status"] == 200
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved" and decision["decidedBy"]["surface"] == "whatsapp"
    missing = await http.post("/sandbox/api/tap", json={"sid": "SMnope", "title": "Approve"})
    assert missing.status_code == 404


async def test_the_api_takes_json_only_and_names_bad_fields(sb: Sandbox, http: httpx.AsyncClient) -> None:
    form = await http.post("/sandbox/api/click", data={"as": "requester"})
    assert form.status_code == 415
    bad = await http.post(
        "/sandbox/api/click", json={"as": "ceo", "channel": "C", "ts": "1.1", "actionId": "x"}
    )
    assert bad.status_code == 400 and "requester" in bad.json()["error"]["message"]
    twice = await http.post(
        "/sandbox/api/click",
        content=b'{"as": "ceo", "as": "requester", "channel": "C", "ts": "1.1", "actionId": "x"}',
        headers={"Content-Type": "application/json"},
    )
    assert twice.status_code == 400 and "appears twice" in twice.json()["error"]["message"]


async def test_the_demo_key_is_rotated_on_every_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with sandbox("127.0.0.1", 0, data) as first:
        old = first.api_key
        assert (data / "demo.key").read_text().strip() == old
        text = banner(first, "127.0.0.1")
        assert old in text and f"{first.url}/sandbox" in text and "/openapi.json" in text
    async with sandbox("127.0.0.1", 0, data) as second:
        assert second.api_key != old and (data / "demo.key").read_text().strip() == second.api_key
        async with httpx.AsyncClient(base_url=second.url) as client:
            stale = await client.get("/v1/approvals/x", headers={"Authorization": f"Bearer {old}"})
            fresh = await client.get("/v1/approvals/x", headers={"Authorization": f"Bearer {second.api_key}"})
        assert stale.status_code == 401 and fresh.json()["error"]["code"] == "APPROVAL_NOT_FOUND"


async def test_the_demo_operation_is_prepared_approved_and_carried_out(
    sb: Sandbox, http: httpx.AsyncClient
) -> None:
    r = await http.post(
        "/v1/approvals",
        json={
            "executionId": "run_op",
            "toolCallId": "call_1",
            "operation": "order.refund_missing_discount",
            "request": {"orderId": "ord_4421"},
            "surface": SLACK,
        },
    )
    assert r.status_code == 201, r.text
    approval = r.json()["approvalId"]
    title = "Refund the missing discount on ord_4421"
    card = await card_of(http, title)
    assert "$129.00" in json.dumps(card) and "its claim, unverified" in json.dumps(card)
    assert (await click(http, card, "cosigner.approve", "requester")).json() == {"status": 200}
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["outcome"]["type"] == "succeeded" and decision["outcome"]["message"] == "Refunded $129.00"
    updated = await card_of(http, title, edited=True)
    assert "Refunded $129.00" in json.dumps(updated)
    assert "order.refund_missing_discount" in banner(sb, "127.0.0.1")


async def test_see_the_full_call_opens_a_paged_modal_on_the_page(
    sb: Sandbox, http: httpx.AsyncClient
) -> None:
    from tests.harness import until_async

    parameters = {"orderId": "o1", "amountCents": 12900, **{f"line_{i:02}": "x" * 990 for i in range(40)}}
    await ask(http, "issue_refund", parameters)
    card = await card_of(http, "issue_refund")
    assert "see the full call" in json.dumps(card)
    r = await click(http, card, "cosigner.full_call", "requester")
    assert r.json() == {"status": 200}

    async def views() -> list[dict[str, Any]]:
        return list((await state(http))["views"])

    (view,) = await until_async(views)
    assert view["view"]["title"]["text"] == "Full call" and "submit" not in view["view"]
    assert "Page 1 of" in json.dumps(view)
    r = await http.post(
        "/sandbox/api/view-click",
        json={"viewId": view["id"], "actionId": "cosigner.full_call_next", "as": "requester"},
    )
    assert r.json() == {"status": 200}

    async def turned() -> list[dict[str, Any]]:
        return [v for v in await views() if v["updates"] == 1]

    (view,) = await until_async(turned)
    assert "Page 2 of" in json.dumps(view)


async def test_closing_an_account_needs_two_admins_and_each_sees_only_their_own_you_approved(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    approval = await ask(http, "close_account", {"accountId": "acct_9"})
    card = await card_of(http, "close_account")
    assert card["channel"] == "C0ADMINS" and "2 distinct approvers must approve" in json.dumps(card)
    assert (await click(http, card, "cosigner.approve", "admin")).json() == {"status": 200}
    await wait_until(lambda: sb.slack.ephemerals)
    (mine,) = (await state(http))["ephemerals"]
    assert mine["user"] == "U0ADMIN" and "You approved" in mine["text"] and "1 of 2 approvals" in mine["text"]
    progress = await card_of(http, "close_account", edited=True)
    assert "Approved 1 of 2" in json.dumps(progress, ensure_ascii=False)
    assert [b for b in progress["blocks"] if b["type"] == "actions"], "Ben still has his buttons"
    assert (await http.get(f"/v1/approvals/{approval}")).json()["status"] == "pending"
    assert (await click(http, progress, "cosigner.approve", "second_admin")).json() == {"status": 200}
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved"
    assert [a["by"] for a in decision["approvals"]] == ["U0ADMIN", "U0ADMIN2"]


async def test_the_home_tab_opens_as_the_chosen_person_and_lists_what_waits(
    sb: Sandbox, http: httpx.AsyncClient
) -> None:
    await ask(http, "issue_refund", {"orderId": "ord_1", "amountCents": 9000, "cardToken": "tok_x"})
    card = await card_of(http, "issue_refund")
    r = await http.post("/sandbox/api/home", json={"as": "requester"})
    assert r.status_code == 200 and r.json() == {"status": 200}
    home = json.dumps((await state(http))["homes"]["U0ALICE"])
    assert "Waiting for you" in home and "issue_refund" in home
    assert f"archives/{card['channel']}/p{card['ts'].replace('.', '')}" in home
    # Mallory is not an approver: her Home tab lists nothing; the event is logged as sent.
    await http.post("/sandbox/api/home", json={"as": "outsider"})
    page = await state(http)
    assert "issue_refund" not in json.dumps(page["homes"]["U0MALLORY"])
    assert any(a["what"].startswith("app_home_opened as U0MALLORY") for a in page["activity"])
    bad = await http.post("/sandbox/api/home", json={"as": "nobody"})
    assert bad.status_code == 400


async def test_alice_signed_in_to_the_inbox_sees_what_was_texted_to_her_phone(
    sb: Sandbox, http: httpx.AsyncClient
) -> None:
    texted = await ask(http, "send_email", {"to": "c@example.com"}, surface={"type": "sms", "phone": PHONE})
    async with httpx.AsyncClient(base_url=sb.url) as browser:
        start = await browser.get("/inbox/login")
        authorize = start.headers["location"]
        args = dict(parse_qsl(urlsplit(authorize).query))
        async with httpx.AsyncClient() as issuer:
            chosen = await issuer.post(authorize.split("?")[0], data={**args, "user": "U0ALICE"})
        back = urlsplit(chosen.headers["location"])
        assert (await browser.get(f"{back.path}?{back.query}")).status_code == 303
        page = (await browser.get("/inbox/")).text
    listed = page.split("Texted to your phone")[1]
    # The text came from the sandbox's number, not from Alice's own phone.
    assert texted in listed and f"reply to the text from {SMS_FROM}" in listed
