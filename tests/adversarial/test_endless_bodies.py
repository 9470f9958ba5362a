"""Every inbound route stops reading a body at its limit and answers 413 at once.

Each app is served by a real uvicorn on loopback behind a `Tap`; the client streams a body
that never ends (`tests.endless`). The app must have read no further than the first message
past the limit, the generator must have stopped (what it made beyond that is what the
sockets hold), and a `Content-Length` over the limit is refused with no byte read. A body of
exactly the limit is still taken, really signed, on every surface; one byte more is not.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette

from bot.http.decoding import MAX_BODY as API_MAX
from bot.inbox.site import MAX_FORM as INBOX_MAX
from bot.testing.stepped_clock import MAX_BODY as CLOCK_MAX
from bot.testing.stepped_clock import SteppedClock
from storage.slack_installs import SlackInstallStores
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.adapter import MAX_BODY as SLACK_MAX
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import click_payload, signed_headers
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.webhook import MAX_BODY as TWILIO_MAX
from surfaces.teams.adapter import MAX_BODY as TEAMS_MAX
from tests.databases import NOT_STORED, postgres_elsewhere
from tests.endless import BUFFERS, Answer, Tap, endless
from tests.harness import Harness, until
from tests.inbox.world import SENDER, SLACK_SECRET, TWILIO_ACCOUNT, TWILIO_TOKEN, World, inbox_world, served
from tests.processes import free_port
from tests.surfaces.teams.world import ALICE as TEAMS_ALICE
from tests.surfaces.teams.world import posted, teams_app
from tests.surfaces.teams.world import request as teams_request

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(NOT_STORED)

PHONE = "+15550000002"
POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example"] }
"""
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}


@dataclass
class Served:
    """The app of `inbox_world` (Slack, SMS, WhatsApp, the inbox, the API) on loopback."""

    w: World
    url: str
    tap: Tap
    key: str
    approval_id: str  # a pending dashboard request for Ada
    cookie: str  # Ada's inbox session

    @property
    def h(self) -> Harness:
        """The app's harness."""
        return self.w.h


@pytest.fixture
async def app(db_kind: str) -> AsyncIterator[Served]:
    async with inbox_world(POLICY, slack=True, texts=True, database_kind=db_kind) as w:
        key = await w.h.create_tenant("acme")
        approval_id = await w.ask(key, "ada@acme.example")
        await w.sign_in(w.h.client, "U0ADMIN")
        cookie = f"cosigner_inbox={w.h.client.cookies['cosigner_inbox']}"
        tap = Tap(w.h.app)
        async with served(tap, free_port()) as url:
            yield Served(w, url, tap, key, approval_id, cookie)


@dataclass(frozen=True)
class Inbound:
    """A route that takes a body, and its limit."""

    name: str
    path: str
    limit: int
    headers: str  # which headers it is sent with (see `headers_for`)
    page: bool = False  # answered with an inbox page rather than a JSON error body


ROUTES = [
    Inbound("slack events", "/slack/events", SLACK_MAX, "slack"),
    Inbound("sms inbound", "/sms/inbound", TWILIO_MAX, "twilio"),
    Inbound("sms status", "/sms/status", TWILIO_MAX, "twilio"),
    Inbound("whatsapp inbound", "/whatsapp/inbound", TWILIO_MAX, "twilio"),
    Inbound("whatsapp status", "/whatsapp/status", TWILIO_MAX, "twilio"),
    Inbound("inbox logout", "/inbox/logout", INBOX_MAX, "form", page=True),
    Inbound("inbox answer", "/inbox/approvals/{id}/answer", INBOX_MAX, "session", page=True),
    Inbound("api create", "/v1/approvals", API_MAX, "agent"),
    Inbound("api admit", "/v1/runs/admit", API_MAX, "agent"),
    Inbound("api cancel", "/v1/approvals/{id}/cancel", API_MAX, "agent"),
    Inbound("api result", "/v1/approvals/{id}/result", API_MAX, "agent"),
    Inbound("api decision", "/v1/approvals/{id}/decision", API_MAX, "approver"),
]


def headers_for(s: Served, kind: str) -> dict[str, str]:
    """What each kind of caller sends before the body (a signature cannot be right yet)."""
    return {
        "slack": {**FORM, "X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=0"},
        "twilio": {**FORM, "X-Twilio-Signature": "not-yet-computed"},
        "form": FORM,
        "session": {**FORM, "Cookie": s.cookie},
        "agent": {**JSON, **s.h.auth(s.key)},
        "approver": {**JSON, **s.h.auth(s.h.approver_key("acme"))},
    }[kind]


