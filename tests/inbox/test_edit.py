"""Edit before approve in the inbox: the typed form, the review step (old → new), the grant.

Through the real app, signed in through the emulator's OpenID provider; every form carries
the session's CSRF token, and the grant is checked with the SDK's own `verify_grant`.
"""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest

from cosigner.digest import parameters_digest
from cosigner.grants import GrantRefused, verify_grant
from tests.inbox.test_answers import csrf_of
from tests.inbox.world import World, inbox_world

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]
editable = ["amountCents", "note", "currency"]
deny_above = { parameter = "amountCents", value = 100000 }

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""
SCHEMA = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string"},
        "amountCents": {"type": "integer", "minimum": 1, "maximum": 500000, "description": "In cents"},
        "note": {"type": "string", "maxLength": 40},
        "currency": {"enum": ["EUR", "USD"]},
        "cardToken": {"type": "string"},
    },
    "required": ["orderId", "amountCents"],
    "additionalProperties": False,
}
CALL = {
    "orderId": "ord_4421",
    "amountCents": 40000,
    "note": "refund",
    "currency": "EUR",
    "cardToken": "tok_x",
}


async def ask(w: World, key: str, *, accepts_edits: bool = True) -> dict[str, Any]:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "call_1",
            "toolName": "issue_refund",
            "parameters": CALL,
            "surface": {"type": "dashboard", "userId": "ada@acme.example"},
            "acceptsEdits": accepts_edits,
            "parametersSchema": SCHEMA,
        },
    )
    assert r.status_code == 201, r.text
    start: dict[str, Any] = r.json()
    return start


def form_of(page: str) -> dict[str, str]:
    """The edit form's inputs as a browser would send them (the selected option of a select)."""
    out = {
        m[0]: html.unescape(m[1]) for m in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page)
    }
    for name, body in re.findall(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', page, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected', body)
        out[name] = chosen.group(1) if chosen else ""
    for name, body in re.findall(r'<textarea[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', page, re.S):
        out[name] = html.unescape(body)
    return out


async def review(
    client: httpx.AsyncClient, aid: str, **changed: str
) -> tuple[httpx.Response, dict[str, str]]:
    page = await client.get(f"/inbox/approvals/{aid}/edit")
    assert page.status_code == 200, page.text
    form = {**form_of(page.text), **changed}
    return await client.post(f"/inbox/approvals/{aid}/edit", data=form), form


async def decided(w: World, key: str, aid: str) -> dict[str, Any]:
    body: dict[str, Any] = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
    return body


