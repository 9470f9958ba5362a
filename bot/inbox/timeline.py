"""An approval's audit trail as a timeline people read: who, what, where, when, and the details
that matter (the comment, each quorum vote, each edit as old → new), never the stored JSON.

Each audit event kind has its sentence; a kind without one (added later) is still said in
words, its data as `name: value` pairs. The audit record itself is unchanged: this only reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.inbox.items import DONE, value_text, when, where
from contracts.enums import ApprovalStatus, AuditEvent
from storage.audit import AuditRow

Said = tuple[str, list[str]]  # what happened, and its details


@dataclass
class Entry:
    """One line of the timeline."""

    at: str
    who: str
    what: str
    where: str = ""
    details: list[str] = field(default_factory=list)
    comment: str | None = None
    kind: str = ""


def actor(data: Mapping[str, Any]) -> tuple[str, str]:
    """Who acted, and on which surface (empty when none)."""
    kind = data.get("kind")
    if kind == "person":
        return str(data.get("userId", "someone")), where(data.get("surface"))
    if kind == "agent":
        return "the agent", ""
    if kind == "policy":
        return f"the policy ({data.get('rule', '')})", ""
    if kind == "timeout":
        return "nobody in time", ""
    if kind == "application":
        return f"the application ({data.get('operation', '')})", ""
    if kind == "surface":
        return "the surface", ""
    if kind == "system" and data.get("code"):
        return f"Cosigner ({data['code']})", ""
    return "Cosigner", ""


def pairs(data: Mapping[str, Any], skip: Iterable[str] = ()) -> list[str]:
    """The data of an event without a sentence of its own, as `name: value` lines."""
    left_out = set(skip)
    return [
        f"{k}: {value_text(v)}" for k, v in data.items() if k not in left_out and v not in (None, "", [], {})
    ]


def voters(data: Mapping[str, Any]) -> str:
    """`ada@acme.example (the inbox), U0BOB (Slack)`."""
    return ", ".join(f"{a.get('by')} ({where(a.get('surface'))})" for a in data.get("approvers") or [])


class Trail:
    """Reads the events in order, keeping the call as it stands so an edit shows old → new."""

    def __init__(self) -> None:
        self.call: dict[str, Any] = {}

    def requested(self, data: Mapping[str, Any]) -> Said:
        """The request: the tool, each parameter as shown, the reason, the rule, who was asked."""
        self.call = dict(data.get("parameters") or {})
        details = [f"Tool {data.get('toolName')}"]
        details += [f"{k}: {value_text(v)}" for k, v in sorted(self.call.items())]
        if data.get("reason"):
            details.append(f"Agent's reason (its claim, not verified): {data['reason']}")
        if data.get("policy"):
            details.append(f"Policy: {data['policy']}")
        if data.get("quorum"):
            details.append(f"{data['quorum']} distinct approvers must approve")
        route = data.get("route") or {}
        if route.get("approvers"):
            details.append(f"Asked of {', '.join(map(str, route['approvers']))}")
        return "Asked for approval", details

    def edited(self, data: Mapping[str, Any]) -> list[str]:
        """Each change of an edit as `name: old → new`; the edited call is the call from now on."""
        edit = data.get("edited") or {}
        new = dict(edit.get("parameters") or {})
        changes = [
            f"{name}: {value_text(self.call.get(name))} → {value_text(new.get(name))}"
            for name in edit.get("changed") or []
        ]
        if new:
            self.call = new
        return changes

    def said(self, event: str, data: Mapping[str, Any]) -> Said:
        """What happened, and its details, for one event."""
        if event == AuditEvent.REQUESTED:
            return self.requested(data)
        if event == AuditEvent.APPROVAL_COUNTED:
            return f"Approve counted: {data.get('count')} of {data.get('quorum')}", []
        if event == AuditEvent.CALL_EDITED:
            return "Edited the call", self.edited(data)
        if event == AuditEvent.APPROVALS_SET_ASIDE:
            return "Approvals set aside", [f"{voters(data)}: {data.get('reason', '')}"]
        if event in {s.value for s in ApprovalStatus}:
            status = ApprovalStatus(event)
            details = self.edited(data) if data.get("edited") else []
            if data.get("approvers"):
                details.append(f"Approved by {voters(data)}")
            return f"{DONE.get(status, status.value)}{' with an edit' if data.get('edited') else ''}", details
        simple = SENTENCES.get(event)
        if simple is not None:
            return simple(data)
        return event.replace("_", " ").capitalize(), pairs(data)


def _refused(d: Mapping[str, Any]) -> Said:
    return f"Answer refused ({d.get('wanted', '')})", [str(d.get("message", ""))]


def _delivered(d: Mapping[str, Any]) -> Said:
    return f"Delivered to {where(d.get('surface'))}", []


def _signed_in(d: Mapping[str, Any]) -> Said:
    return "Signed in", [f"Issuer {d.get('issuer')}, subject {d.get('subject')}"]


def _deny_set(d: Mapping[str, Any]) -> Said:
    return "Set a standing deny", pairs(d)


def _deny_lifted(d: Mapping[str, Any]) -> Said:
    return "Lifted a standing deny", pairs(d)


def _reminded(d: Mapping[str, Any]) -> Said:
    return "Reminded the approvers still to answer", pairs(d)


def _escalated(d: Mapping[str, Any]) -> Said:
    return "Escalated", pairs(d)


def _result(d: Mapping[str, Any]) -> Said:
    return "The agent reported the result", pairs(d)


SENTENCES: dict[str, Callable[[Mapping[str, Any]], Said]] = {
    AuditEvent.DECISION_REFUSED: _refused,
    AuditEvent.DELIVERED: _delivered,
    AuditEvent.SIGNED_IN: _signed_in,
    AuditEvent.STANDING_DENY_SET: _deny_set,
    AuditEvent.STANDING_DENY_LIFTED: _deny_lifted,
    AuditEvent.REMINDED: _reminded,
    AuditEvent.ESCALATED: _escalated,
    AuditEvent.RESULT: _result,
}


def loaded(text: str) -> dict[str, Any]:
    """A stored JSON object; anything else (never expected) as an empty one."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def timeline(rows: Iterable[AuditRow]) -> list[Entry]:
    """The audit rows of one approval, oldest first, as the timeline shows them."""
    trail, entries = Trail(), []
    for row in rows:
        data, by = loaded(row.data), loaded(row.actor)
        what, details = trail.said(row.event, data)
        who, on = actor(by)
        comment = data.get("comment") if isinstance(data.get("comment"), str) else None
        entries.append(
            Entry(when(row.at), who, what, on, [d for d in details if d], comment or None, row.event)
        )
    return entries
