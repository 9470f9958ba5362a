"""Inbox sessions end on the server: Sign out, the operator's `cosigner inbox sign-out` and a
policy that no longer names the person each end the session, so a copy of its cookie replayed
afterwards is signed out too. Every session starts through the real OpenID sign-in."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest

from bot.cli import main
from bot.inbox.site import COOKIE
from storage.database import Database
from tests.harness import database
from tests.inbox.test_answers import POLICY_BY_EMAIL, csrf_of, post_answer
from tests.inbox.world import World, inbox_world

# Named by email only (no `slack_team`), so removing the email removes the person.
BOTH = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""
WITHOUT_ADA = BOTH.replace('"ada@acme.example", ', "")


async def replay(w: World, cookie: str, method: str, path: str, **kw: Any) -> httpx.Response:
    """A request from another machine carrying a copy of a session cookie (nothing else)."""
    async with w.browser() as thief:
        return await thief.request(method, path, headers={"cookie": f"{COOKIE}={cookie}"}, **kw)


async def signed_out(w: World, cookie: str) -> bool:
    page = await replay(w, cookie, "GET", "/inbox/")
    return page.status_code == 200 and 'id="sign-in"' in page.text


async def sign_out_by_form(client: httpx.AsyncClient) -> None:
    csrf = csrf_of((await client.get("/inbox/")).text)
    out = await client.post("/inbox/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/inbox/"


async def test_a_cookie_copied_before_sign_out_is_refused_after_it(db_kind: str) -> None:
    async with inbox_world(POLICY_BY_EMAIL, database_kind=db_kind) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        copied = w.h.client.cookies[COOKIE]
        before = await replay(w, copied, "GET", "/inbox/")
        assert "Ada Admin" in before.text and aid in before.text  # the copy works while signed in
        csrf = csrf_of(before.text)

        await sign_out_by_form(w.h.client)

        assert await signed_out(w, copied)
        history = await replay(w, copied, "GET", "/inbox/history")
        assert history.status_code == 303 and history.headers["location"] == "/inbox/"
        assert (await replay(w, copied, "GET", f"/inbox/approvals/{aid}")).status_code == 303
        assert (await replay(w, copied, "GET", "/inbox/events")).status_code == 401
        answered = await replay(
            w, copied, "POST", f"/inbox/approvals/{aid}/answer", data={"decision": "approve", "csrf": csrf}
        )
        assert answered.status_code == 303 and answered.headers["location"] == "/inbox/"
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
        assert body["status"] == "pending"
        # Signing in again starts a new session; the old copy stays signed out.
        await w.sign_in(w.h.client, "U0ADMIN")
        assert "Ada Admin" in (await w.h.client.get("/inbox/")).text
        assert await signed_out(w, copied)


async def test_the_operator_ends_every_session_of_a_person_by_any_of_their_ids(db_kind: str) -> None:
    from bot.cli.inbox import sign_out  # what `cosigner inbox sign-out PERSON` runs

    async with inbox_world(POLICY_BY_EMAIL, database_kind=db_kind) as w:
        async with w.browser() as laptop, w.browser() as phone, w.browser() as bob:
            await w.sign_in(laptop, "U0ADMIN")
            await w.sign_in(phone, "U0ADMIN")
            await w.sign_in(bob, "U0BOB")
            ada_cookie = laptop.cookies[COOKIE]
            # The email as the operator typed it; Sign in with Slack also recorded U0ADMIN.
            assert await sign_out(w.h.parts.db, "Ada@Acme.example") == 2
            for browser in (laptop, phone):
                page = await browser.get("/inbox/")
                assert 'id="sign-in"' in page.text and "Ada Admin" not in page.text
            assert await signed_out(w, ada_cookie)
            assert "Bob Builder" in (await bob.get("/inbox/")).text
            assert await sign_out(w.h.parts.db, "U0BOB") == 1
            assert 'id="sign-in"' in (await bob.get("/inbox/")).text
            assert await sign_out(w.h.parts.db, "U0BOB") == 0


async def test_cosigner_inbox_sign_out_ends_a_session_in_another_browser(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w, w.browser() as elsewhere:
        await w.sign_in(elsewhere, "U0ADMIN")
        assert "Ada Admin" in (await elsewhere.get("/inbox/")).text
        monkeypatch.setenv("COSIGNER_DATABASE_URL", w.h.parts.db.url)
        monkeypatch.setenv("COSIGNER_SECRET", w.h.parts.settings.secret or "")
        monkeypatch.delenv("COSIGNER_POLICY", raising=False)
        # The command's own process: its own event loop and connection, the server still up.
        assert await asyncio.to_thread(main, ["inbox", "sign-out", "U0ADMIN"]) == 0
        assert capsys.readouterr().out == "ended 1 inbox session of U0ADMIN\n"
        page = await elsewhere.get("/inbox/")
        assert 'id="sign-in"' in page.text and "Ada Admin" not in page.text
        assert await asyncio.to_thread(main, ["inbox", "sign-out", "U0ADMIN"]) == 0
        assert capsys.readouterr().out == "no inbox session of U0ADMIN was open\n"
        assert await asyncio.to_thread(main, ["inbox", "sign-out", "  "]) == 2
        assert "name the person" in capsys.readouterr().err


async def test_removing_a_person_from_the_policy_ends_their_session(db_kind: str) -> None:
    async with database(db_kind) as db:

        def replica() -> Database:
            return Database(db.url, schema=db.schema)

        async with inbox_world(BOTH, db=replica()) as w, w.browser() as bob:
            await w.sign_in(w.h.client, "U0ADMIN")
            await w.sign_in(bob, "U0BOB")
            ada_cookie, bob_cookie = w.h.client.cookies[COOKIE], bob.cookies[COOKIE]
        # The server restarts on a policy that no longer names Ada.
        async with inbox_world(WITHOUT_ADA, db=replica()) as w:
            assert await signed_out(w, ada_cookie)
            assert "Bob Builder" in (await replay(w, bob_cookie, "GET", "/inbox/")).text
        # Named again: her old session was ended, not only hidden; she signs in anew.
        async with inbox_world(BOTH, db=replica()) as w:
            assert await signed_out(w, ada_cookie)
            assert "Bob Builder" in (await replay(w, bob_cookie, "GET", "/inbox/")).text


@contextlib.asynccontextmanager
async def streaming(w: World, cookie: str) -> AsyncIterator[asyncio.Queue[MutableMapping[str, Any]]]:
    """`GET /inbox/events` with `cookie`, as a browser keeps it open; what the app sends."""
    sent: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
        "path": "/inbox/events",
        "raw_path": b"/inbox/events",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"cookie", f"{COOKIE}={cookie}".encode())],
    }
    task = asyncio.create_task(w.h.app(scope, receive, sent.put))
    try:
        yield sent
    finally:
        gone.set()
        await asyncio.wait_for(task, 30)


async def body_of(sent: asyncio.Queue[MutableMapping[str, Any]]) -> str:
    while True:  # a bound far above one read; reached only if the stream never says it
        message = await asyncio.wait_for(sent.get(), 30)
        if message["type"] == "http.response.body" and message.get("body"):
            return bytes(message["body"]).decode()


async def test_an_open_event_stream_ends_when_its_session_is_signed_out() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        async with streaming(w, w.h.client.cookies[COOKIE]) as sent:
            start = await asyncio.wait_for(sent.get(), 30)
            assert start["type"] == "http.response.start" and start["status"] == 200
            assert await body_of(sent) == "retry: 5000\n\n"
            await sign_out_by_form(w.h.client)
            await w.ask(key, "ada@acme.example")  # wakes the stream: it finds its session ended
            assert await body_of(sent) == "event: signed-out\ndata: {}\n\n"
            last = await asyncio.wait_for(sent.get(), 30)
            assert last["type"] == "http.response.body" and not last.get("more_body")


async def test_an_answer_after_sign_in_again_still_counts() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        key = await w.h.create_tenant("acme")
        aid = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        await sign_out_by_form(w.h.client)
        await w.sign_in(w.h.client, "U0ADMIN")
        done = await post_answer(w, w.h.client, aid, "approve")
        assert done.status_code == 303, done.text
        body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
        assert body["status"] == "approved"


async def test_an_expired_session_is_swept_at_the_next_sign_in(db_kind: str) -> None:
    from bot.cli.inbox import sign_out

    async with inbox_world(POLICY_BY_EMAIL, database_kind=db_kind, inbox_session_seconds=3600) as w:
        async with w.browser() as ada, w.browser() as bob:
            await w.sign_in(ada, "U0ADMIN")
            copied = ada.cookies[COOKIE]
            w.h.advance(3601)
            assert await signed_out(w, copied)
            await w.sign_in(bob, "U0BOB")  # sweeps what has expired
            assert await sign_out(w.h.parts.db, "U0ADMIN") == 0  # nothing of hers was left
            assert await sign_out(w.h.parts.db, "U0BOB") == 1
