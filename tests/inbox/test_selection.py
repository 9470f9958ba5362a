"""Answer several at once in the inbox: the selection form, checked whole before anything is decided."""

from __future__ import annotations

import re

import httpx

from tests.inbox.test_answers import csrf_of, post_answer
from tests.inbox.world import World, inbox_world

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
separate_duties = true

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }

[tenants.globex]
slack_team = "T0GLOBEX"
admins = { dashboard = ["gus@globex.example"] }
"""


def picks(page: str) -> list[str]:
    return re.findall(r'name="pick" value="([^"]+)"', page)


async def select(
    client: httpx.AsyncClient, chosen: list[str], decision: str = "approve", page: str | None = None
) -> httpx.Response:
    page = page if page is not None else (await client.get("/inbox/")).text
    form = {"csrf": csrf_of(page), "decision": decision, "pick": chosen}
    return await client.post("/inbox/answer-selected", data=form)


async def statuses(w: World, key: str, ids: list[str]) -> list[str]:
    return [(await w.h.client.get(f"/v1/approvals/{a}", headers=w.h.auth(key))).json()["status"] for a in ids]


async def test_approve_selected_answers_each_with_its_own_grant() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        ids = [await w.ask(key, "carl@acme.example", call=f"c{i}") for i in range(3)]
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert "Answer several at once" in page and "Approve selected" in page
        offered = picks(page)
        assert sorted(p.split("|")[0] for p in offered) == sorted(ids)
        chosen = [p for p in offered if p.split("|")[0] in ids[:2]]
        done = await select(w.h.client, chosen, page=page)
        assert done.status_code == 303, done.text
        bodies = [(await w.h.client.get(f"/v1/approvals/{a}", headers=w.h.auth(key))).json() for a in ids]
        assert [b["status"] for b in bodies] == ["approved", "approved", "pending"]
        assert bodies[0]["grant"] != bodies[1]["grant"]
        assert {b["decidedBy"]["userId"] for b in bodies[:2]} == {"ada@acme.example"}
        for a in ids[:2]:
            trail = (await w.h.client.get(f"/v1/approvals/{a}/audit", headers=w.h.auth(key))).json()
            assert "signed_in" in [e["event"] for e in trail["events"]]


async def test_a_selection_that_is_no_longer_what_waits_decides_nothing() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        ids = [await w.ask(key, "carl@acme.example", call=f"c{i}") for i in range(2)]
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        offered = picks(page)
        # A digest that is not the call's: refused as stale, nothing decided.
        forged = [offered[0], offered[1].split("|")[0] + "|sha256:" + "0" * 64]
        r = await select(w.h.client, forged, page=page)
        assert r.status_code == 409 and "nothing was decided" in r.text
        assert await statuses(w, key, ids) == ["pending", "pending"]
        # One answered since the page was shown: the selection is refused whole.
        await post_answer(w, w.h.client, offered[1].split("|")[0], "deny")
        r = await select(w.h.client, offered, page=page)
        assert r.status_code == 409 and "nothing was decided" in r.text and "already denied" in r.text
        first = offered[0].split("|")[0]
        assert (await statuses(w, key, [first])) == ["pending"]


async def test_the_requester_cannot_approve_their_own_by_selection() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        mine = await w.ask(key, "ada@acme.example", call="c1")
        other = await w.ask(key, "carl@acme.example", call="c2")
        await w.sign_in(w.h.client, "U0ADMIN")
        r = await select(w.h.client, picks((await w.h.client.get("/inbox/")).text))
        assert r.status_code == 403 and "separate_duties" in r.text
        assert await statuses(w, key, [mine, other]) == ["pending", "pending"]


async def test_bad_selections_are_refused() -> None:
    async with inbox_world(POLICY) as w:
        key = await w.h.create_tenant("acme")
        ids = [await w.ask(key, "carl@acme.example", call=f"c{i}") for i in range(2)]
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert (await select(w.h.client, [], page=page)).status_code == 400
        assert (await select(w.h.client, ["not-a-pick"], page=page)).status_code == 400
        assert (await select(w.h.client, picks(page), "always_deny", page=page)).status_code == 400
        twice = [picks(page)[0], picks(page)[0]]
        assert (await select(w.h.client, twice, page=page)).status_code == 400
        # Another tenant's approver: not found, nothing decided.
        async with w.browser() as gus:
            await w.sign_in(gus, "U0GUS")
            gus_page = (await gus.get("/inbox/")).text
            r = await gus.post(
                "/inbox/answer-selected",
                data={"csrf": csrf_of(gus_page), "decision": "approve", "pick": picks(page)},
            )
            assert r.status_code == 404
        assert await statuses(w, key, ids) == ["pending", "pending"]
