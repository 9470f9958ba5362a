"""Pure translators from Slack interaction payloads to `Answer`s (and event bodies to their
type); no I/O, no Slack client.

Only fields Slack itself sets are read: who clicked (`user`), where (`team`, `enterprise`,
`container`), which app (`api_app_id`) and which button (`actions[0]`). The deprecated
`token` field is ignored: the request signature is the proof of origin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from contracts.enums import SurfaceType, Verdict
from contracts.errors import InvalidRequest
from contracts.ports import Answer, Look
from surfaces.slack.blocks import (
    ACTIONS,
    BLOCK_PREFIX,
    COMMENT_ACTION,
    COMMENT_BLOCK,
    COMMENT_MAX,
    DENY_CALLBACK,
    FULL_CALL_ACTION,
    VALUE_SEPARATOR,
)
from surfaces.slack.full_call import FULL_CALL_CALLBACK, PAGE_ACTIONS

_SLACK_ID = re.compile(r"^[A-Z0-9]{2,64}$")
_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
_APPROVAL_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# What of an event's `type` may reach the log; anything else is logged as "unrecognized".
_EVENT_TYPE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")


def parse_block_action(payload: Mapping[str, Any]) -> Answer:
    """A button click on a card as an `Answer`; raises `InvalidRequest` when malformed."""
    if payload.get("type") != "block_actions":
        raise InvalidRequest("expected a block_actions payload", field="type")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidRequest("expected exactly one action", field="actions")
    action = actions[0]
    verdict = ACTIONS.get(action.get("action_id", ""))
    if verdict is None:
        raise InvalidRequest("not a Cosigner button", field="actions.action_id")
    approval_id, seen = answer_value(action.get("value"))
    block_id = action.get("block_id")
    if block_id is not None and block_id != f"{BLOCK_PREFIX}{approval_id}":
        raise InvalidRequest("button block does not belong to this approval", field="actions.block_id")
    container = _mapping(payload, "container")
    if container.get("type") != "message" or container.get("is_ephemeral"):
        raise InvalidRequest("buttons count only on a posted card", field="container.type")
    return Answer(
        approval_id=approval_id,
        surface=SurfaceType.SLACK,
        verdict=verdict,
        conversation=_match(container.get("channel_id"), _SLACK_ID, "container.channel_id"),
        message_ref=_match(container.get("message_ts"), _TS, "container.message_ts"),
        seen=seen,
        **_who(payload),
    )


def answer_value(value: Any) -> tuple[str, str | None]:
    """An answer button's value: the approval id and the digest of the call its card showed
    (None on a card made before buttons carried one: the agent's own call)."""
    if isinstance(value, str) and VALUE_SEPARATOR in value:
        approval_id, digest = value.split(VALUE_SEPARATOR, 1)
        return _match(approval_id, _APPROVAL_ID, "actions.value"), _match(digest, _DIGEST, "actions.value")
    return _match(value, _APPROVAL_ID, "actions.value"), None


def parse_look(payload: Mapping[str, Any], action_id: str = FULL_CALL_ACTION) -> Look:
    """A press of *See the full call* (or of another button that reads the call, such as
    *Edit*) on a card as a `Look`; raises `InvalidRequest` when malformed."""
    action = _one_action(payload)
    if action.get("action_id") != action_id:
        raise InvalidRequest("not the button expected", field="actions.action_id")
    approval_id = _match(action.get("value"), _APPROVAL_ID, "actions.value")
    if action.get("block_id") not in (None, f"{BLOCK_PREFIX}{approval_id}"):
        raise InvalidRequest("button block does not belong to this approval", field="actions.block_id")
    container = _mapping(payload, "container")
    if container.get("type") != "message" or container.get("is_ephemeral"):
        raise InvalidRequest("the full call opens only from a posted card", field="container.type")
    return Look(
        approval_id=approval_id,
        surface=SurfaceType.SLACK,
        conversation=_match(container.get("channel_id"), _SLACK_ID, "container.channel_id"),
        message_ref=_match(container.get("message_ts"), _TS, "container.message_ts"),
        **_who(payload),
    )


def parse_page(payload: Mapping[str, Any]) -> tuple[Look, int, str]:
    """A page button pressed in the full-call modal: the `Look` bound to the card it was
    opened from (the modal's metadata, which Slack keeps), the page, and the view id."""
    action = _one_action(payload)
    if action.get("action_id") not in PAGE_ACTIONS:
        raise InvalidRequest("not a page button", field="actions.action_id")
    value = action.get("value")
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 4:
        raise InvalidRequest("`actions.value` must be a page number", field="actions.value")
    view = _mapping(payload, "view")
    if view.get("callback_id") != FULL_CALL_CALLBACK:
        raise InvalidRequest("not a Cosigner modal", field="view.callback_id")
    meta = _metadata(view)
    look = Look(
        approval_id=_match(meta.get("a"), _APPROVAL_ID, "view.private_metadata.a"),
        surface=SurfaceType.SLACK,
        conversation=_match(meta.get("c"), _SLACK_ID, "view.private_metadata.c"),
        message_ref=_match(meta.get("t"), _TS, "view.private_metadata.t"),
        **_who(payload),
    )
    return look, int(value), _match(view.get("id"), _SLACK_ID, "view.id")


def parse_view_submission(payload: Mapping[str, Any]) -> Answer:
    """A submitted deny-comment modal as a deny `Answer` bound to the card it was opened from."""
    if payload.get("type") != "view_submission":
        raise InvalidRequest("expected a view_submission payload", field="type")
    view = _mapping(payload, "view")
    if view.get("callback_id") != DENY_CALLBACK:
        raise InvalidRequest("not a Cosigner modal", field="view.callback_id")
    meta = _metadata(view)
    return Answer(
        approval_id=_match(meta.get("a"), _APPROVAL_ID, "view.private_metadata.a"),
        surface=SurfaceType.SLACK,
        verdict=Verdict.DENY,
        conversation=_match(meta.get("c"), _SLACK_ID, "view.private_metadata.c"),
        message_ref=_match(meta.get("t"), _TS, "view.private_metadata.t"),
        comment=_comment(view),
        seen=seen_in(meta),
        **_who(payload),
    )


def seen_in(meta: Mapping[str, Any]) -> str | None:
    """The digest of the call a modal was opened for (its metadata's `d`), if it names one."""
    digest = meta.get("d")
    return None if digest is None else _match(digest, _DIGEST, "view.private_metadata.d")


def parse_modal(
    payload: Mapping[str, Any], callback_id: str
) -> tuple[Look, Mapping[str, Any], Mapping[str, Any]]:
    """A submitted Cosigner modal (`callback_id`) as the `Look` of the person who submitted it,
    bound to the card named in its metadata, with the metadata and the inputs' state by block.

    The metadata names the card and who opened the modal; a submission by anyone else is
    refused here, and the desk checks the submitter as an answer in any case."""
    if payload.get("type") != "view_submission":
        raise InvalidRequest("expected a view_submission payload", field="type")
    view = _mapping(payload, "view")
    if view.get("callback_id") != callback_id:
        raise InvalidRequest("not this Cosigner modal", field="view.callback_id")
    meta = _metadata(view)
    look = Look(
        approval_id=_match(meta.get("a"), _APPROVAL_ID, "view.private_metadata.a"),
        surface=SurfaceType.SLACK,
        conversation=_match(meta.get("c"), _SLACK_ID, "view.private_metadata.c"),
        message_ref=_match(meta.get("t"), _TS, "view.private_metadata.t"),
        **_who(payload),
    )
    if meta.get("u") != look.actor:
        raise InvalidRequest("this dialog was opened by someone else; press Edit on the card yourself")
    values = (view.get("state") or {}).get("values") or {}
    if not isinstance(values, dict):
        raise InvalidRequest("unreadable modal state", field="view.state.values")
    return look, meta, values


def input_text(element: Any) -> str | None:
    """The text an input holds: a text or number input's `value`, a select's option value."""
    if not isinstance(element, dict):
        return None
    option = element.get("selected_option")
    if isinstance(option, dict):
        value = option.get("value")
        return value if isinstance(value, str) else None
    value = element.get("value")
    return value if isinstance(value, str) else None


def event_type(body: bytes) -> str | None:
    """The loggable type of a signed Events API body other than `url_verification`, else None.

    Interactions come form-encoded and go to Bolt, as does `url_verification` (Bolt answers
    its challenge); every other JSON body is an event delivery.
    """
    if not body.lstrip().startswith(b"{"):
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return "unrecognized"
    if not isinstance(payload, dict):
        return "unrecognized"
    kind = payload.get("type")
    if kind == "url_verification":
        return None
    event = payload.get("event")
    inner = event.get("type") if isinstance(event, dict) else None
    names = [k if isinstance(k, str) and _EVENT_TYPE.match(k) else "unrecognized" for k in (kind, inner)]
    return names[0] if inner is None else "/".join(names)


def _who(payload: Mapping[str, Any]) -> dict[str, Any]:
    user = _mapping(payload, "user")
    team = _optional_mapping(payload, "team")
    enterprise = _optional_mapping(payload, "enterprise")
    team_id = _optional_id(team.get("id") if team else None, "team.id")
    enterprise_id = _optional_id(
        (enterprise or {}).get("id") or (team or {}).get("enterprise_id"), "enterprise.id"
    )
    # Org-wide installs on Enterprise Grid send `team: null`; the org is then the enterprise.
    org = team_id or enterprise_id
    if org is None:
        raise InvalidRequest("neither team nor enterprise is given", field="team")
    return {
        "actor": _match(user.get("id"), _SLACK_ID, "user.id"),
        "org": org,
        "actor_org": _optional_id(user.get("team_id"), "user.team_id"),
        "app_id": _optional_id(payload.get("api_app_id"), "api_app_id"),
        "enterprise_id": enterprise_id,
    }


def _one_action(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    if payload.get("type") != "block_actions":
        raise InvalidRequest("expected a block_actions payload", field="type")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidRequest("expected exactly one action", field="actions")
    action: Mapping[str, Any] = actions[0]
    return action


def _metadata(view: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        meta = json.loads(view.get("private_metadata") or "")
    except ValueError as exc:
        raise InvalidRequest("unreadable modal metadata", field="view.private_metadata") from exc
    if not isinstance(meta, dict):
        raise InvalidRequest("unreadable modal metadata", field="view.private_metadata")
    return meta


def _comment(view: Mapping[str, Any]) -> str | None:
    values = ((view.get("state") or {}).get("values") or {}).get(COMMENT_BLOCK) or {}
    field = values.get(COMMENT_ACTION) or {}
    text = field.get("value") if isinstance(field, dict) else None
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidRequest("comment must be text", field="view.state.values.comment")
    return text.strip()[:COMMENT_MAX] or None


def _mapping(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise InvalidRequest(f"`{key}` is missing", field=key)
    return value


def _optional_mapping(payload: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = payload.get(key)
    if value is not None and not isinstance(value, dict):
        raise InvalidRequest(f"`{key}` must be an object or null", field=key)
    return value


def _match(value: Any, pattern: re.Pattern[str], field: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise InvalidRequest(f"`{field}` is missing or malformed", field=field)
    return value


def _optional_id(value: Any, field: str) -> str | None:
    return None if value is None else _match(value, _SLACK_ID, field)