def refused(answer: Answer, limit: int, *, page: bool = False) -> None:
    """A 413 naming the limit: as a JSON error body, or on an inbox page."""
    assert answer.status == 413, answer
    if page:
        assert f"limit of {limit} bytes" in answer.body.decode(), answer.body
        return
    error = json.loads(answer.body)["error"]
    assert (error["code"], error["field"], error["limit"]) == ("INVALID_REQUEST", "body", limit), error
    assert f"limit of {limit} bytes" in error["message"], error


async def stops_at_the_limit(
    url: str, tap: Tap, method: str, path: str, headers: dict[str, str], limit: int, *, page: bool = False
) -> None:
    """A body without end is a 413 once past `limit`; a Content-Length over it, with none read."""
    tap.reset()
    answer = await endless(url, method, path, headers, limit=limit)
    refused(answer, limit, page=page)
    tap.stopped_at(limit)
    assert answer.produced <= limit + BUFFERS, answer.produced
    tap.reset()
    declared = await endless(url, method, path, headers, limit=limit, declared=2**40)
    refused(declared, limit, page=page)
    tap.read_nothing()


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
async def test_a_body_without_end_is_refused_at_the_routes_limit(app: Served, route: Inbound) -> None:
    path = route.path.format(id=app.approval_id)
    headers = headers_for(app, route.headers)
    await stops_at_the_limit(app.url, app.tap, "POST", path, headers, route.limit, page=route.page)
    pending = await app.h.client.get(f"/v1/approvals/{app.approval_id}", headers=app.h.auth(app.key))
    assert pending.json()["status"] == "pending"


async def test_an_unauthenticated_api_body_is_not_read_at_all(app: Served) -> None:
    answer = await endless(
        app.url, "POST", "/v1/approvals", {**JSON, "Authorization": "Bearer csk_x"}, limit=API_MAX
    )
    assert answer.status == 401
    app.tap.read_nothing()


async def chunked(data: bytes) -> AsyncIterator[bytes]:
    """`data` as a body without Content-Length (chunked), as a stream would send it."""
    for start in range(0, len(data), 65536):
        yield data[start : start + 65536]


async def exactly_then_over(
    client: httpx.AsyncClient, path: str, body: bytes, pad: bytes, headers: Any, limit: int
) -> httpx.Response:
    """Send `body` padded (with `pad`) to one byte over `limit`, refused with nothing done,
    then to exactly `limit`, chunked; the second answer."""
    over = body + pad * (limit + 1 - len(body))
    response = await client.post(path, content=over, headers=headers(over))
    assert response.status_code == 413, response.text
    exact = body + pad * (limit - len(body))
    assert len(exact) == limit
    return await client.post(path, content=chunked(exact), headers=headers(exact))


async def status(h: Harness, key: str, approval_id: str) -> str:
    """The approval's status now (a long-poll would wait on the app's clock, which stands still)."""
    answer = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(answer.json()["status"])


async def test_a_slack_click_of_exactly_the_limit_is_taken(app: Served) -> None:
    h, emu = app.h, app.w.emu
    ask = {
        "executionId": "r1",
        "toolCallId": "c1",
        "toolName": "issue_refund",
        "parameters": {"a": 1},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
    }
    approval_id = (await h.client.post("/v1/approvals", json=ask, headers=h.auth(app.key))).json()[
        "approvalId"
    ]
    await h.delivered(approval_id)
    card = (await until(lambda: emu.messages))[0]
    payload = click_payload(emu, channel=card.channel, ts=card.ts, action_id="cosigner.approve", user="U1")
    body = urlencode({"payload": json.dumps(payload), "pad": ""}).encode()
    async with httpx.AsyncClient(base_url=app.url) as client:
        assert await status(h, app.key, approval_id) == "pending"
        taken = await exactly_then_over(
            client, "/slack/events", body, b"x", lambda b: signed_headers(b, SLACK_SECRET), SLACK_MAX
        )
    assert taken.status_code == 200, taken.text
    assert await status(h, app.key, approval_id) == "approved"


async def test_a_text_of_exactly_the_limit_is_taken(app: Served) -> None:
    h = app.h
    ask = {
        "executionId": "r1",
        "toolCallId": "c2",
        "toolName": "issue_refund",
        "parameters": {"a": 1},
        "surface": {"type": "sms", "phone": PHONE},
    }
    approval_id = (await h.client.post("/v1/approvals", json=ask, headers=h.auth(app.key))).json()[
        "approvalId"
    ]
    await h.delivered(approval_id, every_message=True)
    async with httpx.AsyncClient(base_url=app.url) as client:
        phone = TwilioCaller(
            client, public_url="http://127.0.0.1:8000", account_sid=TWILIO_ACCOUNT, auth_token=TWILIO_TOKEN
        )
        fields = [("MessageSid", "SM" + "1" * 32), ("From", PHONE), ("To", SENDER), ("Body", "YES")]
        base = len(urlencode([*fields, ("Pad", "")]))
        over = await phone.post("/sms/inbound", [*fields, ("Pad", "x" * (TWILIO_MAX + 1 - base))])
        assert over.status_code == 413
        assert await status(h, app.key, approval_id) == "pending"
        taken = await phone.post("/sms/inbound", [*fields, ("Pad", "x" * (TWILIO_MAX - base))])
    assert taken.status_code == 200, taken.text
    assert await status(h, app.key, approval_id) == "approved"


