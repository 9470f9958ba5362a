"""Answers in the inbox: the dashboard surface's checks, for the signed-in person only."""

from __future__ import annotations

import re

import httpx

from tests.inbox.world import World, inbox_world

POLICY_BY_EMAIL = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }

[tenants.globex]
slack_team = "T0GLOBEX"
admins = { dashboard = ["gus@globex.example"] }
"""


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


async def post_answer(
    w: World, client: httpx.AsyncClient, aid: str, decision: str, comment: str = "", csrf: str | None = None
) -> httpx.Response:
    page = (await client.get("/inbox/")).text
    form = {"decision": decision, "comment": comment, "csrf": csrf if csrf is not None else csrf_of(page)}
    return await client.post(f"/inbox/approvals/{aid}/answer", data=form)


async def test_approve_in_the_inbox_reaches_the_waiting_agent_with_a_grant_and_the_issuer_is_audited() -> (
    None
):
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert aid in page and "issue_refund" in page and "[REDACTED]" in page
        assert "its claim, not verified" in page and "the customer asked twice" in page
        done = await post_answer(w, w.h.client, aid, "approve")
        assert done.status_code == 303, done.text
        r = await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))
        body = r.json()
        assert body["status"] == "approved" and body["grant"]
        assert body["decidedBy"] == {
            "kind": "person",
            "surface": "dashboard",
            "userId": "ada@acme.example",
            "teamId": "T0ACME",
        }
        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        signed = [e for e in trail["events"] if e["event"] == "signed_in"]
        assert signed and signed[0]["data"] == {"issuer": w.emu.openid.issuer, "subject": "U0ADMIN"}


async def test_deny_with_a_comment() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        await post_answer(w, w.h.client, aid, "deny", "not this customer")
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
        assert body["status"] == "denied" and body["comment"] == "not this customer"


async def test_a_form_without_its_csrf_token_is_refused_and_decides_nothing() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        for csrf in ("", "forged-token"):
            r = await post_answer(w, w.h.client, aid, "approve", csrf=csrf)
            assert r.status_code == 403
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
        assert body["status"] == "pending"


async def test_another_tenants_request_is_never_listed_and_refused_by_id() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        globex = await w.h.create_tenant("globex")
        # Named as its approver, but Ada belongs to acme only.
        aid = await w.ask(globex, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert aid not in page
        r = await post_answer(w, w.h.client, aid, "approve")
        assert r.status_code == 404
        assert aid not in (await w.h.client.get("/inbox/history")).text
        assert (await w.h.client.get(f"/inbox/approvals/{aid}")).status_code == 404
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(globex))).json()
        assert body["status"] == "pending"


async def test_a_signed_in_person_who_is_not_its_approver_cannot_answer() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            assert aid not in (await bob.get("/inbox/")).text
            r = await post_answer(w, bob, aid, "approve")
            assert r.status_code == 403 and "not an approver" in r.text
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
        assert body["status"] == "pending"
        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        refused = [e for e in trail["events"] if e["event"] == "decision_refused"]
        assert refused and refused[0]["actor"]["userId"] == "bob@acme.example"


async def test_history_lists_decided_requests_with_filters_and_the_audit_trail() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        first = await w.ask(key, "ada@acme.example", call="c1")
        second = await w.ask(key, "ada@acme.example", call="c2")
        await w.sign_in(w.h.client, "U0ADMIN")
        await post_answer(w, w.h.client, first, "approve")
        await post_answer(w, w.h.client, second, "deny")
        page = (await w.h.client.get("/inbox/history?status=denied")).text
        assert second in page and first not in page
        assert (await w.h.client.get("/inbox/history?since=yesterday")).status_code == 400
        trail = (await w.h.client.get(f"/inbox/approvals/{first}")).text
        assert "requested" in trail and "approved" in trail and "signed_in" in trail


async def test_always_deny_sets_a_standing_deny_the_person_can_lift() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert 'value="always_deny"' in page
        assert (await post_answer(w, w.h.client, aid, "always_deny")).status_code == 303
        history = (await w.h.client.get("/inbox/history")).text
        denial = re.search(r"/inbox/denials/(den_[\w-]+)/lift", history)
        assert denial, history
        r = await w.h.client.post(denial.group(0), data={"csrf": csrf_of(history)})
        assert r.status_code == 303
        assert "No standing denies" in (await w.h.client.get("/inbox/history")).text


async def test_a_slack_request_naming_the_person_is_listed_read_only_with_its_permalink() -> None:
    async with inbox_world(POLICY_BY_EMAIL, slack=True) as w:
        key = await w.h.create_tenant("acme")
        r = await w.h.client.post(
            "/v1/approvals",
            headers=w.h.auth(key),
            json={
                "executionId": "run_s",
                "toolCallId": "s1",
                "toolName": "issue_refund",
                "parameters": {"amountCents": 12900},
                "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U0ADMIN"},
            },
        )
        aid = r.json()["approvalId"]
        got = await w.h.delivered(aid)
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        readonly = page.split("Asked of you in Slack")[1]
        assert aid in readonly
        assert f"archives/{got.conversation}/p{got.message_refs[0].replace('.', '')}" in readonly
        assert "chat.getPermalink" in [m for m, _ in w.emu.calls]
        # Answering it here is refused: it was asked in Slack.
        refused = await post_answer(w, w.h.client, aid, "approve")
        assert refused.status_code == 403 and "only dashboard requests" in refused.text


QUORUM_POLICY = """
[tools.delete_account]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example", "cy@acme.example"] }
"""


async def test_a_quorum_in_the_inbox_shows_the_progress_and_you_approved_instead_of_buttons() -> None:
    async with inbox_world(QUORUM_POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "cy@acme.example", tool="delete_account")
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert "2 distinct approvers must approve" in page and 'value="approve"' in page
        assert (await post_answer(w, w.h.client, aid, "approve")).status_code == 303
        ada = (await w.h.client.get("/inbox/")).text
        assert "Approved 1 of 2 —" in ada and "ada@acme.example" in ada
        assert "You approved (1 of 2 approvals)" in ada and 'value="approve"' not in ada
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            theirs = (await bob.get("/inbox/")).text
            assert "Approved 1 of 2 —" in theirs and 'value="approve"' in theirs, "Bob keeps his buttons"
            assert (await post_answer(w, bob, aid, "approve")).status_code == 303
        body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
        assert body["status"] == "approved"
        assert [a["by"] for a in body["approvals"]] == ["ada@acme.example", "bob@acme.example"]
        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        events = [e["event"] for e in trail["events"]]
        assert events.count("approval_counted") == 2 and events.count("signed_in") == 2, events
