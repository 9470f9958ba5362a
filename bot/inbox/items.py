"""A request as the inbox's pages say it: the call, who decided and how, and what an answer did.

Everything here is for people: times in UTC words, a call in one line (`amountCents 12900,
cardToken [REDACTED]`), "denied by policy" rather than the rule that would have asked.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from bot.inbox.editing import edited_changes
from bot.inbox.people import Person
from contracts.answers import (
    AgentDecider,
    AllowanceDecider,
    PersonDecider,
    PolicyDecider,
    SystemDecider,
    TimeoutDecider,
)
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.ports import SmsRoute
from storage.records import Record

SUMMARY_FIELDS = 3  # parameters named in a one-line summary of a call
SUMMARY_VALUE = 40  # characters of each value in it
SURFACES = {
    SurfaceType.DASHBOARD: "the inbox",
    SurfaceType.SLACK: "Slack",
    SurfaceType.SMS: "SMS",
    SurfaceType.WHATSAPP: "WhatsApp",
    SurfaceType.TEAMS: "Teams",
}
DONE = {
    ApprovalStatus.APPROVED: "Approved",
    ApprovalStatus.DENIED: "Denied",
    ApprovalStatus.EXPIRED: "Expired",
    ApprovalStatus.CANCELLED: "Cancelled",
    ApprovalStatus.COMPLETED: "Completed",
    ApprovalStatus.FAILED: "Failed",
}


def when(seconds: float | None) -> str:
    """A UTC time for people."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def left(seconds: float) -> str:
    """Time left, roughly."""
    if seconds <= 0:
        return "expiring"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m {int(seconds % 60)}s"


def where(surface: SurfaceType | str | None) -> str:
    """A surface as people name it."""
    if surface is None:
        return ""
    try:
        return SURFACES.get(SurfaceType(surface), str(surface))
    except ValueError:
        return str(surface)


def value_text(value: Any) -> str:
    """One value in a line of text: strings bare, anything else as compact JSON, shortened."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= SUMMARY_VALUE else text[: SUMMARY_VALUE - 1] + "…"


def summary(parameters: dict[str, Any]) -> str:
    """A call's parameters in one line: `amountCents 12900, cardToken [REDACTED]`."""
    names = sorted(parameters)
    said = [f"{n} {value_text(parameters[n])}" for n in names[:SUMMARY_FIELDS]]
    more = len(names) - SUMMARY_FIELDS
    return ", ".join(said) + (f" and {more} more" if more > 0 else "")


def decider(rec: Record) -> str:
    """Who or what closed the request, in words; empty while pending."""
    by = rec.decided_by
    if isinstance(by, PersonDecider):
        return by.userId if by.surface is SurfaceType.DASHBOARD else f"{by.userId} in {where(by.surface)}"
    if isinstance(by, PolicyDecider):
        return f"the policy ({by.rule})"
    if isinstance(by, TimeoutDecider):
        return "nobody in time"
    if isinstance(by, AgentDecider):
        return "the agent"
    if isinstance(by, SystemDecider):
        return f"Cosigner ({by.code})"
    if isinstance(by, AllowanceDecider):
        return f"{by.userId}'s standing allow {by.allowanceId}"
    return ""


def outcome(rec: Record) -> str:
    """The status as people read it: `denied by policy` for a call no person was asked about."""
    if isinstance(rec.decided_by, PolicyDecider):
        return f"{rec.status.value} by policy"
    return rec.status.value


def sender(rec: Record) -> str | None:
    """The Cosigner number that texted a request (`+1555…`), for "reply to the text from …"."""
    route = rec.route
    if not isinstance(route, SmsRoute) or not route.from_number:
        return None
    return route.from_number.removeprefix("whatsapp:")


def describe(
    rec: Record, now: float, link: str | None = None, person: Person | None = None
) -> dict[str, Any]:
    """One request as the templates show it."""
    card = rec.card()
    mine = set(person.ids) if person is not None else set()
    by_policy = isinstance(rec.decided_by, PolicyDecider)
    shown = rec.call_shown if not rec.closed else dict(card.parameters)
    return {
        "id": rec.id,
        "tenant": rec.tenant,
        "tool": card.tool_name,
        # While pending, the call the approvers are asked to approve (an edited one after an
        # edit); once closed, the agent's, with an approved edit's changes beside it.
        "call": json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False),
        "summary": summary(shown),
        "digest": card.digest,
        "edited_by": card.edited_by,
        "reason": card.reason,
        "triggered_by": card.triggered_by,
        # A call the policy denied outright was never put to the rule that would have asked.
        "policy": f"denied outright by {rec.decided_by.rule}"
        if isinstance(rec.decided_by, PolicyDecider) and rec.status is ApprovalStatus.DENIED
        else card.policy_rule,
        "by_policy": by_policy,
        "left": left(rec.expires_at - now),
        "created": when(rec.created_at),
        "status": rec.status.value,
        "outcome": outcome(rec),
        "decided": when(rec.decided_at),
        "decided_by": decider(rec),
        "comment": rec.comment,
        "always_deny": card.offers_always_deny,
        "slack_link": link,
        "asked_on": rec.route.surface.value if rec.route is not None else None,
        "asked_where": where(rec.route.surface) if rec.route is not None else "",
        "sender": sender(rec),
        "code": rec.short_code,
        "handoff": card.handoff is not None,
        "quorum": card.quorum,
        "separate_duties": card.separate_duties,
        "progress": card.progress(),
        "approvals": [
            {"by": v.by, "surface": v.surface.value, "at": when(v.at.timestamp())} for v in card.approvals
        ],
        "you_approved": any(v.by in mine for v in card.approvals if v.surface is SurfaceType.DASHBOARD),
        "editable": rec.edit is not None and bool(rec.edit.fields) and not rec.closed,
        "edited": edited_changes(rec),
        "step_up": rec.step_up,
    }


def confirmation(rec: Record, person: Person) -> str:
    """What the person's answer did, said in place of the form they answered with:
    `Approved issue_refund (amountCents 12900) — grant issued`, `Counted 1 of 2 …`."""
    call = f"{rec.tool_name} ({summary(rec.call_shown)})"
    by = rec.decided_by
    yours = isinstance(by, PersonDecider) and bool(set(person.vouched) & {by.userId})
    if not rec.closed:
        card = rec.card()
        if any(v.by in person.vouched for v in card.approvals):
            return f"Counted {card.progress()} approvals of {call}: it waits for another approver."
        return f"{call} still waits for an answer."
    if not yours:
        return f"{call} was already {outcome(rec)} by {decider(rec)}."
    if rec.status is ApprovalStatus.APPROVED:
        return f"Approved {call} — grant issued."
    said = f"{DONE.get(rec.status, rec.status.value)} {call}."
    return f"{said} Your comment: {rec.comment}" if rec.comment else said