async def test_an_api_body_of_exactly_the_limit_is_taken(app: Served) -> None:
    ask = {
        "executionId": "r1",
        "toolCallId": "c3",
        "toolName": "issue_refund",
        "parameters": {"a": 1},
        "surface": {"type": "dashboard", "userId": "ada@acme.example"},
    }
    async with httpx.AsyncClient(base_url=app.url) as client:
        taken = await exactly_then_over(
            client,
            "/v1/approvals",
            json.dumps(ask).encode(),
            b" ",
            lambda _: {**JSON, **app.h.auth(app.key)},
            API_MAX,
        )
    assert taken.status_code == 201, taken.text


async def test_an_inbox_answer_of_exactly_the_limit_is_taken(app: Served) -> None:
    async with httpx.AsyncClient(base_url=app.url, headers={"Cookie": app.cookie}) as client:
        page = (await client.get("/inbox/")).text
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        form = urlencode({"decision": "approve", "comment": "", "csrf": csrf, "pad": ""}).encode()
        taken = await exactly_then_over(
            client, f"/inbox/approvals/{app.approval_id}/answer", form, b"x", lambda _: FORM, INBOX_MAX
        )
    assert taken.status_code == 303, taken.text
    assert await status(app.h, app.key, app.approval_id) == "approved"


async def test_teams_stops_at_its_limit_and_takes_an_activity_of_exactly_it(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await teams_request(h, key)
        card = await posted(h, emu, approval_id)
        tap = Tap(h.app)
        async with served(tap, free_port()) as url, httpx.AsyncClient(base_url=url) as client:
            await stops_at_the_limit(url, tap, "POST", "/teams/messages", JSON, TEAMS_MAX)
            activity = emu.invoke(card, "approve", TEAMS_ALICE)
            token = {**JSON, "Authorization": f"Bearer {emu.token_for(activity['serviceUrl'])}"}
            taken = await exactly_then_over(
                client, "/teams/messages", json.dumps(activity).encode(), b" ", lambda _: token, TEAMS_MAX
            )
        assert taken.status_code == 200 and taken.json()["statusCode"] == 200, taken.text
        assert await status(h, key, approval_id) == "approved"


async def test_the_test_clock_stops_at_its_limit_and_takes_a_body_of_exactly_it(app: Served) -> None:
    clock = Starlette(routes=SteppedClock(1_700_000_000).routes())
    clock.state.parts = app.h.parts
    tap = Tap(clock)
    async with served(tap, free_port()) as url, httpx.AsyncClient(base_url=url) as client:
        await stops_at_the_limit(url, tap, "POST", "/test/clock", JSON, CLOCK_MAX)
        taken = await exactly_then_over(
            client, "/test/clock", b'{"advanceSeconds": 1}', b" ", lambda _: JSON, CLOCK_MAX
        )
    assert taken.json() == {"now": 1_700_000_001.0}


@asynccontextmanager
async def installs(app: Served) -> AsyncIterator[tuple[str, Tap]]:
    """A multi-workspace Slack adapter's routes (its install pages), on loopback."""
    async with SlackEmulator.running(team_id="T0OTHER", client_id="cid", client_secret="csec") as emu:
        stores = SlackInstallStores.on(app.h.parts.db, client_id="cid", token_secret="s" * 32)
        config = SlackConfig(
            signing_secret="secret",
            client_id="cid",
            client_secret="csec",
            api_url=emu.api_url,
            installations=stores.installations,
            oauth_states=stores.states,
        )
        slack = SlackAdapter(config, app.h.desk)
        await slack.start()
        tap = Tap(Starlette(routes=slack.routes()))
        try:
            async with served(tap, free_port()) as url:
                yield url, tap
        finally:
            await slack.stop()


@pytest.mark.parametrize("path", ["/slack/install", "/slack/oauth_redirect"])
async def test_the_slack_install_pages_stop_at_the_slack_limit(app: Served, path: str) -> None:
    async with installs(app) as (url, tap):
        await stops_at_the_limit(url, tap, "GET", path, {}, SLACK_MAX)
