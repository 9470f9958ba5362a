""" "Allow for …" on a Slack card: one button per length the policy offers, each confirmed in
Slack's own dialog that says what later calls it lets through (`allow_for_clicks` parses
the click back into an `Answer` carrying the length).

The button's action id names the length (`cosigner.allow_for.1h`); its value is the
approval and the digest of the call shown, as on Approve, so a click from a card made
before an edit is refused. The desk checks the length against the policy's cap again:
whatever a button says, nothing longer than the tool's `allow_for` is ever created.
"""

from __future__ import annotations

import re

from slack_sdk.models.blocks import ButtonElement, ConfirmObject, MarkdownTextObject, PlainTextObject

from contracts.allowances import choice_named
from contracts.enums import Verdict
from contracts.ports import ApprovalCard, SlackRoute
from surfaces.slack import mrkdwn

ACTION_PREFIX = "cosigner."  # as on the card's other buttons (`surfaces.slack.blocks`)
ALLOW_FOR_PREFIX = f"{ACTION_PREFIX}{Verdict.ALLOW_FOR.value}."
ALLOW_FOR_ACTIONS = re.compile(rf"^{re.escape(ALLOW_FOR_PREFIX)}[0-9a-z]{{1,4}}$")


def allow_for_buttons(card: ApprovalCard, route: SlackRoute, value: str, hidden: bool) -> list[ButtonElement]:
    """The card's "Allow for …" buttons, none where the policy offers none."""
    buttons = []
    for name in card.allow_for:
        choice = choice_named(name)
        if choice is None:
            continue
        tool = mrkdwn.fit(card.tool_name, 40)
        who = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 40)
        first = "Not all of this call is on the card: read *See the full call* first. " if hidden else ""
        confirm = ConfirmObject(
            title=PlainTextObject(text=f"Allow for {choice.words}?"),
            text=MarkdownTextObject(
                verbatim=True,
                text=first + f"Approves this call; for {choice.words}, later `{tool}` calls by {who} here "
                "with the same key arguments run without asking. Revoke it from the Home tab.",
            ),
            confirm=PlainTextObject(text=f"Allow for {choice.name}"),
            deny=PlainTextObject(text="Cancel"),
        )
        buttons.append(
            ButtonElement(
                text=PlainTextObject(text=f"Allow for {choice.name}"),
                action_id=f"{ALLOW_FOR_PREFIX}{choice.name}",
                value=value,
                confirm=confirm,
            )
        )
    return buttons
