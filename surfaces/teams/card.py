"""Adaptive Cards for approvals: the pending card with `Action.Execute` buttons, and the closed one.

What the Slack card shows, in Adaptive Card elements (schema 1.5, which Teams renders): the
tool and every parameter (sorted by name, each value cut to `VALUE_LIMIT` characters, with a
notice when anything is masked or cut), who triggered the run, the agent's reason labelled
as its unverified claim, the policy and the expiry. Everything an agent or tenant controls
is escaped (`escape`), so it reads as text, never as markdown or a link. The buttons carry
only the approval id and a verb (and the page to show); the deny comment is an `Input.Text`
sent with the deny.

*Show the full call* answers with the card showing every parameter uncut, names included,
in pages (`call_pages`): a Teams message holds about 40 KB, so a call of any size is read
page by page with *Previous page* and *Next page*, and nothing of it is left out.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Any

from contracts.enums import ApprovalMode, ApprovalStatus, Verdict
from contracts.ports import ApprovalCard
from contracts.shown import Hidden, fields, hidden, render

SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
VERSION = "1.5"
CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
VALUE_LIMIT = 200  # characters of one rendered value on the card; Show the full call has the rest
NAME_LIMIT = 80  # characters of a parameter's name on the card; Show the full call has the rest
TEXT_LIMIT = 1000
# A page of Show the full call: pieces of at most PIECE characters of the call, as many as
# fit in PAGE_UNITS UTF-16 units once escaped and JSON-encoded (a Teams message is limited to
# about 40 KB of UTF-16; the rest of the card takes far less than the remaining half).
PIECE = 1000
PAGE_UNITS = 10_000
COMMENT_INPUT = "comment"
COMMENT_MAX = 2000
# What starts markdown in a TextBlock or a fact (emphasis, links, code); newlines are
# flattened, so list and heading markers can only lead a value, where a fact title precedes.
_MARKDOWN = re.compile(r"([\\`*_\[\]()~<>#])")

_STATUS_WORDS = {
    ApprovalStatus.APPROVED: "Approved",
    ApprovalStatus.DENIED: "Denied",
    ApprovalStatus.EXPIRED: "Expired",
    ApprovalStatus.CANCELLED: "Cancelled",
    ApprovalStatus.COMPLETED: "Completed",
    ApprovalStatus.FAILED: "Failed",
    ApprovalStatus.PENDING: "Pending",
}


class Verb(StrEnum):
    """The `Action.Execute` verbs a card sends; `refresh` and `full_call` decide nothing."""

    APPROVE = "approve"
    APPROVE_FOR_RUN = "approve_for_run"
    DENY = "deny"
    REFRESH = "refresh"
    FULL_CALL = "full_call"
    # "Allow for …" (contracts.allowances): approve, and allow calls like it for that long.
    ALLOW_FOR_15M = "allow_for_15m"
    ALLOW_FOR_1H = "allow_for_1h"
    ALLOW_FOR_8H = "allow_for_8h"


VERDICTS = {
    Verb.APPROVE: Verdict.APPROVE,
    Verb.APPROVE_FOR_RUN: Verdict.APPROVE_FOR_RUN,
    Verb.DENY: Verdict.DENY,
    Verb.ALLOW_FOR_15M: Verdict.ALLOW_FOR,
    Verb.ALLOW_FOR_1H: Verdict.ALLOW_FOR,
    Verb.ALLOW_FOR_8H: Verdict.ALLOW_FOR,
}
ALLOW_FOR_PREFIX = "allow_for_"


def escape(text: str, limit: int = TEXT_LIMIT) -> str:
    """Agent- or tenant-controlled text cut to `limit` characters, with markdown escaped."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return _MARKDOWN.sub(r"\\\1", cut.replace("\r", " ").replace("\n", " "))


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **extra}


def _execute(title: str, verb: Verb, approval_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "Action.Execute",
        "title": title,
        "verb": verb.value,
        "data": {"approvalId": approval_id},
        **extra,
    }


