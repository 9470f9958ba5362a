"""An agent's `parametersSchema` is untrusted input: what it may hold, what is refused at
create (naming the place), and that applying it to an edit is bounded work off the event
loop whose messages never carry a value."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.approvals import agent_schema, schema_rules
from contracts.errors import InvalidRequest
from storage import raw
from storage.tables import approvals
from tests.api.test_edits import CALL, POLICY, SURFACE, decide
from tests.harness import Harness, cosigner_app, until

SECRET = "tok_SUPERSECRET_4111"


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        yield h, await h.create_tenant("acme")


async def ask(h: Harness, key: str, schema: Any, call: str = "c1", **parameters: Any) -> Any:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {**CALL, **parameters},
        "surface": SURFACE,
        "acceptsEdits": True,
        "parametersSchema": schema,
    }
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


def dag(levels: int) -> dict[str, Any]:
    """A schema of `levels` definitions, each pointing twice to the next: small, but 2^levels
    subschemas once its references are followed."""
    defs: dict[str, Any] = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "properties": {"note": {"$ref": "#/$defs/d0"}}}


REFUSED = [
    ({"$schema": 5}, "names $schema 5"),
    ({"$schema": True}, "names $schema true"),
    ({"$schema": ["https://json-schema.org/draft/2020-12/schema"]}, "names $schema ["),
    ({"$schema": {"a": 1}}, 'names $schema {"a": 1}'),
    ({"$ref": "#"}, 'parametersSchema["$ref"] (#) leads back to a schema that contains it'),
    (
        {"$defs": {"a": {"properties": {"x": {"$ref": "#/$defs/b"}}}, "b": {"$ref": "#/$defs/a"}}},
        "leads back to a schema that contains it",
    ),
    (
        {"properties": {"note": {"$ref": "https://example.com/note.json"}}},
        "does not point within this schema",
    ),
    ({"properties": {"note": {"$ref": "#/$defs/missing"}}}, "points to nothing in this schema"),
    (
        {"properties": {"note": {"pattern": "^(?=a)"}}},
        "parametersSchema.properties.note.pattern is not a regular",
    ),
    ({"properties": {"note": {"pattern": r"(a)\1"}}}, "parametersSchema.properties.note.pattern"),
    ({"properties": {"note": {"pattern": "(" * 3000 + ")" * 3000 + "(?<=x)"}}}, "RE2"),
    ({"patternProperties": {"(?<!x)y": {}}}, 'parametersSchema.patternProperties["(?<!x)y"]'),
    ({"propertyNames": {"pattern": "a{1001}"}}, "parametersSchema.propertyNames.pattern"),
    ({"$defs": {"a": {"$id": "https://example.com/a"}}}, 'parametersSchema["$defs"].a["$id"]'),
    ({"properties": {"note": {"$dynamicRef": "#meta"}}}, 'note["$dynamicRef"] is not supported'),
    (dag(20), "over 10000 subschemas"),
]


@pytest.mark.parametrize(("schema", "says"), REFUSED)
async def test_a_schema_cosigner_cannot_apply_in_bounded_work_is_refused_at_create_naming_the_place(
    schema: dict[str, Any], says: str
) -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        response = await ask(h, key, schema)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "INVALID_REQUEST" and error["field"] == "parametersSchema", error
        assert says in error["message"], error["message"]


async def test_what_a_schema_may_hold_is_taken_and_applied(world: tuple[Harness, str]) -> None:
    h, key = world
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://tools.example.com/issue_refund",
        "$defs": {
            "cents": {"type": "integer", "minimum": 1},
            "order": {"type": "string", "pattern": r"^ord_\d+$"},
        },
        "type": "object",
        "properties": {
            "amountCents": {"$ref": "#/$defs/cents"},
            "note": {"type": "string", "pattern": "^[a-z ]+$"},
            "orderId": {"$ref": "#/$defs/order"},
        },
        "patternProperties": {"^x-": {"type": "string"}},
        "propertyNames": {"pattern": "^[A-Za-z-]+$"},
        "unevaluatedProperties": {"type": "string"},
    }
    start = await ask(h, key, schema)
    assert start.status_code == 201, start.text
    aid = start.json()["approvalId"]
    refused = await decide(h, aid, edit={"amountCents": 0, "note": "Late!"})
    assert refused.status_code == 400
    problems = {p["field"]: p["message"] for p in refused.json()["error"]["problems"]}
    assert problems == {
        "amountCents": "must be at least 1 (minimum)",
        "note": 'must match the pattern "^[a-z ]+$" (pattern)',
    }
    done = await decide(h, aid, edit={"amountCents": 400, "note": "late again"})
    assert done.status_code == 200 and done.json()["status"] == "approved", done.text


DRAFTS = [
    "http://json-schema.org/draft-03/schema#",
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
]


@pytest.mark.parametrize("draft", DRAFTS)
async def test_each_draft_cosigner_knows_is_taken_and_its_rules_applied(draft: str) -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        schema = {"$schema": draft, "properties": {"amountCents": {"type": "integer", "maximum": 500}}}
        start = await ask(h, key, schema)
        assert start.status_code == 201, start.text
        refused = await decide(h, start.json()["approvalId"], edit={"amountCents": 501})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["problems"] == [
            {"field": "amountCents", "message": "must be at most 500 (maximum)"}
        ]


async def test_a_backtracking_pattern_is_matched_in_linear_time(world: tuple[Harness, str]) -> None:
    # Python's re takes 2^n steps for this pattern on "a"*n + "!": the edit would never end.
    h, key = world
    start = await ask(h, key, {"properties": {"note": {"pattern": "^(a+)+$"}}}, note="a" * 64 + "!")
    assert start.status_code == 201, start.text
    refused = await decide(h, start.json()["approvalId"], edit={"amountCents": 400})
    assert refused.status_code == 400
    assert refused.json()["error"]["problems"] == [
        {"field": "amountCents", "message": 'note must match the pattern "^(a+)+$" (pattern)'}
    ]


async def test_an_edit_refused_by_the_schema_names_the_place_and_rule_never_a_value(
    world: tuple[Harness, str],
) -> None:
    h, key = world
    schema = {"properties": {"cardToken": {"maxLength": 5}, "note": {"enum": ["late", "lost"]}}}
    start = await ask(h, key, schema, cardToken=SECRET)
    assert start.status_code == 201, start.text
    refused = await decide(h, start.json()["approvalId"], edit={"amountCents": 400})
    assert refused.status_code == 400
    assert SECRET not in refused.text and "SUPERSECRET" not in refused.text
    assert refused.json()["error"]["problems"] == [
        {"field": "amountCents", "message": "cardToken must be at most 5 characters long (maxLength)"}
    ]


async def test_an_edit_whose_check_takes_too_many_steps_is_refused_and_nothing_is_decided(
    world: tuple[Harness, str],
) -> None:
    h, key = world
    item = {"allOf": [{"type": "string", "minLength": 1, "maxLength": 10}] * 10}
    schema = {"properties": {"tags": {"type": "array", "items": item}}}
    start = await ask(h, key, schema, tags=["a"] * 1000)
    assert start.status_code == 201, start.text
    aid = start.json()["approvalId"]
    refused = await decide(h, aid, edit={"amountCents": 400})
    assert refused.status_code == 400
    message = refused.json()["error"]["problems"][0]["message"]
    assert f"takes over {schema_rules.MAX_STEPS} steps; no edit is possible" in message
    got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
    assert got.json()["status"] == "pending"


async def test_a_schema_stored_before_these_rules_is_refused_at_the_edit_not_a_500(
    world: tuple[Harness, str],
) -> None:
    # An approval created by an earlier release kept a schema that recurses (`$ref: "#"`): its
    # edit was a RecursionError, a 500.
    h, key = world
    start = await ask(h, key, {"type": "object"})
    aid = start.json()["approvalId"]
    db = h.parts.db
    async with raw.write(db) as conn:
        stored = (await conn.execute(sa.select(approvals.c.edit).where(approvals.c.id == aid))).scalar_one()
        edit = {**json.loads(stored), "schema": {"$ref": "#"}}
        await conn.execute(sa.update(approvals).where(approvals.c.id == aid).values(edit=json.dumps(edit)))
    db.known.forget(aid)
    refused = await decide(h, aid, edit={"amountCents": 400})
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["problems"][0]["message"]
    assert "the tool's schema is not one Cosigner applies" in message and "leads back" in message


async def test_the_event_loop_answers_while_an_edit_is_checked(
    world: tuple[Harness, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    h, key = world
    start = await ask(h, key, {"type": "object"})
    aid = start.json()["approvalId"]
    started, release = threading.Event(), threading.Event()
    check = schema_rules._problems

    def held(
        schema: dict[str, Any], call: dict[str, Any], shown: Mapping[str, Any], changed: Sequence[str]
    ) -> list[dict[str, str]]:
        started.set()
        release.wait(30)  # on the event loop, this would hold /healthz below until it ended
        return check(schema, call, shown, changed)

    monkeypatch.setattr(schema_rules, "_problems", held)
    edit = asyncio.ensure_future(decide(h, aid, edit={"amountCents": 400}))
    try:
        await until(started.is_set)  # the edit's check is on the worker thread, held there
        health = await h.client.get("/healthz")
        assert health.status_code == 200 and not edit.done() and not release.is_set()
    finally:
        release.set()
    assert (await edit).json()["status"] == "approved"


async def test_an_edit_check_past_its_deadline_is_refused_and_nothing_is_decided(
    world: tuple[Harness, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    h, key = world
    start = await ask(h, key, {"type": "object"})
    aid = start.json()["approvalId"]
    release = threading.Event()
    check = schema_rules._problems

    def held(
        schema: dict[str, Any], call: dict[str, Any], shown: Mapping[str, Any], changed: Sequence[str]
    ) -> list[dict[str, str]]:
        release.wait(30)
        return check(schema, call, shown, changed)

    monkeypatch.setattr(schema_rules, "_problems", held)
    monkeypatch.setattr(schema_rules, "DEADLINE_SECONDS", 0.01)
    try:
        refused = await decide(h, aid, edit={"amountCents": 400})
    finally:
        release.set()
    assert refused.status_code == 400
    assert "took over 0.01 s; no edit is possible" in refused.json()["error"]["problems"][0]["message"]
    got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
    assert got.json()["status"] == "pending"


KEYWORDS = [
    *"$ref $defs definitions properties patternProperties additionalProperties propertyNames".split(),
    *"items prefixItems contains allOf anyOf oneOf not if then else required enum const type".split(),
    *"pattern maxLength minimum multipleOf unevaluatedProperties unevaluatedItems dependentSchemas".split(),
    *"$schema $id $anchor $dynamicRef format uniqueItems minItems".split(),
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(["a", "#", "#/$defs/a", "^a+$", "(?=a)"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", *KEYWORDS]), inner, max_size=4)
    ),
    max_leaves=12,
)
SCHEMAS = st.dictionaries(st.sampled_from(KEYWORDS), JSON, max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS, call=st.dictionaries(st.sampled_from(["a", "b"]), JSON, max_size=2))
def test_any_schema_is_refused_clearly_or_applied_without_an_error(
    schema: dict[str, Any], call: dict[str, Any]
) -> None:
    try:
        agent_schema.check(schema)
    except InvalidRequest as exc:
        assert exc.details == {"field": "parametersSchema"} and exc.message.startswith("parametersSchema")
        return
    found = schema_rules._problems(schema, {"a": 1, **call}, {"a": 1, **call}, ["a"])
    assert all(set(p) == {"field", "message"} for p in found)
