"""An approval's audit trail as a timeline people read: who, what, where, when, and the details
that matter (the comment, each quorum vote, each edit as old → new), never the stored JSON.

Each audit event kind has its sentence (`tests/inbox/test_timeline.py` holds every kind of
`AuditEvent` to that); a stored kind this server does not know is still said in words, its data
as `name: value` pairs. The audit record itself is unchanged: this only reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
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
    if kind == "allowance":
        who = f"{data.get('userId', 'someone')}'s standing allow {data.get('allowanceId', '')}"
        return who, where(data.get("surface"))
    if kind == "passkey":
        return "a passkey", "the inbox"
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


def length(seconds: float) -> str:
    """A stretch of time as a card offers it: `15m`, `1h`, `1h 30m`, `2d`."""
    minutes = max(round(seconds / 60), 0)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    said = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (mins, "m")) if n]
    return " ".join(said) or "0m"


def seconds_of(iso: Any) -> float | None:
    """An ISO 8601 time as epoch seconds; None for anything else."""
    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def oncall(data: Mapping[str, Any]) -> list[str]:
    """What a request or escalation says of on call: who was on call and asked, or why nobody
    on call could be asked and the rule's other approvers were asked instead."""
    said = data.get("oncall")
    if not isinstance(said, Mapping):
        return []
    rotations = ", ".join(map(str, said.get("rotations") or [])) or "the rotation"
    if said.get("fallback"):
        return [
            f"On call ({rotations}) not reached: {said['fallback']}; the rule's other approvers asked instead"
        ]
    lines = [f"On call ({rotations}): {', '.join(map(str, said.get('onCall') or [])) or 'nobody'}"]
    if said.get("unknown"):
        lines.append(f"On call but unknown here: {', '.join(map(str, said['unknown']))}")
    return lines


class Trail:
    """Reads the events in order, keeping the call as it stands so an edit shows old → new."""

    def __init__(self) -> None:
        self.call: dict[str, Any] = {}
        self.at = 0.0  # when the event being read happened
        self.by = "someone"  # who did it, as the timeline names them

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
        details += oncall(data)
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
        if event == AuditEvent.ALLOWANCE_GRANTED:
            return self.granted(data)
        if event == AuditEvent.ALLOWANCE_USED:
            what, details = _allowance_used(data)
            return f"{what} by {self.by}", details
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

    def granted(self, data: Mapping[str, Any]) -> Said:
        """`Allowed for 1h by U0ALICE — standing allow alw_…`, and what it lets through."""
        ends = seconds_of(data.get("expiresAt"))
        stretch = f" for {length(ends - self.at)}" if ends is not None else ""
        details = [f"Tool {data.get('toolName')}"]
        details += [f"{k}: {value_text(v)}" for k, v in sorted((data.get("match") or {}).items())]
        details += [f"{k}: at most {value_text(v)}" for k, v in sorted((data.get("atMost") or {}).items())]
        if data.get("maxUses"):
            details.append(f"At most {data['maxUses']} uses")
        if data.get("requester"):
            details.append(f"For calls from {data['requester']}")
        details.append(f"Until {when(ends)}" if ends is not None else "")
        return f"Allowed{stretch} by {self.by} — standing allow {data.get('allowanceId')}", details


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
    who = ", ".join(map(str, d.get("approvers") or [])) or "the approvers still to answer"
    if d.get("sent") is False:
        return f"Reminder to {who} not sent", [str(d.get("why") or "")]
    return f"Reminded {who}", [f"In {where(d.get('surface'))}" if d.get("surface") else ""]


def _escalated(d: Mapping[str, Any]) -> Said:
    route = d.get("route") or {}
    asked = ", ".join(map(str, route.get("approvers") or []))
    details = [f"Asked of {asked}" if asked else "", *oncall(d)]
    return f"Escalated (step {d.get('step')}) to {d.get('to', 'its route')}", details


def _escalation_delivered(d: Mapping[str, Any]) -> Said:
    return f"Escalation step {d.get('step')} shown in {where(d.get('surface'))}", []


