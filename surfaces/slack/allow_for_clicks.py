"""An "Allow for …" click on a Slack card, parsed into an `Answer` carrying the length, and
what its presser reads once it counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from contracts.allowances import CHOICES, choice_named
from contracts.enums import Verdict
from contracts.errors import InvalidRequest
from contracts.ports import Answer, ApprovalCard
from surfaces.slack import mrkdwn
from surfaces.slack.allow_for import ACTION_PREFIX, ALLOW_FOR_PREFIX
from surfaces.slack.parse import parse_block_action


def parse_allow_for(payload: Mapping[str, Any]) -> Answer:
    """A press of an "Allow for …" button as an `Answer` with its length; `InvalidRequest` when
    malformed or for a length that is not one of `contracts.allowances.CHOICES`."""
    actions = payload.get("actions")
    action = actions[0] if isinstance(actions, list) and len(actions) == 1 else None
    action_id = action.get("action_id") if isinstance(action, dict) else None
    if not isinstance(action_id, str) or not action_id.startswith(ALLOW_FOR_PREFIX):
        raise InvalidRequest("not an Allow for button", field="actions.action_id")
    choice = choice_named(action_id.removeprefix(ALLOW_FOR_PREFIX))
    if choice is None:
        raise InvalidRequest("Allow for offers 15m, 1h or 8h", field="actions.action_id")
    assert isinstance(action, dict)
    plain = {**payload, "actions": [{**action, "action_id": f"{ACTION_PREFIX}{Verdict.ALLOW_FOR.value}"}]}
    return replace(parse_block_action(plain), allow_for=choice.seconds)


def allowed_text(card: ApprovalCard, seconds: float) -> str:
    """What the person who answered Allow for reads: what runs without asking now, and how to stop it."""
    tool = mrkdwn.fit(card.tool_name, 128)
    words = next((c.words for c in CHOICES if c.seconds == seconds), f"{seconds:g} s")
    return (
        f":white_check_mark: Allowed for {words}: later *{tool}* calls like this one, from the same "
        "requester in this conversation, run without asking until then. The Home tab lists your "
        "standing allows and revokes them."
    )