def _parameters(card: ApprovalCard) -> tuple[list[dict[str, Any]], Hidden]:
    shown = fields(card.parameters)
    found = hidden(shown, VALUE_LIMIT)
    # A name cut on the card is a field not shown whole either: Show the full call has it.
    left_out = Hidden(
        found.masked, tuple(f.name for f in shown if f.name in found.cut or len(f.name) > NAME_LIMIT)
    )
    facts = []
    for f in shown:
        value, dropped = f.cut(VALUE_LIMIT)
        note = f"… [+{dropped:,} chars cut]" if dropped else ""
        facts.append({"title": escape(f.name, NAME_LIMIT), "value": escape(value, len(value)) + note})
    if not facts:
        return [_text("Parameters: (none)")], left_out
    label = _text("**Parameters** (redacted as shown to you; the decision binds to exactly this call)")
    return [label, {"type": "FactSet", "facts": facts}], left_out


def _units(text: str) -> int:
    """What `text` adds to the message: JSON-encoded, in UTF-16 code units."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-16-le")) // 2


def call_pages(card: ApprovalCard) -> list[list[tuple[str, bool]]]:
    """The whole call for Show the full call, in pages: each page a list of (escaped text,
    whether it continues the field of the piece before), every field uncut, names included."""
    pieces: list[tuple[str, bool]] = []
    for f in fields(card.parameters):
        line = f"{render(f.name)}: {f.text}"
        pieces += [(escape(line[i : i + PIECE], PIECE), i > 0) for i in range(0, len(line), PIECE)]
    pages: list[list[tuple[str, bool]]] = [[]]
    used = 0
    for piece in pieces:
        cost = _units(piece[0])
        if pages[-1] and used + cost > PAGE_UNITS:
            pages.append([])
            used = 0
        pages[-1].append(piece)
        used += cost
    return pages


def _call_page(card: ApprovalCard, page: int) -> tuple[list[dict[str, Any]], int, int]:
    """Page `page` (from 0, clamped) of the whole call as card elements; the page shown and
    how many there are."""
    pages = call_pages(card)
    page = min(max(page, 0), len(pages) - 1)
    where = f" (page {page + 1} of {len(pages)})" if len(pages) > 1 else ""
    label = _text(
        f"**The whole call**{where}: every parameter uncut, redacted as the policy says; "
        "the decision binds to exactly this call"
    )
    blocks = [
        _text(text, fontType="Monospace", **({"spacing": "None"} if more else {}))
        for text, more in pages[page]
    ]
    return [label, *(blocks or [_text("(no parameters)")])], page, len(pages)


def _body(
    card: ApprovalCard, heading: str, full: bool, page: int = 0
) -> tuple[list[dict[str, Any]], Hidden, tuple[int, int]]:
    if full:
        params, page, pages = _call_page(card, page)
        # Masks stay masked in the whole call; nothing else is left out.
        left_out = Hidden(masked=hidden(fields(card.parameters), VALUE_LIMIT).masked)
    else:
        (params, left_out), pages = _parameters(card), 1
    body: list[dict[str, Any]] = [
        _text(f"{heading}: {escape(card.tool_name, 128)}", size="Large", weight="Bolder"),
        *params,
        _text(f"Triggered by: {escape(card.triggered_by, 200)}", isSubtle=True),
    ]
    if card.reason:
        body.append(_text(f"Agent's reason (its claim, not verified): {escape(card.reason)}", isSubtle=True))
    expires = card.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    body.append(_text(f"Policy: {escape(card.policy_rule, 300)} · expires {expires}", isSubtle=True))
    return body, left_out, (page, pages)


def _envelope(
    card: ApprovalCard, body: list[dict[str, Any]], actions: list[dict[str, Any]]
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "AdaptiveCard", "$schema": SCHEMA, "version": VERSION, "body": body}
    if actions:
        out["actions"] = actions
    return out


def to_card(
    card: ApprovalCard, approvers: tuple[str, ...], *, full: bool = False, page: int = 0
) -> dict[str, Any]:
    """The pending card: the call, a comment box, Approve / Deny (and Approve for this run in
    mode ask); `full` shows page `page` of the whole call, uncut (the answer to Show the full
    call), with buttons to the pages before and after it."""
    body, left_out, (page, pages) = _body(card, "Approval needed", full, page)
    if left_out:
        body.append(_text(f"⚠ **{left_out.notice('press Show the full call')}**", color="Warning"))
    body.append(
        {
            "type": "Input.Text",
            "id": COMMENT_INPUT,
            "label": "Comment (optional; the agent sees it)",
            "isMultiline": True,
            "maxLength": COMMENT_MAX,
        }
    )
    if card.step_up:
        # A chat session proves a client, not a person: Approve only in the inbox, with a passkey.
        body.append(_text(step_up_line(card), weight="Bolder"))
        actions = [step_up_action(card)] if card.inbox_url else []
    else:
        actions = [_execute("Approve", Verb.APPROVE, card.approval_id, style="positive")]
    if card.mode is ApprovalMode.ASK and not card.step_up:
        actions.append(_execute("Approve for this run", Verb.APPROVE_FOR_RUN, card.approval_id))
    for name in card.allow_for:  # the lengths the policy offers, up to its cap
        actions.append(_execute(f"Allow for {name}", Verb(ALLOW_FOR_PREFIX + name), card.approval_id))
    actions.append(_execute("Deny", Verb.DENY, card.approval_id, style="destructive"))
    if left_out.cut:
        actions.append(_execute("Show the full call", Verb.FULL_CALL, card.approval_id))
    if full and page > 0:
        actions.append(_page(card, "Previous page", page - 1))
    if full and page < pages - 1:
        actions.append(_page(card, "Next page", page + 1))
    out = _envelope(card, body, actions)
    # Teams asks for the current card whenever an approver opens the conversation, so a
    # copy that missed its update still shows the outcome.
    out["refresh"] = {
        "action": _execute("Refresh", Verb.REFRESH, card.approval_id),
        "userIds": list(approvers[:60]),
    }
    return out


def step_up_line(card: ApprovalCard) -> str:
    """Why a step-up card has no Approve."""
    where = "in the Cosigner inbox" if card.inbox_url else "in the Cosigner inbox (not configured here)"
    return f"Step-up: approve {where}, confirmed with your passkey. Deny works here."


def step_up_action(card: ApprovalCard) -> dict[str, Any]:
    """A link to the request's step-up page (it asks for sign-in as usual; no session rides on it)."""
    return {
        "type": "Action.OpenUrl",
        "title": "Approve in Cosigner",
        "url": f"{card.inbox_url}approvals/{card.approval_id}/step-up",
        "style": "positive",
    }


