"""The inbox's pages as a person reads them: a request's page answers with the list's checks,
an answer is confirmed in place, the trail reads as a timeline, History says who decided and
filters, the title counts what waits, and the sign-in button names the issuer."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from bot.inbox.signin import display_name
from bot.settings import Settings, describe
from tests.inbox import test_quorum_edit as quorum
from tests.inbox.test_answers import POLICY_BY_EMAIL, csrf_of, post_answer
from tests.inbox.test_edit import form_of, review
from tests.inbox.world import World, inbox_world

DENY_ABOVE = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
deny_above = { parameter = "amountCents", value = 100000 }

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""


def text_of(page: str) -> str:
    """A page's text as a person reads it: tags dropped, entities decoded, spaces folded."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


async def answer_on_detail(
    client: httpx.AsyncClient, aid: str, decision: str, comment: str = ""
) -> httpx.Response:
    """Answer from the request's own page, as its form posts."""
    page = (await client.get(f"/inbox/approvals/{aid}")).text
    form = {"decision": decision, "comment": comment, "csrf": csrf_of(page), "from": "detail"}
    digest = re.search(r'name="digest" value="([^"]+)"', page)
    if digest:
        form["digest"] = digest.group(1)
    return await client.post(f"/inbox/approvals/{aid}/answer", data=form)


async def status_of(w: World, key: str, aid: str) -> dict[str, Any]:
    body: dict[str, Any] = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
    return body


async def test_the_request_page_answers_with_the_lists_checks_and_confirms_what_was_decided() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        other = await w.ask(key, "ada@acme.example", call="c2")
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            # Bob belongs to acme and may read the request, but is not its approver: no form,
            # and a post from its page is refused by the same check as the list's.
            seen = (await bob.get(f"/inbox/approvals/{aid}")).text
            assert seen.count('action="/inbox/approvals/') == 0 and "issue_refund" in seen
            refused = await answer_on_detail(bob, aid, "approve")
            assert refused.status_code == 403 and "not an approver" in refused.text
            assert (await status_of(w, key, aid))["status"] == "pending"

        await w.sign_in(w.h.client, "U0ADMIN")
        waiting = (await w.h.client.get("/inbox/")).text
        assert f'href="/inbox/approvals/{aid}"' in waiting and f'href="/inbox/approvals/{other}"' in waiting
        page = (await w.h.client.get(f"/inbox/approvals/{aid}")).text
        assert f'action="/inbox/approvals/{aid}/answer"' in page and 'name="from" value="detail"' in page
        assert 'src="/inbox/static/shortcuts.js"' in page and 'aria-keyshortcuts="a"' in page

        done = await answer_on_detail(w.h.client, aid, "approve", "Refund agreed with support")
        assert (
            done.status_code == 303 and done.headers["location"] == f"/inbox/approvals/{aid}?answered={aid}"
        )
        body = await status_of(w, key, aid)
        assert body["status"] == "approved" and body["grant"]
        after = text_of((await w.h.client.get(done.headers["location"])).text)
        assert "Approved issue_refund (amountCents 12900, cardToken [REDACTED]) — grant issued." in after
        assert "Comment Refund agreed with support" in after and "Decided by ada@acme.example" in after
        assert "Approve Deny" not in after  # answered: no form any more

        # Deny from Waiting: confirmed on Waiting, with the comment.
        denied = await post_answer(w, w.h.client, other, "deny", "Check with the customer first")
        assert denied.status_code == 303 and denied.headers["location"] == f"/inbox/?answered={other}"
        said = text_of((await w.h.client.get(denied.headers["location"])).text)
        assert (
            "Denied issue_refund (amountCents 12900, cardToken [REDACTED]). "
            "Your comment: Check with the customer first" in said
        )
        assert "Nothing waits for you" in said
        # Answering again: refused with the state, as from the list.
        again = await answer_on_detail(w.h.client, aid, "deny")
        assert again.status_code == 409 and (await status_of(w, key, aid))["status"] == "approved"
        # Another tenant's id in `answered` says nothing.
        async with w.browser() as gus:
            await w.sign_in(gus, "U0GUS")
            assert "issue_refund" not in (await gus.get(f"/inbox/?answered={aid}")).text
            assert (await gus.get(f"/inbox/approvals/{aid}")).status_code == 404


