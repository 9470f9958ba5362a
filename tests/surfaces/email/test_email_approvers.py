"""`approvers = ["email"]` through a real SMTP server on loopback and the inbox.

Acme's policy asks its email admins for `issue_refund`: Gus's address is emailed the call
with the link to its inbox page, the dashboard's own id cannot answer (only the addresses
are asked), and Gus answers signed in. A server with no mail configured refuses to start
with such a policy, naming the rule and the variables to set.
"""

from __future__ import annotations

import re

import pytest

from bot.http.surface_config import ConfigurationError
from surfaces.email import EmailAdapter, EmailConfig
from tests.harness import cosigner_app, until
from tests.inbox.test_answers import post_answer
from tests.inbox.world import PUBLIC_URL, inbox_world
from tests.mailbox import smtp_server

GUS = "gus@globex.example"
POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["email"]

[tenants.acme]
slack_team = "T0ACME"
admins = {{ email = ["{GUS}"], dashboard = ["u_42"] }}
"""


async def test_email_approvers_are_emailed_and_answer_in_the_inbox_alone() -> None:
    with smtp_server() as server:
        config = EmailConfig("127.0.0.1", server.port, False, "cosigner@acme.example", PUBLIC_URL)
        mail = [lambda desk: EmailAdapter(config, desk, lambda: 1_700_000_000.0)]
        async with inbox_world(POLICY, extra_surfaces=mail) as w:
            key = await w.h.create_tenant("acme")
            aid = await w.ask(key, "u_requester")
            (got,) = await until(lambda: server.box.received)
            assert got.recipients == [GUS]
            assert got.message["Subject"] == "Approval needed: issue_refund (acme)"
            links = set(re.findall(r"https?://[^\s\"<]+", got.part("plain")))
            assert links == {f"{PUBLIC_URL}/inbox/approvals/{aid}"}
            # The tenant's dashboard admin is not asked by `email`: only the addresses are.
            refused = await w.h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=w.h.auth(w.h.approver_key("acme")),
                json={"decision": "approve", "userId": "u_42"},
            )
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "NOT_AN_APPROVER"
            await w.sign_in(w.h.client, "U0GUS")
            done = await post_answer(w, w.h.client, aid, "approve")
            assert done.status_code == 303, done.text
            body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
            assert body["status"] == "approved" and body["decidedBy"]["userId"] == GUS


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        (POLICY, "tools.issue_refund.approvers"),
        (
            POLICY.replace(
                'approvers = ["email"]',
                'approvers = ["requester"]\nescalate = [{ after = "1m", to = "email" }]',
            ),
            "tools.issue_refund.escalate[0].to",
        ),
    ],
)
async def test_a_server_without_smtp_refuses_a_policy_that_asks_email(policy: str, path: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        async with cosigner_app(policy):
            pass
    said = str(refused.value)
    assert said.startswith(f'{path} names "email"') and "set COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM" in said


async def test_a_server_without_smtp_refuses_a_policy_that_notifies_by_email() -> None:
    notify = POLICY.replace('approvers = ["email"]', 'approvers = ["tenant_admins"]\nnotify = ["email"]')
    with pytest.raises(ConfigurationError) as refused:
        async with cosigner_app(notify):
            pass
    assert str(refused.value).startswith('tools.issue_refund.notify names "email"')
