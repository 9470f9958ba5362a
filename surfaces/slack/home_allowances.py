"""The Home tab's "Your standing allows": what a person let through with "Allow for …", until
when and how often, each with a **Revoke** button.

A Revoke click is verified like every request to `/slack/events` (signature, then Bolt); it
revokes only a standing allow the clicker granted on Slack in the workspace's tenant
(`contracts.allowances.AllowanceDesk.revoke_own`): anyone else's is not found. The next call
it covered is asked again, on every replica.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ConfirmObject,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from contracts.allowances import ALLOWANCE_ID_PATTERN, Allowance
from contracts.errors import InvalidRequest
from surfaces.slack import mrkdwn

REVOKE_ACTION = "cosigner.revoke_allowance"
MAX_LISTED = 20
_ID = re.compile(ALLOWANCE_ID_PATTERN)
_USER = re.compile(r"^[A-Z0-9]{2,64}$")  # as `/cosigner` reads a Slack id


def allowance_blocks(allowances: Sequence[Allowance], now: datetime) -> list[Block]:
    """The section of a person's standing allows, each with Revoke; nothing when they have none."""
    if not allowances:
        return []
    blocks: list[Block] = [HeaderBlock(text=PlainTextObject(text="Your standing allows"))]
    for a in allowances[:MAX_LISTED]:
        minutes = max(int((a.expiresAt - now).total_seconds() // 60), 0)
        left = f"{minutes // 60}h {minutes % 60}m left" if minutes >= 60 else f"{minutes}m left"
        match = ", ".join(f"{k} = {v}" for k, v in a.match.items()) or "any arguments"
        at_most = ", ".join(f"{k} ≤ {v:g}" for k, v in a.atMost.items())
        line = (
            f"*{mrkdwn.fit(a.toolName, 128)}* · {mrkdwn.fit(match, 200)}"
            + (f" · {mrkdwn.fit(at_most, 120)}" if at_most else "")
            + f" · used {a.uses} of {a.maxUses} · {left}"
        )
        button = ButtonElement(
            text=PlainTextObject(text="Revoke"),
            action_id=REVOKE_ACTION,
            value=a.allowanceId,
            style="danger",
            confirm=ConfirmObject(
                title=PlainTextObject(text="Revoke this allow?"),
                text=MarkdownTextObject(
                    text="From the next call on, these calls ask you again.", verbatim=True
                ),
                confirm=PlainTextObject(text="Revoke"),
                deny=PlainTextObject(text="Cancel"),
            ),
        )
        blocks.append(SectionBlock(text=MarkdownTextObject(text=line, verbatim=True), accessory=button))
    return blocks


def revoke_click(body: Mapping[str, Any]) -> tuple[str, list[str], str]:
    """The clicker, their orgs and the standing allow id of a Revoke click."""
    actions = body.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidRequest("expected exactly one action", field="actions")
    allowance_id = actions[0].get("value")
    if not isinstance(allowance_id, str) or not _ID.match(allowance_id):
        raise InvalidRequest("`actions.value` is not a standing allow id", field="actions.value")
    user = body.get("user") if isinstance(body.get("user"), dict) else {}
    user_id = user.get("id") if isinstance(user, dict) else None
    if not isinstance(user_id, str) or not _USER.match(user_id):
        raise InvalidRequest("`user.id` is not a Slack user id", field="user.id")
    orgs = []
    for key in ("team", "enterprise"):
        found = body.get(key)
        if isinstance(found, dict) and isinstance(found.get("id"), str) and found["id"]:
            orgs.append(found["id"])
    return user_id, orgs, allowance_id
