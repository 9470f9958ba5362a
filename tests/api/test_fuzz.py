"""Schemathesis fuzzes every operation of `/openapi.json` against the app in-process.

Requests are generated from the published schema, valid and invalid; every answer must be
documented, match its schema, and none may be a server error. The run is kept small so it
belongs in the ordinary suite.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import ignored_auth
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import (
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from bot.http.app import build_app, parts_of
from bot.http.openapi import APPROVER_ONLY, ENDPOINTS, openapi
from bot.policy.rules import load_policy
from storage import raw
from storage.database import Database
from storage.tables import approvals
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import click_payload, home_payload, signed_headers
from tests.databases import NOT_STORED, postgres_elsewhere
from tests.harness import (
    BASE_URL,
    DEFAULT_POLICY,
    POSTGRES_ENV,
    Harness,
    make_settings,
    postgres_url,
    slack_app,
)
from tests.surfaces.teams.world import teams_app

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(NOT_STORED)

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
    if (case.method.upper(), case.path) in FAILS_CLOSED:
        return _fails_closed(case, key)
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"}, excluded_checks=[positive_data_acceptance]
    )
    assert response.status_code < 500
    if case.meta is not None and case.meta.generation.mode.is_positive:
        assert response.status_code in ACCEPTED, response.text
        if response.status_code == 400:
            assert schema_cannot_say(response.json()["error"]), response.text


# Routes that answer every refusal as a 200 in their caller's own terms (the Claude Code hook
# route: a deny the agent obeys, since an agent reads any other status as "go ahead"): bad
# data and a missing key are not refused with a 4xx there, but each is a deny, never an allow.
FAILS_CLOSED = {(e.method.upper(), e.doc_path) for e in ENDPOINTS if e.fails_closed}


def _fails_closed(case: Any, key: str) -> None:
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"},
        excluded_checks=[
            positive_data_acceptance,
            negative_data_rejection,
            ignored_auth,
            missing_required_header,
        ],
    )
    assert response.status_code == 200, response.text
    decision = response.json()["hookSpecificOutput"]["permissionDecision"]
    if case.meta is not None and not case.meta.generation.mode.is_positive:
        assert decision == "deny", response.text
    assert decision in {"allow", "deny", "ask"}, response.text


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


# --- Agent-sent JSON Schemas: hostile parametersSchema probes on every route, both databases ---
#
# An agent's `parametersSchema` is untrusted (bot/approvals/agent_schema.py). Every route is
# fuzzed here as above, but each create carries one of PROBES, and each route that names an
# approval is sent one whose stored schema is hostile: one of PROBES an earlier release took
# (written to the row directly), or one of TAKEN; a decision brings an edit, so the stored
# schema is applied. None may answer 5xx. Before the fuzzing, each probe is sent once for
# certain: a create (400 naming parametersSchema, or 201) and an edit of each stored one.

PROBE_POLICY = """
[tools.issue_refund]
kind = "danger"
redact = ["cardToken"]
editable = ["amountCents", "note"]

[tenants.acme]
admins = { dashboard = ["u_1"] }
"""
PROBES: list[Any] = [
    {"$schema": 5},
    {"$schema": True},
    {"$schema": ["https://json-schema.org/draft/2020-12/schema"]},
    {"$schema": None},
    {"$schema": 1.5},
    {"$schema": {"$ref": "#"}},
    {"$ref": "#"},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"},
    {"properties": {"note": {"$ref": "https://example.com/x.json"}}},
    {"properties": {"note": {"$ref": "#/properties/note"}}},
    {"properties": {"note": {"pattern": "^(?=a)"}}},
    {"patternProperties": {"(?<=x)": {}}},
    {"propertyNames": {"pattern": "a{1001}"}},
    {"$defs": {"a": {"$id": "https://example.com/a"}}},
    {"properties": {"note": {"$dynamicRef": "#meta"}}},
]
TAKEN: list[dict[str, Any]] = [
    {"properties": {"note": {"pattern": "^(a+)+$"}, "cardToken": {"maxLength": 3}}},
    {"patternProperties": {"^(x+)+$": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
    {"unevaluatedProperties": False, "patternProperties": {"^(a|aa)+$": {}}, "properties": {"note": {}}},
    # Python's re could not compile this (RecursionError); RE2 can.
    {"properties": {"note": {"pattern": "(" * 2000 + "a" + ")" * 2000}}},
    # A map is no schema: its names are unknown keywords, so this $ref leads nowhere again.
    {"properties": {"note": {"$ref": "#/properties"}}},
]
EDITS: list[dict[str, Any]] = [{"amountCents": 400}, {"note": "a" * 40 + "!"}, {"note": 5}]
PROBE_CALL = {"orderId": "ord_1", "amountCents": 40000, "note": "late", "cardToken": "tok_x"}


@dataclass
class ProbeWorld:
    """One database's app for the probes, with its keys and the approvals it holds."""

    kind: str
    url: str
    schema_name: str | None
    workdir: Path
    app: Any = None
    agent: str = ""
    approver: str = ""
    approvals: list[str] = field(default_factory=list)


