"""Block Kit for approval cards: the pending card, and the parts the closed card shares.

Everything an agent or a tenant controls (parameters, reason, names, comments) is escaped
and length-fitted by `mrkdwn`; buttons carry only the approval id and the verdict. Every
parameter is on the card, sorted by name, each value cut to `VALUE_LIMIT` characters when
it must be; when anything is masked or cut the card says so above the buttons, and
Approve asks for confirmation naming what is not shown. *See the full call* opens the
modal of `full_call.py`. The closed card is `closed_blocks.py`, the deny-comment modal
`deny_modal.py`.
"""

from __future__ import annotations

import json
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from contracts.enums import ApprovalMode, ApprovalStatus, ToolKind, Verdict
from contracts.ports import ApprovalCard, SlackRoute
from contracts.shown import Hidden, fields, hidden, render
from surfaces.slack import mrkdwn
from surfaces.slack.allow_for import allow_for_buttons
from surfaces.slack.contract_blocks import preview_blocks
from surfaces.slack.follow_up_text import escalation_blocks

SECTION_LIMIT = 3000
ACTION_PREFIX = "cosigner."
ACTIONS = {f"{ACTION_PREFIX}{v.value}": v for v in Verdict}
BLOCK_PREFIX = "cosigner:"
DENY_CALLBACK = "cosigner.deny_comment"
COMMENT_BLOCK = "comment"
COMMENT_ACTION = "comment"
COMMENT_MAX = 2000
FULL_CALL_ACTION = f"{ACTION_PREFIX}full_call"
EDIT_ACTION = f"{ACTION_PREFIX}edit"
STEP_UP_ACTION = f"{ACTION_PREFIX}step_up"  # the link to the inbox: a click on it decides nothing
VALUE_SEPARATOR = "|"  # between the approval id and the call's digest in an answer button's value
VALUE_LIMIT = 200  # characters of one rendered value on the card; the modal has the rest
NAME_LIMIT = 80
MAX_PARAM_SECTIONS = 30  # of Slack's 50 blocks a message, the rest of the card needs at most 12
QUORUM_SHOWN = 20  # approvers named on the card (a context element holds 3000 characters)
PARAMS_LABEL = "*Parameters* (redacted as shown to you; the decision binds to exactly this call)\n"


def md(text: str) -> MarkdownTextObject:
    """A mrkdwn text object with Slack's auto-linking turned off."""
    return MarkdownTextObject(text=text, verbatim=True)