async def test_a_quorum_vote_is_confirmed_as_counted_and_the_trail_reads_as_a_timeline() -> None:
    async with inbox_world(quorum.POLICY) as w:
        key = await w.h.create_tenant("acme")
        aid = await quorum.ask(w, key)
        await w.sign_in(w.h.client, "U0ADMIN")
        shown, _ = await review(w.h.client, aid, **{"f.amountCents": "4000"})
        done = await w.h.client.post(f"/inbox/approvals/{aid}/edit/approve", data=form_of(shown.text))
        assert done.status_code == 303 and done.headers["location"] == f"/inbox/?answered={aid}"
        said = text_of((await w.h.client.get(done.headers["location"])).text)
        assert "Counted 1 of 2 approvals of issue_refund (amountCents 4000, cardToken [REDACTED]" in said
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            assert (await answer_on_detail(bob, aid, "approve", "Fine by me")).status_code == 303
        assert (await status_of(w, key, aid))["status"] == "approved"

        page = (await w.h.client.get(f"/inbox/approvals/{aid}")).text
        timeline = page.split('<ol class="timeline"')[1]
        assert '{"' not in html.unescape(timeline)  # no stored JSON
        read = text_of(timeline)
        assert "Asked for approval the agent" in read and "Tool issue_refund" in read
        assert "Edited the call ada@acme.example · the inbox" in read
        assert "amountCents: 40000 → 4000" in read
        assert "Approve counted: 1 of 2 ada@acme.example" in read
        assert "Approve counted: 2 of 2 bob@acme.example" in read and "“Fine by me”" in read
        assert "Approved bob@acme.example · the inbox" in read
        assert "Approved by ada@acme.example (the inbox), bob@acme.example (the inbox)" in read
        assert "Signed in" in read and "Issuer http://127.0.0.1" in read


async def test_a_call_the_policy_denied_outright_is_shown_as_denied_by_policy() -> None:
    async with inbox_world(DENY_ABOVE) as w:
        key = await w.h.create_tenant("acme")
        r = await w.h.client.post(
            "/v1/approvals",
            headers=w.h.auth(key),
            json={
                "executionId": "run_big",
                "toolCallId": "big",
                "toolName": "issue_refund",
                "parameters": {"amountCents": 250000},
                "surface": {"type": "dashboard", "userId": "ada@acme.example"},
            },
        )
        assert r.status_code == 403, r.text
        await w.sign_in(w.h.client, "U0ADMIN")
        history = text_of((await w.h.client.get("/inbox/history")).text)
        assert "Outcome denied by policy" in history and "Policy denied outright by" in history
        assert (
            "danger → ask_always" not in history and "amountCents 250000" not in history.split("History")[0]
        )