def _probe_world(kind: str) -> ProbeWorld:
    workdir = Path(tempfile.mkdtemp(prefix=f"cosigner-fuzz-probes-{kind}-"))
    pg = postgres_url()
    if kind == "sqlite":
        world = ProbeWorld(kind, f"sqlite+aiosqlite:///{workdir / 'probes.db'}", None, workdir)
    else:
        world = ProbeWorld(kind, pg or "", f"fuzz_{secrets.token_hex(6)}", workdir)
    if kind == "sqlite" or pg:
        db = Database(world.url, schema=world.schema_name)
        world.app = build_app(
            make_settings(), policy=load_policy(PROBE_POLICY), db=db, surfaces=[], run_workers=False
        )
    return world


PROBE_WORLDS = {kind: _probe_world(kind) for kind in ("sqlite", "postgres")}


async def _prepare(world: ProbeWorld) -> None:
    from bot.http.tenants import TenantKeys

    if world.schema_name is not None:
        admin = create_async_engine(world.url, poolclass=NullPool)
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{world.schema_name}"'))
        await admin.dispose()
    db = Database(world.url, schema=world.schema_name)
    try:
        await db.migrate()
        made = await TenantKeys(db).create("acme")
        world.agent, world.approver = made.agent.key, made.approver.key
    finally:
        await db.close()


async def _store(world: ProbeWorld, stored: dict[str, dict[str, Any]]) -> None:
    """Give each approval its hostile schema in the row, as an earlier release stored it."""
    db = Database(world.url, schema=world.schema_name)
    try:
        async with raw.write(db) as conn:
            for aid, schema in stored.items():
                row = sa.select(approvals.c.edit).where(approvals.c.id == aid)
                edit = {**json.loads((await conn.execute(row)).scalar_one()), "schema": schema}
                await conn.execute(
                    sa.update(approvals).where(approvals.c.id == aid).values(edit=json.dumps(edit))
                )
    finally:
        await db.close()
    for aid in stored:
        parts_of(world.app).db.known.forget(aid)  # the app's copy of the row it wrote


async def _drop(world: ProbeWorld) -> None:
    if world.schema_name is not None:
        admin = create_async_engine(world.url, poolclass=NullPool)
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{world.schema_name}" CASCADE'))
        await admin.dispose()


def _probe_call(schema: Any, world: ProbeWorld, n: int) -> Any:
    body: dict[str, Any] = {
        "executionId": "run_probes",
        "toolCallId": f"c{n}",
        "toolName": "issue_refund",
        "parameters": PROBE_CALL,
        "surface": {"type": "dashboard", "userId": "u_1"},
        "acceptsEdits": True,
        "parametersSchema": schema,
    }
    case = PROBE_SCHEMAS[world.kind]["/v1/approvals"]["POST"].Case(body=body)
    return case.call(headers={"Authorization": f"Bearer {world.agent}"})


def _probe_edit(world: ProbeWorld, aid: str, edit: dict[str, Any]) -> Any:
    body: dict[str, Any] = {"decision": "approve", "userId": "u_1", "edit": edit}
    operation = PROBE_SCHEMAS[world.kind]["/v1/approvals/{approvalId}/decision"]["POST"]
    case = operation.Case(path_parameters={"approvalId": aid}, body=body)
    return case.call(headers={"Authorization": f"Bearer {world.approver}"})