def to_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The pending approval card and its escaped notification text."""
    body, left_out = body_blocks(card, route)
    notice = [notice_block(left_out)] if left_out else []
    escalated = escalation_blocks(card)
    lead = "Approval needed" if not card.approvals else f"Approved {card.progress()}, more needed"
    if card.edited is not None:
        lead = f"Edited, approval needed ({card.progress()})"
    edited = [edited_block(card)] if card.edited is not None else []
    blocks = [
        *body,
        *edited,
        *escalated,
        *quorum_blocks(card),
        *step_up_blocks(card),
        *notice,
        _buttons(card, route, left_out),
    ]
    return blocks, fallback_text(card, lead)


def edited_block(card: ApprovalCard) -> Block:
    """A pending call an approver edited (a quorum): who, and old → new; the parameters above
    are the edited call, the one the buttons answer."""
    who = _person(card.edited_by, card.edited_on or "slack") if card.edited_by else "an approver"
    lead = f"*Edited by {who}*: approve this call, not the one the agent asked for"
    return SectionBlock(block_id=f"{BLOCK_PREFIX}edited", text=md(edited_text(card, lead)))


def quorum_blocks(card: ApprovalCard) -> list[Block]:
    """A quorum's progress: `Approved 1 of 2 — @Ann, 10:42`, or how many must approve.

    A Slack message is the same for everyone in the channel, so the buttons stay for the
    approvers still to answer; whoever approved is told so in a reply only they see
    (`approved_text`), and pressing Approve again changes nothing."""
    if card.quorum <= 1:
        return []
    apart = " (the requester's own Approve does not count)" if card.separate_duties else ""
    if not card.approvals:
        line = f"*{card.quorum} distinct approvers must approve*{apart}; one Deny decides."
    else:
        shown = card.approvals[:QUORUM_SHOWN]
        who = "; ".join(f"{_person(v.by, str(v.surface))}, {_clock(v.at)}" for v in shown)
        if len(card.approvals) > len(shown):
            who += f"; and {len(card.approvals) - len(shown)} more"
        if card.status is ApprovalStatus.PENDING:
            more = card.quorum - len(card.approvals)
            tail = f" · {more} more approval{'s' if more != 1 else ''} needed{apart}"
        elif card.status is ApprovalStatus.APPROVED:
            tail = ""
        else:
            tail = " (before it closed)"
        line = f"*Approved {card.progress()}* — {who}{tail}"
    # Every part is escaped already (mentions and date tokens are built, never taken from text).
    return [ContextBlock(block_id=f"{BLOCK_PREFIX}quorum", elements=[md(line)])]


def approved_text(card: ApprovalCard) -> str:
    """What an approver who approved a request that needs more approvals reads (only they)."""
    tool = mrkdwn.fit(card.tool_name, 128)
    more = card.quorum - len(card.approvals)
    return (
        f":white_check_mark: You approved *{tool}* ({card.short_code}): {card.progress()} approvals. "
        f"It runs once {more} more approver{'s' if more != 1 else ''} approve{'s' if more == 1 else ''}; "
        "pressing Approve again changes nothing."
    )


def _person(who: str, surface: str) -> str:
    if surface == "slack":
        return mrkdwn.mention(who) or mrkdwn.fit(who, 80)
    return mrkdwn.fit(f"{who} ({surface})", 120)


def _clock(moment: Any) -> str:
    epoch = int(moment.timestamp())
    return f"<!date^{epoch}^{{time}}|{moment.strftime('%H:%M')} UTC>"


def parameter_sections(card: ApprovalCard) -> tuple[list[SectionBlock], Hidden]:
    """Every parameter, one line each, sorted by name, each value cut to `VALUE_LIMIT`;
    and what the card leaves out (masked spans, cut values, fields beyond the block budget)."""
    shown = fields(dict(card.asked()) if card.status is ApprovalStatus.PENDING else card.parameters)
    left_out = hidden(shown, VALUE_LIMIT)
    cut_names = [f.name for f in shown if len(f.text) > VALUE_LIMIT or len(render(f.name)) > NAME_LIMIT]
    lines = []
    for f in shown:
        name = render(f.name)
        name = name if len(name) <= NAME_LIMIT else name[:NAME_LIMIT] + "…"
        value, dropped = f.cut(VALUE_LIMIT)
        note = f"… [+{dropped:,} chars cut]" if dropped else ""
        lines.append(mrkdwn.break_fences(mrkdwn.escape(f"{name}: {value}{note}")))
    if not lines:
        lines = ["(none)"]
    sections: list[SectionBlock] = []
    chunk: list[str] = []
    label = PARAMS_LABEL
    frame = len("```\n\n```")
    for i, line in enumerate(lines):
        if chunk and len(label) + frame + len("\n".join([*chunk, line])) > SECTION_LIMIT:
            if len(sections) == MAX_PARAM_SECTIONS - 1:
                rest = shown[i - len(chunk) :] if shown else []
                cut_names += [f.name for f in rest]
                chunk = [f"… {len(rest):,} more fields: see the full call"]
                break
            sections.append(_fenced_section(label, chunk, len(sections)))
            chunk, label = [], ""
        chunk.append(line)
    sections.append(_fenced_section(label, chunk, len(sections)))
    cut = tuple(dict.fromkeys(cut_names))
    return sections, Hidden(masked=left_out.masked, cut=cut)


def _fenced_section(label: str, lines: list[str], index: int) -> SectionBlock:
    block_id = f"{BLOCK_PREFIX}params" + (f".{index}" if index else "")
    return SectionBlock(block_id=block_id, text=md(label + "```\n" + "\n".join(lines) + "\n```"))


def notice_block(left_out: Hidden) -> Block:
    """Above the buttons: what of the call the card does not show (masked spans, cut values)."""
    return SectionBlock(
        block_id=f"{BLOCK_PREFIX}hidden",
        text=md(f":warning: *{mrkdwn.fit(left_out.notice(), 500)}*"),
    )


def body_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], Hidden]:
    """The card above its buttons or outcome: the tool, every parameter, who triggered it, the
    agent's reason, the policy and expiry (or an operation's preview); and what it leaves out."""
    if card.preview is not None:
        preview, cut = preview_blocks(card)
        # A preview cut on the card is read whole in the full call, like a cut value.
        return [*preview, *_context(card, route)], Hidden(cut=("preview",) if cut else ())
    tool = card.tool_name[:150]
    params, left_out = parameter_sections(card)
    trigger = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 200)
    reason = mrkdwn.fit(card.reason, 2800) if card.reason else "_none given_"
    policy = mrkdwn.fit(card.policy_rule, 1000)
    expires = mrkdwn.date_token(card.expires_at)
    ids = mrkdwn.fit(f"{card.short_code} · run {card.execution_id} · call {card.tool_call_id}", 600)
    return [
        HeaderBlock(text=PlainTextObject(text=tool, emoji=False)),
        *params,
        SectionBlock(
            fields=[
                md(f"*Triggered by*\n{trigger}"),
                md(f"*Kind*\n{card.kind.value} · {card.mode.value}"),
            ]
        ),
        SectionBlock(text=md(f"*Agent's stated reason (unverified claim)*\n{reason}")),
        ContextBlock(
            elements=[
                md(f"*Policy:* {policy}"),
                md(f"*Expires:* {expires}"),
                md(ids),
            ]
        ),
    ], left_out


def _context(card: ApprovalCard, route: SlackRoute) -> list[Block]:
    """Who triggered it, the policy, the expiry and the ids, under an operation's preview."""
    trigger = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 200)
    ids = mrkdwn.fit(f"{card.short_code} · run {card.execution_id} · call {card.tool_call_id}", 600)
    return [
        ContextBlock(
            elements=[
                md(f"*Triggered by:* {trigger}"),
                md(f"*Policy:* {mrkdwn.fit(card.policy_rule, 1000)}"),
                md(f"*Expires:* {mrkdwn.date_token(card.expires_at)}"),
                md(ids),
            ]
        )
    ]


