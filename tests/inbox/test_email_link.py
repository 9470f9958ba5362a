"""The email's link leads to the request's inbox page, where only a signed-in approver answers.

Gus is no member of acme's Slack workspace; acme's policy names his address in
`admins.email`. The email (through a recording SMTP server on loopback) links to the page;
signed out the page asks for a sign-in; signed in as Gus the request is his to answer, and
Bob (a member of the workspace, not an approver) cannot answer it.
"""

from __future__ import annotations

import re

from surfaces.email import EmailAdapter, EmailConfig
from tests.harness import until
from tests.inbox.test_answers import post_answer
from tests.inbox.world import PUBLIC_URL, inbox_world
from tests.mailbox import smtp_server

GUS = "gus@globex.example"
POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme]
slack_team = "T0ACME"
admins = {{ email = ["{GUS}"] }}
"""


async def test_the_emailed_link_opens_the_page_where_the_signed_in_approver_answers() -> None:
    with smtp_server() as server:
        config = EmailConfig("127.0.0.1", server.port, False, "cosigner@acme.example", PUBLIC_URL)
        # The adapter's clock only dates the message; the app's own clock runs the rest.
        mail = [lambda desk: EmailAdapter(config, desk, lambda: 1_700_000_000.0)]
        async with inbox_world(POLICY, extra_surfaces=mail) as w:
            key = await w.h.create_tenant("acme")
            aid = await w.ask(key, "u_requester")
            (got,) = await until(lambda: server.box.received)
            assert got.recipients == [GUS]
            (link,) = set(re.findall(r"https?://[^\s\"<]+", got.part("plain")))
            path = link.removeprefix(PUBLIC_URL)
            assert path == f"/inbox/approvals/{aid}"
            signed_out = await w.h.client.get(path)
            assert aid not in signed_out.text  # the link alone shows nothing of the request

            async with w.browser() as bob:
                await w.sign_in(bob, "U0BOB")
                refused = await post_answer(w, bob, aid, "approve")
                assert refused.status_code in (403, 404), refused.text

            await w.sign_in(w.h.client, "U0GUS")
            page = (await w.h.client.get(path)).text
            assert aid in page and "issue_refund" in page
            done = await post_answer(w, w.h.client, aid, "approve")
            assert done.status_code == 303, done.text
            body = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
            assert body["status"] == "approved"
            assert body["decidedBy"]["surface"] == "dashboard" and body["decidedBy"]["userId"] == GUS