def _escalation_failed(d: Mapping[str, Any]) -> Said:
    then = "retried" if d.get("retrying") else "not retried"
    return f"Escalation step {d.get('step')} not delivered ({then})", [str(d.get("why") or "")]


def _result(d: Mapping[str, Any]) -> Said:
    return "The agent reported the result", pairs(d)


def _allowance_used(d: Mapping[str, Any]) -> Said:
    details = [f"Use {d.get('use')} of {d['maxUses']}" if d.get("maxUses") else f"Use {d.get('use')}"]
    if d.get("grantedOn"):
        details.append(f"Granted on request {d['grantedOn']}")
    ends = seconds_of(d.get("expiresAt"))
    details.append(f"In force until {when(ends)}" if ends is not None else "")
    return "Approved at once", details


def _allowance_revoked(d: Mapping[str, Any]) -> Said:
    by = [f"Revoked by {d['by']}" if d.get("by") else ""]
    return f"Revoked the standing allow {d.get('allowanceId')} before it ran out", by


def _coalesced(d: Mapping[str, Any]) -> Said:
    details = [f"Execution {d.get('executionId')}, tool call {d.get('toolCallId')}"]
    if d.get("reason"):
        details.append(f"Agent's reason (its claim, not verified): {d['reason']}")
    return "The same call asked again while this one waited: answered with this one", details


def _passkey(d: Mapping[str, Any]) -> Said:
    verified = "user verified" if d.get("userVerified") else "user NOT verified"
    return f"Confirmed with a passkey ({verified})", [f"Credential {d.get('credentialId')}"]


def _email_sent(d: Mapping[str, Any]) -> Said:
    to = ", ".join(map(str, d.get("to") or [])) or "nobody"
    refused = f"Refused by the mail server: {', '.join(map(str, d['refused']))}" if d.get("refused") else ""
    return f"Emailed to {to}", [refused, f"Message {d.get('messageId')}" if d.get("messageId") else ""]


def _email_failed(d: Mapping[str, Any]) -> Said:
    return f"Email not sent (attempt {d.get('attempt')}): {d.get('then', '')}", [str(d.get("reason") or "")]


def _failures(d: Mapping[str, Any]) -> list[str]:
    failed = d.get("failed") or {}
    lines = [f"{origin}: {why}" for origin, why in failed.items()] if isinstance(failed, Mapping) else []
    if d.get("gone"):
        lines.append(f"{d['gone']} device(s) no longer subscribed, removed")
    if d.get("error"):
        lines.append(f"Error: {d['error']}")
    if d.get("retrying"):
        lines.append("Retried")
    return lines


def _push_sent(d: Mapping[str, Any]) -> Said:
    return f"Pushed to {d.get('sent')} device(s)", _failures(d)


def _push_failed(d: Mapping[str, Any]) -> Said:
    return "Push not delivered", _failures(d)


def _callback_attempt(d: Mapping[str, Any]) -> Said:
    got = f"HTTP {d['status']}" if d.get("status") is not None else str(d.get("error") or "no answer")
    if d.get("delivered"):
        return f"Told the agent's callback (attempt {d.get('attempt')}, {got})", []
    return f"The agent's callback failed (attempt {d.get('attempt')}, {got})", []


def _callback_refused(d: Mapping[str, Any]) -> Said:
    return "The agent's callback refused by the egress rules", [str(d.get("reason") or "")]


def _callback_abandoned(d: Mapping[str, Any]) -> Said:
    return f"Gave up on the agent's callback after {d.get('attempts')} attempts", []


def _sms_status(d: Mapping[str, Any]) -> Said:
    code = f"Error code {d['errorCode']}" if d.get("errorCode") else ""
    return f"Text {d.get('status')}", [code, f"Message {d.get('messageSid')}"]


def _edit_texted(d: Mapping[str, Any]) -> Said:
    to = ", ".join(map(str, d.get("texted") or []))
    what = f"Texted the edited call to {to}" if to else "The edited call could not be texted"
    return what, [str(p) for p in d.get("problems") or []]