def _buttons(card: ApprovalCard, route: SlackRoute, left_out: Hidden) -> ActionsBlock:
    confirm = None
    if left_out:
        # Approving what the card does not fully show is a step worth a second look.
        undo = " Cosigner cannot undo it." if card.kind == ToolKind.DANGER else ""
        confirm = ConfirmObject(
            title=PlainTextObject(text="Approve this call?"),
            text=md(
                mrkdwn.fit(f"Not all of this call is on the card ({left_out.details()}).", 220)
                + " Open *See the full call* to read it."
                + undo
            ),
            confirm=PlainTextObject(text="Approve"),
            deny=PlainTextObject(text="Cancel"),
        )
    elif card.kind == ToolKind.DANGER:
        confirm = ConfirmObject(
            title=PlainTextObject(text="Approve this call?"),
            text=md(
                f"*{mrkdwn.fit(card.tool_name, 150)}* will run with exactly the parameters shown. "
                "Cosigner cannot undo it."
                if card.preview is None
                else "The application will carry out exactly what the preview shows. Cosigner cannot undo it."
            ),
            confirm=PlainTextObject(text="Approve"),
            deny=PlainTextObject(text="Cancel"),
        )
    value = answer_value(card)
    buttons = [
        step_up_button(card)
        if card.step_up
        else _button("Approve", Verdict.APPROVE, value, "primary", confirm)
    ]
    if card.editable and not card.step_up:
        # Opens the edit form (contracts.edits); nothing is decided until its confirm step.
        buttons.append(
            ButtonElement(text=PlainTextObject(text="Edit"), action_id=EDIT_ACTION, value=card.approval_id)
        )
    # One person's "for this run" would let later calls through without the quorum.
    if card.mode == ApprovalMode.ASK and card.quorum <= 1 and not card.step_up:
        buttons.append(
            _button(
                "Approve for this run",
                Verdict.APPROVE_FOR_RUN,
                value,
                confirm=_for_run(card, route, left_out),
            )
        )
    buttons += allow_for_buttons(card, route, value, bool(left_out))
    buttons.append(_button("Deny", Verdict.DENY, value, "danger"))
    if card.offers_always_deny:
        buttons.append(_always_deny(card, value))
    if card.preview is None or left_out.cut:
        buttons.append(
            ButtonElement(
                text=PlainTextObject(text="See the full call"),
                action_id=FULL_CALL_ACTION,
                value=card.approval_id,
            )
        )
    return ActionsBlock(block_id=f"{BLOCK_PREFIX}{card.approval_id}", elements=buttons)


def _for_run(card: ApprovalCard, route: SlackRoute, left_out: Hidden) -> ConfirmObject:
    """Say whom the run grant covers (only the same requester, in this conversation), and
    that the card does not show all of this call, within a confirmation's 300 characters."""
    tool = _inline(card.tool_name, 40)
    who = mrkdwn.mention(route.requester) or _inline(card.triggered_by, 40)
    hidden = "Not all of this call is on the card: read *See the full call* first. " if left_out else ""
    return ConfirmObject(
        title=PlainTextObject(text="Approve for this run?"),
        text=md(
            hidden + f"Later calls of `{tool}` in this run by {who} in this conversation run without "
            "asking; anyone else, or another conversation, is still asked."
        ),
        confirm=PlainTextObject(text="Approve for this run"),
        deny=PlainTextObject(text="Cancel"),
    )