def _page(card: ApprovalCard, title: str, page: int) -> dict[str, Any]:
    action = _execute(title, Verb.FULL_CALL, card.approval_id)
    action["data"]["page"] = page
    return action


def to_closed_card(card: ApprovalCard) -> dict[str, Any]:
    """The card once closed: the outcome, by whom and when, and no buttons."""
    word = _STATUS_WORDS.get(card.status, card.status.value.capitalize())
    body, _, _ = _body(card, word, False)
    outcome = card.outcome
    if outcome is not None:
        when = outcome.decided_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        if outcome.decider_kind == "person":
            who = f"by {escape(outcome.decider or 'someone', 200)} on {outcome.surface or 'a surface'}"
        elif outcome.decider_kind == "timeout":
            who = "because nobody answered in time (expiry means deny)"
        else:
            who = f"by {outcome.decider_kind} {escape(outcome.decider or '', 200)}".rstrip()
        body.append(_text(f"**{word}** {who} at {when}", weight="Bolder"))
        if outcome.comment:
            body.append(_text(f"Comment: {escape(outcome.comment)}"))
    elif card.status is ApprovalStatus.PENDING and card.approvals:
        # The clicker's own view after an Approve below the quorum: no buttons for them.
        more = card.quorum - len(card.approvals)
        body.append(
            _text(
                f"**You approved** ({card.progress()} approvals); it runs once {more} more "
                f"approver{'s' if more != 1 else ''} approve{'s' if more == 1 else ''}.",
                weight="Bolder",
            )
        )
    return _envelope(card, body, [])


def invoke_card(card: dict[str, Any]) -> dict[str, Any]:
    """The answer to an `adaptiveCard/action` invoke that replaces the card the clicker sees."""
    return {"statusCode": 200, "type": CONTENT_TYPE, "value": card}


def invoke_error(status: int, code: str, message: str) -> dict[str, Any]:
    """The answer to an invoke that decided nothing: Teams shows `message` to the clicker."""
    return {
        "statusCode": status,
        "type": "application/vnd.microsoft.error",
        "value": {"code": code, "message": message},
    }


def attachment(card: dict[str, Any]) -> dict[str, Any]:
    """An Adaptive Card as a message attachment."""
    return {"contentType": CONTENT_TYPE, "content": card}
