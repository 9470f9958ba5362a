"""Schemathesis fuzzes every operation of `/openapi.json` against the app in-process.

Requests are generated from the published schema, valid and invalid; every answer must be
documented, match its schema, and none may be a server error. The run is kept small so it
belongs in the ordinary suite.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import positive_data_acceptance

from bot.http.app import build_app
from bot.http.openapi import openapi
from bot.policy.rules import load_policy
from storage.database import Database
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import click_payload, home_payload, signed_headers
from tests.harness import BASE_URL, DEFAULT_POLICY, Harness, make_settings, slack_app
from tests.surfaces.teams.world import teams_app

EXAMPLES = 12


async def prepared(url: str) -> str:
    """Migrate the database and create the tenant whose key the fuzzer sends."""
    from bot.http.tenants import TenantKeys

    db = Database(url)
    try:
        await db.migrate()
        return (await TenantKeys(db).create("acme")).agent.key
    finally:
        await db.close()


# Built at import so the schema's every check reaches it; started on the first request,
# after the fixture below has migrated its database and created the tenant.
WORKDIR = Path(tempfile.mkdtemp(prefix="cosigner-fuzz-"))
URL = f"sqlite+aiosqlite:///{WORKDIR / 'fuzz.db'}"
# No workers: generated callback URLs must not be called, and nothing needs delivering.
APP = build_app(
    make_settings(), policy=load_policy(DEFAULT_POLICY), db=Database(URL), surfaces=[], run_workers=False
)


@pytest.fixture(scope="module")
def key() -> Iterator[str]:
    """The tenant key the fuzzer sends."""
    try:
        yield asyncio.run(prepared(URL))
        # Schemathesis keeps the app started for the process; stop it while its database exists.
        shutdown_lifespans()
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)


schema = schemathesis.openapi.from_dict(openapi())
schema.app = APP


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: Any, key: str) -> None:
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"}, excluded_checks=[positive_data_acceptance]
    )
    assert response.status_code < 500
    if case.meta is not None and case.meta.generation.mode.is_positive:
        assert response.status_code in ACCEPTED, response.text
        if response.status_code == 400:
            assert schema_cannot_say(response.json()["error"]), response.text


# Schema-valid calls the API may still refuse: the policy (422: nobody can approve on that
# surface; 403, 409, 429), and, as 400, what JSON Schema cannot state (below).
ACCEPTED = {200, 201, 400, 401, 403, 404, 409, 422, 429}


def schema_cannot_say(error: dict[str, Any]) -> bool:
    """A 400 for a schema-valid call: JSON Schema counts `10.0` as an integer and cannot
    state the depth and size limits of `parameters` and `result`, nor their canonical form
    (integers beyond 2^53); nothing else may be refused."""
    problems = error.get("problems") or [error]
    return all(
        p.get("message") == "Input should be a valid integer"
        or str(p.get("field")).startswith(("parameters", "result"))
        for p in problems
    )


# === Inbound-body probes ================================================================
# Bodies from outside that reach a parser: Slack's really signed, Teams' before its token is
# checked, the API's with a key. A payload that is not a JSON object, JSON nested 5,000 deep,
# or a field of another JSON type where Bolt indexes one: each is a clear 4xx that decides
# nothing, never a 500 (each of these was one). On SQLite and PostgreSQL (`db_kind`); the
# client shows a 500 as a response instead of raising the app's exception.

SLACK_SECRET = "fuzz-slack-signing-secret"
SLACK_APP = "A0COSIGNER"
DEEP = 5000
NOT_OBJECTS = ['"cosigner.approve"', '["cosigner.approve"]', "12900", "null", "true"]
JSON_TYPE = {"Content-Type": "application/json"}


@asynccontextmanager
async def slack_card(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, httpx.AsyncClient, Card]]:
    """An app with Slack on its emulator, one pending request whose card is posted, and a client
    that answers a 500 rather than raising it: (harness, emulator, client, the card)."""
    async with slack_app(DEFAULT_POLICY, secret=SLACK_SECRET, app_id=SLACK_APP, database_kind=db_kind) as (
        h,
        emu,
    ):
        key = await h.create_tenant("acme")
        ask = {
            "executionId": "run_1",
            "toolCallId": "call_1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_1", "amountCents": 12900},
            "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        }
        created = await h.client.post("/v1/approvals", json=ask, headers=h.auth(key))
        assert created.status_code == 201, created.text
        approval_id = str(created.json()["approvalId"])
        await h.delivered(approval_id)
        posted = emu.messages[0]
        transport = httpx.ASGITransport(app=h.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield h, emu, client, Card(key, approval_id, posted.channel, posted.ts)
            answer = await client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
            assert answer.json()["status"] == "pending", "a probe decided the request"


@dataclass(frozen=True)
class Card:
    """The probed request: the agent's key, its id, and where its card is."""

    key: str
    approval_id: str
    channel: str
    ts: str


async def signed_interaction(client: httpx.AsyncClient, payload: str) -> httpx.Response:
    """POST `payload=<payload>` form-encoded and really signed, as Slack posts interactions."""
    body = urlencode({"payload": payload}).encode()
    return await client.post("/slack/events", content=body, headers=signed_headers(body, SLACK_SECRET))