def _prepared(d: Mapping[str, Any]) -> Said:
    preview = str(d.get("preview") or "")
    return f"Operation {d.get('operation')} prepared", [
        preview,
        f"Arguments digest {d.get('argumentsDigest')}",
    ]


def _claimed(d: Mapping[str, Any]) -> Said:
    return "The approved operation started executing (once)", []


def _execute_sent(d: Mapping[str, Any]) -> Said:
    return f"Sent to the application to execute (send {d.get('send')})", []


def _status_asked(d: Mapping[str, Any]) -> Said:
    return f"Asked the application how it went: {d.get('answer')}", []


def _outcome(d: Mapping[str, Any]) -> Said:
    return "The application reported the outcome", pairs(d.get("outcome") or {})


def _reconciled(d: Mapping[str, Any]) -> Said:
    return "The application settled the outcome", pairs(d.get("outcome") or {})


def _handoff_done(d: Mapping[str, Any]) -> Said:
    return "Marked done; the result is being checked", []


def _handoff_check(d: Mapping[str, Any]) -> Said:
    return "Checked the result with the application", pairs(d)


SENTENCES: dict[str, Callable[[Mapping[str, Any]], Said]] = {
    AuditEvent.DECISION_REFUSED: _refused,
    AuditEvent.DELIVERED: _delivered,
    AuditEvent.SIGNED_IN: _signed_in,
    AuditEvent.STANDING_DENY_SET: _deny_set,
    AuditEvent.STANDING_DENY_LIFTED: _deny_lifted,
    AuditEvent.REMINDED: _reminded,
    AuditEvent.ESCALATED: _escalated,
    AuditEvent.ESCALATION_DELIVERED: _escalation_delivered,
    AuditEvent.ESCALATION_FAILED: _escalation_failed,
    AuditEvent.RESULT: _result,
    AuditEvent.ALLOWANCE_USED: _allowance_used,
    AuditEvent.ALLOWANCE_REVOKED: _allowance_revoked,
    AuditEvent.COALESCED: _coalesced,
    AuditEvent.PASSKEY_CONFIRMED: _passkey,
    AuditEvent.EMAIL_SENT: _email_sent,
    AuditEvent.EMAIL_FAILED: _email_failed,
    AuditEvent.PUSH_SENT: _push_sent,
    AuditEvent.PUSH_FAILED: _push_failed,
    AuditEvent.CALLBACK_ATTEMPT: _callback_attempt,
    AuditEvent.CALLBACK_REFUSED: _callback_refused,
    AuditEvent.CALLBACK_ABANDONED: _callback_abandoned,
    AuditEvent.SMS_STATUS: _sms_status,
    AuditEvent.EDIT_TEXTED: _edit_texted,
    AuditEvent.PREPARED: _prepared,
    AuditEvent.CLAIMED: _claimed,
    AuditEvent.EXECUTE_SENT: _execute_sent,
    AuditEvent.STATUS_ASKED: _status_asked,
    AuditEvent.OUTCOME: _outcome,
    AuditEvent.RECONCILED: _reconciled,
    AuditEvent.HANDOFF_DONE: _handoff_done,
    AuditEvent.HANDOFF_CHECK: _handoff_check,
}
# The kinds `Trail.said` says itself (they need the call as it stands, or who and when).
OWN_SENTENCE = frozenset(
    {
        AuditEvent.REQUESTED,
        AuditEvent.APPROVAL_COUNTED,
        AuditEvent.CALL_EDITED,
        AuditEvent.APPROVALS_SET_ASIDE,
        AuditEvent.ALLOWANCE_GRANTED,
    }
)


def has_sentence(event: str) -> bool:
    """True when the timeline says `event` in a sentence of its own, not as raw fields."""
    return event in SENTENCES or event in OWN_SENTENCE or event in {s.value for s in ApprovalStatus}


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
        who, on = actor(by)
        trail.at, trail.by = row.at, who
        what, details = trail.said(row.event, data)
        comment = data.get("comment") if isinstance(data.get("comment"), str) else None
        entries.append(
            Entry(when(row.at), who, what, on, [d for d in details if d], comment or None, row.event)
        )
    return entries
