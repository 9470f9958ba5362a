"""What Bolt assumes of a Slack body, checked before Bolt reads it.

Bolt builds each request's context and matches listeners by indexing the body as Slack
shapes it (`body["actions"][0]["action_id"]`, `"id" in body["team"]`, a regular expression
searched in `view.callback_id`) and answers 500 for anything else. So a signed body, and a
Socket Mode envelope's payload, is read here first exactly as Bolt will read it, and
refused with `InvalidRequest` naming the field when it is not a JSON object, nests more
than `MAX_DEPTH` levels, or holds a value of another JSON type where Bolt reads one. The
fields are those Bolt 1.x reads without looking at their type; Cosigner's own listeners
check the rest (`parse.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from contracts.errors import InvalidRequest
from surfaces.bodies import MAX_DEPTH, refuse_deep, too_deep_value

__all__ = ["bolt_body", "check"]

# Read into Bolt's context, or matched by listeners: a string (or null/absent) in any object
# Bolt reads ids from.
_STRINGS = ("type", "team_id", "enterprise_id", "user_id", "channel_id", "thread_ts")
# Slack's owners: an id string, or an object whose ids are strings.
_OWNERS = ("enterprise", "team", "user", "channel")
# Objects Bolt walks into for ids (where they are objects at all).
_WALKED = ("event", "message", "previous_message", "item", "assistant_thread")
# Matched against listeners' ids (a regular expression cannot search another type), or
# handed on to Slack (`respond`'s URL, the trigger a modal opens with).
_TOP_STRINGS = ("callback_id", "action_id", "command", "response_url", "trigger_id")


def bolt_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    """`body` as Bolt's `parse_body` reads it (JSON; a form's `payload` field as JSON; or a
    form), checked by `check`; `content_type` is the header up to its first `;`."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest("the body is not UTF-8 text", field="body") from exc
    if not text:
        return {}
    if content_type == "application/json" or text.startswith("{"):
        payload = _object(text, "body")
    elif "payload" in text:
        field = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
        payload = {} if field is None else _object(field, "payload")
    else:
        payload = dict(parse_qsl(text, keep_blank_values=True))  # a slash command: strings
    check(payload)
    return payload


def _object(text: str, field: str) -> dict[str, Any]:
    refuse_deep(text.encode(), field)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidRequest(f"`{field}` is not JSON", field=field) from exc
    if not isinstance(value, dict):
        raise InvalidRequest(f"`{field}` must be a JSON object, as Slack sends it", field=field)
    return value


def check(payload: Any) -> None:
    """Refuse (`InvalidRequest`) a payload Bolt would fail on rather than read."""
    if not isinstance(payload, dict):
        raise InvalidRequest("the payload must be a JSON object, as Slack sends it", field="payload")
    if too_deep_value(payload, MAX_DEPTH):
        raise InvalidRequest(f"the payload nests more than {MAX_DEPTH} levels deep", field="payload")
    for key in _TOP_STRINGS:
        _string(payload, key, key)
    if "event" in payload:
        event = _object_at(payload, "event")
        _string(event, "type", "event.type")
    if "view" in payload:
        view = _object_at(payload, "view")
        for key in ("callback_id", "app_installed_team_id", "team_id"):
            _string(view, key, f"view.{key}")
    if payload.get("type") == "block_actions":
        _actions(payload)
    _list_of_objects(payload, "response_urls", "response_urls")
    _walk(payload)


def _walk(payload: dict[str, Any]) -> None:
    """Check every object Bolt reads ids from: the payload, its authorizations (each of
    theirs), and the event, message and item objects inside them."""
    stack: list[tuple[Mapping[str, Any], str]] = [(payload, "")]
    while stack:
        obj, at = stack.pop()
        for key in _STRINGS:
            _string(obj, key, f"{at}{key}")
        for key in _OWNERS:
            owner = obj.get(key)
            if isinstance(owner, dict):
                for inner_key in ("id", "team_id", "enterprise_id"):
                    _string(owner, inner_key, f"{at}{key}.{inner_key}")
            elif owner is not None and not isinstance(owner, str):
                raise InvalidRequest(f"`{at}{key}` must be an id or an object", field=f"{at}{key}")
        for i, authorization in enumerate(_list_of_objects(obj, "authorizations", f"{at}authorizations")):
            stack.append((authorization, f"{at}authorizations.{i}."))
        for key in _WALKED:
            inner = obj.get(key)
            if isinstance(inner, dict):
                stack.append((inner, f"{at}{key}."))


def _actions(payload: dict[str, Any]) -> None:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions:
        raise InvalidRequest("`actions` must list the action taken", field="actions")
    for i, action in enumerate(actions):
        if not isinstance(action, dict) or not isinstance(action.get("action_id"), str):
            raise InvalidRequest(f"`actions.{i}` must be an object with an `action_id`", field="actions")
        _string(action, "block_id", f"actions.{i}.block_id")


def _object_at(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise InvalidRequest(f"`{key}` must be an object", field=key)
    return value


def _list_of_objects(obj: Mapping[str, Any], key: str, field: str) -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InvalidRequest(f"`{field}` must be a list of objects", field=field)
    return value


def _string(obj: Mapping[str, Any], key: str, field: str) -> None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"`{field}` must be a string", field=field)
