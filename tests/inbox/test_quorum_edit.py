"""Edit before approve under a quorum in the inbox: Ada's edit is her approval of the edited
call, the page shows the edited call to everyone, and an answer from a page loaded before
the edit is refused and not counted (every answer form carries the digest it showed)."""

from __future__ import annotations

import html
from typing import Any

from cosigner.digest import parameters_digest
from tests.inbox.test_answers import csrf_of
from tests.inbox.test_edit import form_of, review
from tests.inbox.world import World, inbox_world

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
redact = ["cardToken"]
editable = ["amountCents"]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example", "cy@acme.example"] }
"""
CALL = {"orderId": "ord_4421", "amountCents": 40000, "cardToken": "tok_x"}
EDITED = {**CALL, "amountCents": 4000}
# What a page may carry to name the call it showed: the digest of the call as shown (the card
# token hidden), never the digest of the real call, which would let a guess of the token be
# tested against it.
SHOWN = parameters_digest({**CALL, "cardToken": "[REDACTED]"})
SHOWN_EDITED = parameters_digest({**EDITED, "cardToken": "[REDACTED]"})


async def ask(w: World, key: str) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "call_1",
            "toolName": "issue_refund",
            "parameters": CALL,
            "surface": {"type": "dashboard", "userId": "cy@acme.example"},
            "acceptsEdits": True,
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def body_of(w: World, key: str, aid: str) -> dict[str, Any]:
    found: dict[str, Any] = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
    return found


async def test_an_edit_in_the_inbox_counts_once_and_a_page_from_before_it_cannot_approve() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = await ask(w, key)
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            before = (await bob.get("/inbox/")).text  # Bob's page, loaded before Ada's edit
            assert f'name="digest" value="{SHOWN}"' in before
            assert parameters_digest(CALL) not in before

            await w.sign_in(w.h.client, "U0ADMIN")
            shown, _ = await review(w.h.client, aid, **{"f.amountCents": "4000"})
            assert shown.status_code == 200, shown.text
            done = await w.h.client.post(f"/inbox/approvals/{aid}/edit/approve", data=form_of(shown.text))
            assert done.status_code == 303, done.text
            body = await body_of(w, key, aid)
            assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == [
                "ada@acme.example"
            ]
            ada = html.unescape((await w.h.client.get("/inbox/")).text)
            assert "Edited by ada@acme.example: approve this call" in ada and "You approved (1 of 2" in ada

            # Bob answers from the page he loaded before the edit: refused, not counted.
            stale = await bob.post(
                f"/inbox/approvals/{aid}/answer",
                data={"decision": "approve", "csrf": csrf_of(before), "digest": SHOWN},
            )
            assert stale.status_code == 409 and "was edited by ada@acme.example" in html.unescape(stale.text)
            assert [a["by"] for a in (await body_of(w, key, aid))["approvals"]] == ["ada@acme.example"]

            now = (await bob.get("/inbox/")).text
            assert f'name="digest" value="{SHOWN_EDITED}"' in now
            assert parameters_digest(EDITED) not in now
            assert "&#34;amountCents&#34;: 4000" in now or '"amountCents": 4000' in html.unescape(now)
            form = {"decision": "approve", "csrf": csrf_of(now), "digest": SHOWN_EDITED}
            assert (await bob.post(f"/inbox/approvals/{aid}/answer", data=form)).status_code == 303
        done_body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
        assert done_body["status"] == "approved" and done_body["edited"] is True
        assert [a["by"] for a in done_body["approvals"]] == ["ada@acme.example", "bob@acme.example"]
        assert done_body["digest"] == parameters_digest(EDITED)