async def signed_event(client: httpx.AsyncClient, body: bytes) -> httpx.Response:
    """POST an Events API body, really signed."""
    headers = {**signed_headers(body, SLACK_SECRET), "Content-Type": "application/json"}
    return await client.post("/slack/events", content=body, headers=headers)


def refused(response: httpx.Response, field: str) -> None:
    """A 400 INVALID_REQUEST naming `field`."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("INVALID_REQUEST", field), error


@pytest.mark.parametrize("payload", NOT_OBJECTS)
async def test_a_signed_slack_interaction_whose_payload_is_not_an_object_is_refused(
    db_kind: str, payload: str
) -> None:
    async with slack_card(db_kind) as (_, _, client, _):
        refused(await signed_interaction(client, payload), "payload")


async def test_signed_slack_bodies_nested_5000_deep_are_refused_before_they_are_parsed(db_kind: str) -> None:
    event = b'{"type": "event_callback", "event": ' * DEEP + b"{}" + b"}" * DEEP
    interaction = '{"type": "block_actions", "actions": ' + "[" * DEEP + "]" * DEEP + "}"
    async with slack_card(db_kind) as (_, _, client, _):
        refused(await signed_event(client, event), "body")
        refused(await signed_interaction(client, interaction), "payload")
        assert "64 levels" in (await signed_event(client, event)).json()["error"]["message"]


async def test_a_teams_activity_nested_5000_deep_is_refused_before_its_token_is_checked(db_kind: str) -> None:
    activity = b'{"type": "invoke", "value": ' * DEEP + b"{}" + b"}" * DEEP
    async with teams_app(db_kind) as (h, _):
        transport = httpx.ASGITransport(app=h.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            refused(await client.post("/teams/messages", content=activity), "body")


@pytest.mark.parametrize("depth", [65, 990, DEEP])
async def test_an_api_body_nested_past_the_limit_is_refused_naming_the_limit(
    db_kind: str, depth: int
) -> None:
    parameters = '{"a": ' * depth + "1" + "}" * depth
    surface = '{"type": "dashboard", "userId": "u_42"}'
    body = (
        f'{{"executionId": "r", "toolCallId": "c", "toolName": "lookup_order", "surface": {surface}, '
        f'"parameters": {parameters}}}'
    )
    async with slack_card(db_kind) as (h, _, client, card):
        answer = await client.post("/v1/approvals", content=body, headers={**h.auth(card.key), **JSON_TYPE})
        refused(answer, "body")
        assert "more than 64 levels deep" in answer.json()["error"]["message"]


# Where Bolt (or Cosigner's listeners after it) reads a Slack payload expecting Slack's types,
# and values of every other JSON type to put there.
CLICK_FIELDS = [
    "type",
    "team",
    "enterprise",
    "user",
    "channel",
    "team_id",
    "enterprise_id",
    "user_id",
    "channel_id",
    "thread_ts",
    "authorizations",
    "authorizations.0",
    "event",
    "view",
    "actions",
    "actions.0",
    "actions.0.action_id",
    "actions.0.block_id",
    "actions.0.value",
    "response_urls",
    "callback_id",
    "action_id",
    "command",
    "message",
    "message.blocks",
    "container",
    "container.channel_id",
    "container.message_ts",
    "team.id",
    "team.enterprise_id",
    "user.id",
    "user.team_id",
    "enterprise.id",
    "channel.id",
    "trigger_id",
    "response_url",
    "api_app_id",
]
EVENT_FIELDS = [
    "type",
    "team_id",
    "enterprise_id",
    "api_app_id",
    "authorizations",
    "authorizations.0",
    "event",
    "event.type",
    "event.user",
    "event.channel",
    "event.tab",
    "event.message",
    "event.item",
    "event.team",
    "event.user_team",
    "is_ext_shared_channel",
]
VALUES: list[Any] = [
    "x",
    5,
    True,
    None,
    [],
    [1],
    {},
    {"id": 5},
    [{"team_id": 5}],
    {"id": "U1", "team_id": []},
]


def with_value(payload: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `payload` with `path` (dots; list indexes) set to `value`, made as needed."""
    copied = copy.deepcopy(payload)
    node: Any = copied
    *parents, last = path.split(".")
    for key in parents:
        if isinstance(node, list):
            node = node[int(key)]
        else:
            if not isinstance(node.get(key), dict | list):
                node[key] = {}
            node = node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return copied


async def test_signed_slack_payloads_with_a_field_of_another_json_type_are_never_a_500(db_kind: str) -> None:
    async with slack_card(db_kind) as (_, emu, client, card):
        failed = []
        for action in ("cosigner.deny", "cosigner.full_call"):
            # U9 may not decide: nothing may be decided whatever a probe changes.
            click = click_payload(emu, channel=card.channel, ts=card.ts, action_id=action, user="U9")
            for path in CLICK_FIELDS:
                for value in VALUES:
                    answer = await signed_interaction(client, json.dumps(with_value(click, path, value)))
                    if answer.status_code >= 500:
                        failed.append(f"{action} {path}={value!r}")
        home = home_payload(emu, user="U1", team="T0ACME")
        for path in EVENT_FIELDS:
            for value in VALUES:
                answer = await signed_event(client, json.dumps(with_value(home, path, value)).encode())
                if answer.status_code >= 500:
                    failed.append(f"app_home_opened {path}={value!r}")
        assert not failed, failed