def _inline(text: str, limit: int) -> str:
    """Escape a name for use inside a sentence, cut with an ellipsis to `limit` chars."""
    escaped = mrkdwn.escape(text)
    if len(escaped) <= limit:
        return escaped
    return mrkdwn.truncate(escaped, limit - 1)[0] + "…"


def answer_value(card: ApprovalCard) -> str:
    """An answer button's value: the approval, and the digest of the call the card shows, so
    a click from a card made before an edit is refused rather than counted for the edited call."""
    return f"{card.approval_id}{VALUE_SEPARATOR}{card.digest}" if card.digest else card.approval_id


def _always_deny(card: ApprovalCard, value: str) -> ButtonElement:
    """The third button: deny, and refuse this tool from now on for requests this person approves."""
    tool = mrkdwn.fit(card.tool_name, 128)
    confirm = ConfirmObject(
        title=PlainTextObject(text="Always deny?"),
        text=md(
            f"Deny `{tool}` for requests you approve, now and from now on: later ones are refused "
            "without asking you. Lift it with /cosigner."
        ),
        confirm=PlainTextObject(text="Always deny"),
        deny=PlainTextObject(text="Cancel"),
        style="danger",
    )
    return _button("Always deny", Verdict.ALWAYS_DENY, value, confirm=confirm)


def step_up_blocks(card: ApprovalCard) -> list[Block]:
    """Why the card has no Approve: the policy asks for a passkey, in the inbox."""
    if not card.step_up:
        return []
    where = (
        "in the Cosigner inbox" if card.inbox_url else "in the Cosigner inbox, which is not configured here"
    )
    line = f"*Step-up:* approve {where}, confirmed with your passkey. Deny works here."
    return [ContextBlock(block_id=f"{BLOCK_PREFIX}step_up", elements=[md(line)])]


def step_up_link(card: ApprovalCard) -> str | None:
    """The request's step-up page in the inbox (which asks for sign-in as usual: the link
    carries no session); None when the inbox is off, and then nothing here can approve."""
    return f"{card.inbox_url}approvals/{card.approval_id}/step-up" if card.inbox_url else None


def step_up_button(card: ApprovalCard) -> ButtonElement:
    """Step-up: a link to the inbox instead of Approve. Slack still sends a click on it,
    which decides nothing (an Approve from Slack is refused for such a request)."""
    link = step_up_link(card)
    if link is None:
        return ButtonElement(
            text=PlainTextObject(text="Approve needs the Cosigner inbox (off)"),
            action_id=STEP_UP_ACTION,
            value=card.approval_id,
        )
    return ButtonElement(
        text=PlainTextObject(text="Approve in Cosigner"),
        action_id=STEP_UP_ACTION,
        url=link,
        style="primary",
        value=card.approval_id,
    )


def _button(
    label: str,
    verdict: Verdict,
    value: str,
    style: str | None = None,
    confirm: ConfirmObject | None = None,
) -> ButtonElement:
    return ButtonElement(
        text=PlainTextObject(text=label),
        action_id=f"{ACTION_PREFIX}{verdict.value}",
        value=value,
        style=style,
        confirm=confirm,
    )


def edited_text(
    card: ApprovalCard, lead: str = "*Approved with an edit*: this call runs instead of the one asked for"
) -> str:
    """What approvers changed, old → new: the call that runs is the edited one."""
    edited = card.edited or {}
    lines = [lead]
    for name in sorted(edited, key=str):
        old, new = card.parameters.get(name), edited[name]
        if old != new or type(old) is not type(new):
            before = mrkdwn.fit(json.dumps(old, ensure_ascii=False), 300)
            after = mrkdwn.fit(json.dumps(new, ensure_ascii=False), 300)
            lines.append(f"• {mrkdwn.fit(str(name), NAME_LIMIT)}: {before} → {after}")
    # Each part is escaped already (the lead's mention is built): cut, never escaped again.
    text, limit = "\n".join(lines), SECTION_LIMIT - 20
    return text if len(text) <= limit else mrkdwn.truncate(text, limit - 1)[0] + "…"


def fallback_text(card: ApprovalCard, lead: str) -> str:
    """The card's notification text: `lead`, what is asked, its code and expiry."""
    what = card.preview.title if card.preview is not None else card.tool_name
    text = f"{lead}: {what} ({card.short_code}), expires {mrkdwn.utc(card.expires_at)}"
    return mrkdwn.fit(text, 300)


def as_dicts(blocks: list[Block]) -> list[dict[str, Any]]:
    """Block objects as the JSON Slack receives (validates Block Kit limits on the way)."""
    return [b.to_dict() for b in blocks]
