"""The modal a Deny opens: an optional comment, which the agent sees, before the deny counts.

The modal carries what the click was bound to (approval, channel, message and the digest of
the call shown) in its private metadata, so its submission is checked like the click.
"""

from __future__ import annotations

import json

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement, PlainTextObject, SectionBlock
from slack_sdk.models.views import View

from surfaces.slack import mrkdwn
from surfaces.slack.blocks import COMMENT_ACTION, COMMENT_BLOCK, COMMENT_MAX, DENY_CALLBACK, md


def deny_modal(
    card_id: str, tool_name: str, channel_id: str, message_ts: str, seen: str | None = None
) -> View:
    """The modal asking for an optional comment before a deny is recorded (of the call with
    digest `seen`, as the card showed it)."""
    bound = {"a": card_id, "c": channel_id, "t": message_ts, **({"d": seen} if seen else {})}
    metadata = json.dumps(bound, separators=(",", ":"))
    return View(
        type="modal",
        callback_id=DENY_CALLBACK,
        title=PlainTextObject(text="Deny request"),
        submit=PlainTextObject(text="Deny"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=metadata,
        blocks=[
            SectionBlock(text=md(f"Deny *{mrkdwn.fit(tool_name, 200)}*? The agent sees your comment.")),
            InputBlock(
                block_id=COMMENT_BLOCK,
                label=PlainTextObject(text="Comment (optional)"),
                element=PlainTextInputElement(
                    action_id=COMMENT_ACTION, multiline=True, max_length=COMMENT_MAX
                ),
                optional=True,
            ),
        ],
    )