def _probed(kind: str) -> Iterator[ProbeWorld]:
    if kind == "postgres" and not postgres_url():
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV}=postgresql+asyncpg://... to fuzz it too")
    world = PROBE_WORLDS[kind]
    try:
        asyncio.run(_prepare(world))
        for n, probe in enumerate(PROBES):  # each refused at create, naming the field
            r = _probe_call(probe, world, n)
            assert r.status_code == 400 and r.json()["error"]["field"] == "parametersSchema", (probe, r.text)
        made = {}
        for n, schema in enumerate(PROBES + TAKEN):
            r = _probe_call({"type": "object"} if n < len(PROBES) else schema, world, 100 + n)
            assert r.status_code == 201, r.text
            made[r.json()["approvalId"]] = schema
        asyncio.run(_store(world, {aid: s for aid, s in made.items() if s in PROBES}))
        for aid, schema in made.items():  # each stored schema applied to an edit
            for edit in EDITS[1:]:
                r = _probe_edit(world, aid, edit)
                if schema in PROBES:  # refused, saying why, and nothing decided
                    assert r.status_code == 400, r.text
                    assert "not one Cosigner applies" in r.json()["error"]["problems"][0]["message"]
                else:  # applied: refused by a rule or approved
                    assert r.status_code in (200, 400, 409), r.text
        world.approvals[:] = list(made)
        yield world
    finally:
        shutdown_lifespans()
        asyncio.run(_drop(world))
        shutil.rmtree(world.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def probed_sqlite() -> Iterator[ProbeWorld]:
    """The SQLite app, its keys, and approvals whose schemas are hostile."""
    yield from _probed("sqlite")


@pytest.fixture(scope="module")
def probed_postgres() -> Iterator[ProbeWorld]:
    """The PostgreSQL app (skipped without COSIGNER_TEST_POSTGRES_URL), as `probed_sqlite`."""
    yield from _probed("postgres")


def _probe_schema(world: ProbeWorld) -> OpenApiSchema:
    probes = schemathesis.openapi.from_dict(openapi())
    probes.app = world.app

    @probes.hook("flatmap_body")
    def with_probes(context: Any, body: Any) -> Any:
        where = (context.operation.method.upper(), context.operation.path) if context.operation else None
        if not isinstance(body, dict):
            return st.just(body)
        if where == ("POST", "/v1/approvals"):
            return st.sampled_from(PROBES + TAKEN).map(
                lambda p: {**body, "parametersSchema": p, "acceptsEdits": True}
            )
        if where == ("POST", "/v1/approvals/{approvalId}/decision"):
            edit = st.sampled_from(EDITS)
            return edit.map(lambda e: {**body, "decision": "approve", "userId": "u_1", "edit": e})
        return st.just(body)

    @probes.hook("flatmap_path_parameters")
    def at_probed_approvals(context: Any, parameters: dict[str, Any] | None) -> Any:
        streams = context.operation is not None and context.operation.path.endswith("/events")
        if not isinstance(parameters, dict) or "approvalId" not in parameters or streams:
            return st.just(parameters)  # an event stream of a pending approval would not end
        return st.sampled_from(world.approvals).map(lambda aid: {**parameters, "approvalId": aid})

    @probes.hook("map_query")
    def without_waiting(context: Any, query: Any) -> Any:
        # A long-poll of a pending approval waits its whole `wait` on the wall clock.
        return {k: v for k, v in query.items() if k != "wait"} if isinstance(query, dict) else query

    return probes


PROBE_SCHEMAS = {kind: _probe_schema(world) for kind, world in PROBE_WORLDS.items()}
_APPROVER_ROUTES = {(e.method.upper(), e.doc_path) for e in ENDPOINTS if e.scopes == APPROVER_ONLY}


def _fuzzed(case: Any, world: ProbeWorld) -> None:
    key = world.approver if (case.method.upper(), case.path) in _APPROVER_ROUTES else world.agent
    # A probe or an approval id put in a case can make a negative case valid: conformance of
    # accepted and refused data is the first test's; here the answers must be documented, not 5xx.
    if (case.method.upper(), case.path) in FAILS_CLOSED:
        return _fails_closed(case, key)
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"},
        excluded_checks=[positive_data_acceptance, negative_data_rejection],
    )
    assert response.status_code < 500, response.text


@PROBE_SCHEMAS["sqlite"].parametrize()
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_hostile_parameters_schemas_on_every_route_sqlite(case: Any, probed_sqlite: ProbeWorld) -> None:
    _fuzzed(case, probed_sqlite)


@PROBE_SCHEMAS["postgres"].parametrize()
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_hostile_parameters_schemas_on_every_route_postgres(case: Any, probed_postgres: ProbeWorld) -> None:
    _fuzzed(case, probed_postgres)


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


@POSTGRES_ELSEWHERE
@pytest.mark.parametrize("payload", NOT_OBJECTS)
async def test_a_signed_slack_interaction_whose_payload_is_not_an_object_is_refused(
    db_kind: str, payload: str
) -> None:
    async with slack_card(db_kind) as (_, _, client, _):
        refused(await signed_interaction(client, payload), "payload")


@POSTGRES_ELSEWHERE
async def test_signed_slack_bodies_nested_5000_deep_are_refused_before_they_are_parsed(db_kind: str) -> None:
    event = b'{"type": "event_callback", "event": ' * DEEP + b"{}" + b"}" * DEEP
    interaction = '{"type": "block_actions", "actions": ' + "[" * DEEP + "]" * DEEP + "}"
    async with slack_card(db_kind) as (_, _, client, _):
        refused(await signed_event(client, event), "body")
        refused(await signed_interaction(client, interaction), "payload")
        assert "64 levels" in (await signed_event(client, event)).json()["error"]["message"]


@POSTGRES_ELSEWHERE
async def test_a_teams_activity_nested_5000_deep_is_refused_before_its_token_is_checked(db_kind: str) -> None:
    activity = b'{"type": "invoke", "value": ' * DEEP + b"{}" + b"}" * DEEP
    async with teams_app(db_kind) as (h, _):
        transport = httpx.ASGITransport(app=h.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            refused(await client.post("/teams/messages", content=activity), "body")


@POSTGRES_ELSEWHERE
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
