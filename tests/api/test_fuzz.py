"""Schemathesis fuzzes every operation of `/openapi.json` against the app in-process.

Requests are generated from the published schema, valid and invalid; every answer must be
documented, match its schema, and none may be a server error. The run is kept small so it
belongs in the ordinary suite.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance
from schemathesis.specs.openapi.schemas import OpenApiSchema
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from bot.http.app import build_app, parts_of
from bot.http.openapi import APPROVER_ONLY, ENDPOINTS, openapi
from bot.policy.rules import load_policy
from storage import raw
from storage.database import Database
from storage.tables import approvals
from tests.harness import DEFAULT_POLICY, POSTGRES_ENV, make_settings, postgres_url

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