async def test_edit_one_field_review_shows_old_to_new_and_the_grant_binds_the_edited_call() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        start = await ask(w, key)
        aid = start["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        listed = (await w.h.client.get("/inbox/")).text
        assert f'href="/inbox/approvals/{aid}/edit"' in listed

        page = (await w.h.client.get(f"/inbox/approvals/{aid}/edit")).text
        form = form_of(page)
        # Typed from the schema; the redacted cardToken and the non-editable orderId are not inputs.
        assert {k for k in form if k.startswith("f.")} == {"f.amountCents", "f.note", "f.currency"}
        assert re.search(r'name="f.amountCents" type="number" step="1" value="40000"', page)
        assert re.search(r'<select[^>]*name="f.currency"', page) and form["f.currency"] == "0"
        assert "In cents" in page and "tok_x" not in page

        shown, _ = await review(w.h.client, aid, **{"f.amountCents": "4000"})
        assert shown.status_code == 200, shown.text
        changes = re.findall(
            r'<tr class="change"><th scope="row"><code>(\w+)</code></th><td><pre class="old">([^<]*)</pre>'
            r'</td><td aria-label="becomes">→</td><td><pre class="new">([^<]*)</pre>',
            shown.text,
        )
        assert changes == [("amountCents", "40000", "4000")]  # only what changed
        assert "Approve edited" in shown.text
        assert (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()[
            "status"
        ] == "pending"

        confirm = form_of(shown.text)
        done = await w.h.client.post(f"/inbox/approvals/{aid}/edit/approve", data=confirm)
        assert done.status_code == 303, done.text
        body = await decided(w, key, aid)
        edited_call = {**CALL, "amountCents": 4000}
        assert body["status"] == "approved" and body["edited"] is True
        assert body["editedFields"] == ["amountCents"]
        assert body["parameters"] == {**edited_call, "cardToken": "[REDACTED]"}
        assert body["decidedBy"]["userId"] == "ada@acme.example"
        assert body["digest"] == body["parametersDigest"] == parameters_digest(edited_call)
        assert body["originalDigest"] == start["parametersDigest"] == parameters_digest(CALL)
        keys = (await w.h.client.get("/v1/keys")).json()
        claims = verify_grant(body["grant"], keys, parameters=edited_call, tool_name="issue_refund")
        assert claims.digest == parameters_digest(edited_call)
        with pytest.raises(GrantRefused, match="parameters differ"):
            verify_grant(body["grant"], keys, parameters=CALL, tool_name="issue_refund")

        trail = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
        events = {e["event"]: e for e in trail["events"]}
        assert events["approved"]["data"]["edited"]["parameters"]["amountCents"] == 4000
        assert events["approved"]["actor"]["userId"] == "ada@acme.example"
        assert events["signed_in"]["data"] == {"issuer": w.emu.openid.issuer, "subject": "U0ADMIN"}
        assert "tok_x" not in str(trail)
        history = (await w.h.client.get(f"/inbox/approvals/{aid}")).text
        assert "Approved with an edit" in history and "4000" in history


async def test_a_value_that_violates_the_schema_is_refused_with_the_reason_on_the_page() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key))["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        for changed, reason in [
            ({"f.note": "x" * 41}, "must be at most 40 characters long (maxLength)"),
            ({"f.amountCents": "0"}, "must be at least 1 (minimum)"),
            ({"f.amountCents": "12.5"}, "must be a whole number"),
        ]:
            r, _ = await review(w.h.client, aid, **changed)
            assert r.status_code == 400, r.text
            problem = re.search(r'<p class="refusal problem"[^>]*>([^<]*)</p>', r.text)
            assert problem and reason in html.unescape(problem.group(1)), r.text
            name = next(iter(changed))[2:]
            assert html.unescape(problem.group(1)).startswith(f"{name}:")
            assert "Approve edited" not in r.text
        assert (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()[
            "status"
        ] == "pending"


async def test_a_crafted_post_cannot_change_a_redacted_or_non_editable_field() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key))["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        csrf = csrf_of((await w.h.client.get(f"/inbox/approvals/{aid}/edit")).text)
        for name in ("cardToken", "orderId"):
            # Through the form: an input the form never had.
            r, _ = await review(w.h.client, aid, **{f"f.{name}": "tok_evil"})
            assert r.status_code == 400 and f"{name} cannot be edited" in r.text
            # Straight to the last step, with the review step's hidden value forged.
            forged = {"csrf": csrf, "edit": f'{{"{name}": "tok_evil"}}'}
            r = await w.h.client.post(f"/inbox/approvals/{aid}/edit/approve", data=forged)
            assert r.status_code == 400 and f"{name} cannot be edited" in html.unescape(r.text), r.text
        # The tool cannot be edited either; nor can a field be approved without a change.
        for edit in (
            '{"toolName": "wire_money"}',
            '{"amountCents": 40000}',
            '{"amountCents": 1, "amountCents": 2}',
        ):
            r = await w.h.client.post(
                f"/inbox/approvals/{aid}/edit/approve", data={"csrf": csrf, "edit": edit}
            )
            assert r.status_code == 400, r.text
        assert (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()[
            "status"
        ] == "pending"


async def test_edit_forms_without_the_csrf_token_are_refused_and_decide_nothing() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key))["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        for csrf in ("", "forged-token"):
            r, _ = await review(w.h.client, aid, csrf=csrf, **{"f.amountCents": "4000"})
            assert r.status_code == 403 and "Approve edited" not in r.text
            r = await w.h.client.post(
                f"/inbox/approvals/{aid}/edit/approve", data={"csrf": csrf, "edit": '{"amountCents": 4000}'}
            )
            assert r.status_code == 403
        assert (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()[
            "status"
        ] == "pending"


async def test_only_its_approver_may_edit_and_only_when_the_agent_accepts_edits() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key))["approvalId"]
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            assert (await bob.get(f"/inbox/approvals/{aid}/edit")).status_code == 403
            csrf = csrf_of((await bob.get("/inbox/")).text)
            r = await bob.post(
                f"/inbox/approvals/{aid}/edit/approve", data={"csrf": csrf, "edit": '{"amountCents": 4000}'}
            )
            assert r.status_code == 403 and "not an approver" in r.text
        assert (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()[
            "status"
        ] == "pending"

    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key, accepts_edits=False))["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        assert f"/inbox/approvals/{aid}/edit" not in (await w.h.client.get("/inbox/")).text
        r = await w.h.client.get(f"/inbox/approvals/{aid}/edit")
        assert r.status_code == 400 and "offers no edit" in r.text


async def test_an_edit_that_crosses_a_deny_rule_is_denied_and_the_approver_is_told() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = (await ask(w, key))["approvalId"]
        await w.sign_in(w.h.client, "U0ADMIN")
        shown, _ = await review(w.h.client, aid, **{"f.amountCents": "400000"})
        assert shown.status_code == 200, shown.text  # the schema allows it; the policy decides
        r = await w.h.client.post(f"/inbox/approvals/{aid}/edit/approve", data=form_of(shown.text))
        assert r.status_code == 403 and "The edited call was denied" in r.text
        assert "deny_above" in html.unescape(r.text), r.text
        body = await decided(w, key, aid)
        assert body["status"] == "denied" and body["grant"] is None
