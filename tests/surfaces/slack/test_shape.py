"""A Slack body is read as Bolt reads it and refused, naming the field, where Bolt would fail."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.request.internals import parse_body

from contracts.errors import InvalidRequest
from surfaces.slack.interactions import block_actions_payload, view_submission_payload
from surfaces.slack.shape import bolt_body, check

BUTTON = {"type": "button", "block_id": "cosigner:apv_1", "action_id": "cosigner.approve", "value": "apv_1"}
CLICK = block_actions_payload(action=BUTTON, blocks=[], channel="C1", ts="1.2", enterprise="E1")
SUBMISSION = view_submission_payload(
    view={"type": "modal", "callback_id": "cosigner.deny", "blocks": []}, values={}
)
HOME = {
    "type": "event_callback",
    "team_id": "T1",
    "authorizations": [{"team_id": "T1", "user_id": "U0BOT", "is_enterprise_install": False}],
    "event": {"type": "app_home_opened", "user": "U1", "channel": "D1", "tab": "home"},
}
COMMAND = {"command": "/cosigner", "text": "denials", "user_id": "U1", "team_id": "T1", "trigger_id": "1.2"}


def as_form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (as_form(CLICK), "application/x-www-form-urlencoded"),
        (as_form(SUBMISSION), "application/x-www-form-urlencoded"),
        (json.dumps(HOME).encode(), "application/json"),
        (json.dumps({"type": "url_verification", "challenge": "c"}).encode(), None),
        (urlencode(COMMAND).encode(), "application/x-www-form-urlencoded"),
        (b"", None),
    ],
    ids=["click", "submission", "event", "url_verification", "command", "empty"],
)
def test_what_slack_sends_is_read_exactly_as_bolt_reads_it(body: bytes, content_type: str | None) -> None:
    assert bolt_body(body, content_type) == parse_body(body.decode(), content_type)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ("[]", "payload"),
        ('"x"', "payload"),
        ("null", "payload"),
        ("{", "payload"),
        ("[" * 65 + "]" * 65, "payload"),
    ],
)
def test_an_interaction_payload_that_is_not_an_object_is_refused(payload: str, field: str) -> None:
    body = urlencode({"payload": payload}).encode()
    with pytest.raises(InvalidRequest) as refused:
        bolt_body(body, "application/x-www-form-urlencoded")
    assert refused.value.details["field"] == field


def test_a_body_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="UTF-8"):
        bolt_body(b"payload=\xff", None)


@pytest.mark.parametrize(
    ("base", "change", "field"),
    [
        (CLICK, {"type": 5}, "type"),
        (CLICK, {"actions": "cosigner.approve"}, "actions"),
        (CLICK, {"actions": []}, "actions"),
        (CLICK, {"actions": [{"value": "apv_1"}]}, "actions"),
        (CLICK, {"actions": [{**BUTTON, "block_id": 5}]}, "actions.0.block_id"),
        (CLICK, {"team": 5}, "team"),
        (CLICK, {"team": {"id": ["T1"]}}, "team.id"),
        (CLICK, {"user": {"id": "U1", "team_id": {}}}, "user.team_id"),
        (CLICK, {"enterprise": []}, "enterprise"),
        (CLICK, {"channel": True}, "channel"),
        (CLICK, {"response_url": 5}, "response_url"),
        (CLICK, {"trigger_id": []}, "trigger_id"),
        (CLICK, {"response_urls": [5]}, "response_urls"),
        (CLICK, {"event": None}, "event"),
        (SUBMISSION, {"view": "x"}, "view"),
        (SUBMISSION, {"view": {"callback_id": 5}}, "view.callback_id"),
        (HOME, {"authorizations": {"team_id": "T1"}}, "authorizations"),
        (HOME, {"authorizations": [{"team_id": 5}]}, "authorizations.0.team_id"),
        (HOME, {"authorizations": [{"enterprise": 5}]}, "authorizations.0.enterprise"),
        (HOME, {"event": {"type": ["app_home_opened"]}}, "event.type"),
        (HOME, {"event": {"type": "app_home_opened", "user": 5}}, "event.user"),
        (HOME, {"event": {"type": "x", "message": {"user": {"id": 5}}}}, "event.message.user.id"),
        (COMMAND, {"command": 5}, "command"),
    ],
)
def test_a_field_bolt_reads_as_slack_types_it_is_refused_otherwise(
    base: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check({**base, **change})
    assert refused.value.details["field"] == field
    assert "must" in refused.value.message


def test_a_payload_nested_past_the_limit_is_refused_as_parsed_too() -> None:
    deep: dict[str, Any] = {"type": "block_actions"}
    node = deep
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(InvalidRequest, match="64 levels"):
        check(deep)
    check({**HOME, "event": {"type": "app_home_opened", "x": [[[[]]]]}})  # shallow: taken
