"""Allow for … in the inbox: the buttons, the answer, "Your standing allows" with Revoke."""

from __future__ import annotations

from typing import Any

import httpx

from tests.inbox.test_answers import csrf_of
from tests.inbox.world import World, inbox_world

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
allow_for = "1h"
allow_for_at_most = ["amountCents"]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example"] }
"""


async def press(w: World, client: httpx.AsyncClient, aid: str, **form: str) -> httpx.Response:
    page = (await client.get("/inbox/")).text
    return await client.post(f"/inbox/approvals/{aid}/answer", data={**form, "csrf": csrf_of(page)})


async def again(w: World, key: str, call: str, amount: int = 12900) -> Any:
    body = {
        "executionId": "run_later",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {"amountCents": amount, "cardToken": "tok_x"},
        "surface": {"type": "dashboard", "userId": "ada@acme.example"},
    }
    return await w.h.client.post("/v1/approvals", headers=w.h.auth(key), json=body)


async def test_allow_for_in_the_inbox_then_revoke_it_there() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert 'name="allow_for" value="15m"' in page and 'name="allow_for" value="1h"' in page
        assert 'value="8h"' not in page  # above the cap: not offered
        refused = await press(w, w.h.client, aid, allow_for="8h")  # forged: refused, nothing created
        assert refused.status_code == 400 and "only up to 1h" in refused.text
        assert "No standing allows" in (await w.h.client.get("/inbox/allowances")).text
        done = await press(w, w.h.client, aid, allow_for="1h")
        assert done.status_code == 303, done.text
        listed = (await w.h.client.get("/inbox/allowances")).text
        assert "issue_refund" in listed and "Used 0 of 20" in listed
        assert "<code>amountCents</code> ≤ 12900</p>" in listed  # a whole number, not 12900.0
        later = await again(w, key, "c2", amount=500)
        assert later.status_code == 200 and later.json()["decidedBy"]["kind"] == "allowance"
        allowance_id = later.json()["decidedBy"]["allowanceId"]
        revoke = await w.h.client.post(
            f"/inbox/allowances/{allowance_id}/revoke", data={"csrf": csrf_of(listed)}
        )
        assert revoke.status_code == 303
        assert (await again(w, key, "c3", amount=500)).status_code == 201
        replay = await press(w, w.h.client, aid, allow_for="1h")
        assert replay.status_code == 409  # already decided: nothing more created