async def test_history_says_who_decided_and_filters_by_tool_person_outcome_and_date(db_kind: str) -> None:
    async with inbox_world(POLICY_BY_EMAIL, inbox_session_seconds=30 * 86400, database_kind=db_kind) as w:
        key = await w.h.create_tenant("acme")
        refund = await w.ask(key, "ada@acme.example", call="c1")
        first_day = datetime.fromtimestamp(w.h.clock(), UTC)
        await w.sign_in(w.h.client, "U0ADMIN")
        assert (await post_answer(w, w.h.client, refund, "approve")).status_code == 303
        w.h.advance(2 * 86400)  # two days later
        later = datetime.fromtimestamp(w.h.clock(), UTC)
        credit = await w.ask(key, "bob@acme.example", call="c2", tool="issue_credit")
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            assert (await post_answer(w, bob, credit, "deny", "Not this month")).status_code == 303

        async def listed(query: str) -> set[str]:
            page = await w.h.client.get(f"/inbox/history{query}")
            assert page.status_code == 200, page.text
            return {a for a in (refund, credit) if f'id="{a}"' in page.text}

        everything = text_of((await w.h.client.get("/inbox/history")).text)
        assert "Decided by ada@acme.example" in everything and "Decided by bob@acme.example" in everything
        assert "Comment Not this month" in everything
        assert await listed("") == {refund, credit}
        assert await listed("?tool=issue_credit") == {credit}
        assert await listed("?person=BOB") == {credit}  # any part of the id, in any case
        assert await listed("?person=ada%40acme.example&status=approved") == {refund}
        assert await listed("?status=denied") == {credit}
        day1, day3 = f"{first_day:%Y-%m-%d}", f"{later:%Y-%m-%d}"
        assert await listed(f"?since={day1}&until={day1}") == {refund}  # the whole of that day
        assert await listed(f"?since={day3}") == {credit}
        assert await listed(f"?since={day1}&until={day3}") == {refund, credit}
        assert await listed("?until=2020-01-01") == set()
        page = (await w.h.client.get("/inbox/history?person=nobody")).text
        assert "No decided request matches these filters." in page and 'value="nobody"' in page

        for query, said in (
            ("?status=maybe", "unknown outcome &#39;maybe&#39;; pick one of approved"),
            ("?since=12/01/2026", "the since date must read YYYY-MM-DD"),
            ("?until=2026-13-01", "the until date must read YYYY-MM-DD"),
            ("?since=2026-12-02&until=2026-12-01", "the until date (2026-12-01) is before the since date"),
        ):
            refused = await w.h.client.get(f"/inbox/history{query}")
            assert refused.status_code == 400 and said in refused.text, (query, refused.text)


async def test_the_title_counts_what_waits() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        assert "<title>Cosigner inbox</title>" in (await w.h.client.get("/inbox/")).text
        first = await w.ask(key, "ada@acme.example", call="c1")
        await w.ask(key, "ada@acme.example", call="c2")
        assert "<title>(2) Cosigner inbox</title>" in (await w.h.client.get("/inbox/")).text
        assert "<title>(2) History · Cosigner inbox</title>" in (await w.h.client.get("/inbox/history")).text
        await post_answer(w, w.h.client, first, "deny")
        assert "<title>(1) Cosigner inbox</title>" in (await w.h.client.get("/inbox/")).text


async def test_the_sign_in_button_names_the_issuer() -> None:
    async with inbox_world(oidc_display_name="Acme SSO") as w:
        page = (await w.h.client.get("/inbox/")).text
        assert "Sign in with Acme SSO" in page
    async with inbox_world() as w:
        host = w.emu.openid.issuer.split("://")[1].rstrip("/")
        page = (await w.h.client.get("/inbox/")).text
        assert f"Sign in with {host}<" in page and "Sign in with http" not in page


@pytest.mark.parametrize(
    ("issuer", "named"),
    [
        ("https://slack.com", "Slack"),
        ("https://accounts.google.com", "Google"),
        ("https://login.microsoftonline.com/5f1c/v2.0", "Microsoft Entra ID"),
        ("https://acme.okta.com/oauth2/default", "Okta"),
        ("https://sso.acme.example/realms/staff", "sso.acme.example"),
        ("http://127.0.0.1:35135", "127.0.0.1:35135"),
        ("https://notslack.com", "notslack.com"),
    ],
)
def test_an_issuer_is_named_by_its_known_name_or_its_host(issuer: str, named: str) -> None:
    assert display_name(issuer) == named
    assert display_name(issuer, "  Staff login ") == "Staff login"


def test_a_display_name_too_long_is_refused_naming_the_limit() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(oidc_display_name="x" * 61)
    assert "COSIGNER_OIDC_DISPLAY_NAME must be at most 60 characters, e.g. Okta" in describe(refused.value)
