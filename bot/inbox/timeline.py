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
from typing import Any, TypeVar

from bot.inbox.items import DONE, value_text, when, where
from contracts import audit_events as ev
from contracts.enums import ApprovalStatus
from storage.audit import AuditRow

_E = TypeVar("_E", bound=ev.AuditEventModel)

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
    """The data of an event without a sentence of its own, as `name: value` lines (by name,
    as the chain stores them)."""
    left_out = set(skip)
    return [
        f"{k}: {value_text(v)}"
        for k, v in sorted(data.items())
        if k not in left_out and v not in (None, "", [], {})
    ]


def voters(approvers: Iterable[Mapping[str, Any]] | None) -> str:
    """`ada@acme.example (the inbox), U0BOB (Slack)`."""
    return ", ".join(f"{a.get('by')} ({where(a.get('surface'))})" for a in approvers or [])


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


def oncall(said: ev.OnCallNote | None) -> list[str]:
    """What a request or escalation says of on call (its `oncall`): who was on call and asked,
    or why nobody on call could be asked and the rule's other approvers were asked instead."""
    if said is None:
        return []
    rotations = ", ".join(said.rotations or []) or "the rotation"
    if said.fallback:
        return [
            f"On call ({rotations}) not reached: {said.fallback}; the rule's other approvers asked instead"
        ]
    lines = [f"On call ({rotations}): {', '.join(said.onCall or []) or 'nobody'}"]
    if said.unknown:
        lines.append(f"On call but unknown here: {', '.join(said.unknown)}")
    return lines


class Trail:
    """Reads the events in order, keeping the call as it stands so an edit shows old → new."""

    def __init__(self) -> None:
        self.call: dict[str, Any] = {}
        self.at = 0.0  # when the event being read happened
        self.by = "someone"  # who did it, as the timeline names them

    def requested(self, e: ev.Requested) -> Said:
        """The request: the tool, each parameter as shown, the reason, the rule, who was asked."""
        self.call = dict(e.parameters) if isinstance(e.parameters, Mapping) else {}
        details = [f"Tool {e.toolName}"]
        details += [f"{k}: {value_text(v)}" for k, v in sorted(self.call.items())]
        if e.reason:
            details.append(f"Agent's reason (its claim, not verified): {e.reason}")
        if e.policy:
            details.append(f"Policy: {e.policy}")
        if e.quorum:
            details.append(f"{e.quorum} distinct approvers must approve")
        route = e.route or {}
        if route.get("approvers"):
            details.append(f"Asked of {', '.join(map(str, route['approvers']))}")
        details += oncall(e.oncall)
        return "Asked for approval", details

    def edited(self, edit: Mapping[str, Any] | None) -> list[str]:
        """Each change of an edit as `name: old → new`; the edited call is the call from now on."""
        edit = edit or {}
        new = dict(edit.get("parameters") or {})
        changes = [
            f"{name}: {value_text(self.call.get(name))} → {value_text(new.get(name))}"
            for name in edit.get("changed") or []
        ]
        if new:
            self.call = new
        return changes

    def said(self, e: ev.AuditEventModel | ev.UnknownEvent) -> Said:
        """What happened, and its details, for one event read through its model."""
        if isinstance(e, ev.Requested):
            return self.requested(e)
        if isinstance(e, ev.Counted):
            return f"Approve counted: {e.count} of {e.quorum}", []
        if isinstance(e, ev.Edited):
            return "Edited the call", self.edited(e.edited)
        if isinstance(e, ev.SetAside):
            return "Approvals set aside", [f"{voters(e.approvers)}: {e.reason or ''}"]
        if isinstance(e, ev.AllowanceGranted):
            return self.granted(e)
        if isinstance(e, ev.AllowanceUsed):
            what, details = _allowance_used(e)
            return f"{what} by {self.by}", details
        if isinstance(e, ev.Closing):
            status = ApprovalStatus(e.kind)
            details = self.edited(e.edited) if e.edited else []
            if e.approvers:
                details.append(f"Approved by {voters(e.approvers)}")
            return f"{DONE.get(status, status.value)}{' with an edit' if e.edited else ''}", details
        simple = None if isinstance(e, ev.UnknownEvent) else SENTENCES.get(type(e))
        if simple is not None:
            return simple(e)
        # A kind this server does not know, or data its model could not read.
        return e.kind.replace("_", " ").capitalize(), pairs(ev.event_data(e))

    def granted(self, e: ev.AllowanceGranted) -> Said:
        """`Allowed for 1h by U0ALICE — standing allow alw_…`, and what it lets through."""
        ends = seconds_of(e.expiresAt)
        stretch = f" for {length(ends - self.at)}" if ends is not None else ""
        details = [f"Tool {e.toolName}"]
        details += [f"{k}: {value_text(v)}" for k, v in sorted((e.match or {}).items())]
        details += [f"{k}: at most {value_text(v)}" for k, v in sorted((e.atMost or {}).items())]
        if e.maxUses:
            details.append(f"At most {e.maxUses} uses")
        if e.requester:
            details.append(f"For calls from {e.requester}")
        details.append(f"Until {when(ends)}" if ends is not None else "")
        return f"Allowed{stretch} by {self.by} — standing allow {e.allowanceId}", details


def _fields(e: ev.AuditEventModel) -> list[str]:
    # An event said as its fields: as stored (sorted, as the chain keeps them).
    return pairs(ev.event_data(e))


def _refused(e: ev.DecisionRefused) -> Said:
    return f"Answer refused ({e.wanted or ''})", [e.message or ""]


def _delivered(e: ev.Delivered) -> Said:
    return f"Delivered to {where(e.surface)}", []


def _signed_in(e: ev.SignedIn) -> Said:
    return "Signed in", [f"Issuer {e.issuer}, subject {e.subject}"]


def _deny_set(e: ev.StandingDenySet) -> Said:
    return "Set a standing deny", _fields(e)


def _deny_lifted(e: ev.StandingDenyLifted) -> Said:
    return "Lifted a standing deny", _fields(e)


def _reminded(e: ev.Reminded) -> Said:
    who = ", ".join(e.approvers or []) or "the approvers still to answer"
    if e.sent is False:
        return f"Reminder to {who} not sent", [e.why or ""]
    return f"Reminded {who}", [f"In {where(e.surface)}" if e.surface else ""]


def _escalated(e: ev.Escalated) -> Said:
    route = e.route or {}
    asked = ", ".join(map(str, route.get("approvers") or []))
    details = [f"Asked of {asked}" if asked else "", *oncall(e.oncall)]
    return f"Escalated (step {e.step}) to {e.to or 'its route'}", details


def _escalation_delivered(e: ev.EscalationDelivered) -> Said:
    return f"Escalation step {e.step} shown in {where(e.surface)}", []


def _escalation_failed(e: ev.EscalationFailed) -> Said:
    then = "retried" if e.retrying else "not retried"
    return f"Escalation step {e.step} not delivered ({then})", [e.why or ""]


def _result(e: ev.Result) -> Said:
    return "The agent reported the result", _fields(e)


def _allowance_used(e: ev.AllowanceUsed) -> Said:
    details = [f"Use {e.use} of {e.maxUses}" if e.maxUses else f"Use {e.use}"]
    if e.grantedOn:
        details.append(f"Granted on request {e.grantedOn}")
    ends = seconds_of(e.expiresAt)
    details.append(f"In force until {when(ends)}" if ends is not None else "")
    return "Approved at once", details


def _allowance_revoked(e: ev.AllowanceRevoked) -> Said:
    return f"Revoked the standing allow {e.allowanceId} before it ran out", [
        f"Revoked by {e.by}" if e.by else ""
    ]


def _coalesced(e: ev.Coalesced) -> Said:
    details = [f"Execution {e.executionId}, tool call {e.toolCallId}"]
    if e.reason:
        details.append(f"Agent's reason (its claim, not verified): {e.reason}")
    return "The same call asked again while this one waited: answered with this one", details


def _passkey(e: ev.PasskeyConfirmed) -> Said:
    verified = "user verified" if e.userVerified else "user NOT verified"
    return f"Confirmed with a passkey ({verified})", [f"Credential {e.credentialId}"]


def _email_sent(e: ev.EmailSent) -> Said:
    to = ", ".join(e.to or []) or "nobody"
    refused = f"Refused by the mail server: {', '.join(e.refused)}" if e.refused else ""
    return f"Emailed to {to}", [refused, f"Message {e.messageId}" if e.messageId else ""]


def _email_failed(e: ev.EmailFailed) -> Said:
    return f"Email not sent (attempt {e.attempt}): {e.then or ''}", [e.reason or ""]


def _failures(e: ev.PushSent | ev.PushFailed) -> list[str]:
    lines = [f"{origin}: {why}" for origin, why in (e.failed or {}).items()]
    if e.gone:
        lines.append(f"{e.gone} device(s) no longer subscribed, removed")
    if e.error:
        lines.append(f"Error: {e.error}")
    if e.retrying:
        lines.append("Retried")
    return lines


def _push_sent(e: ev.PushSent) -> Said:
    return f"Pushed to {e.sent} device(s)", _failures(e)


def _push_failed(e: ev.PushFailed) -> Said:
    return "Push not delivered", _failures(e)


def _callback_attempt(e: ev.CallbackAttempt) -> Said:
    got = f"HTTP {e.status}" if e.status is not None else str(e.error or "no answer")
    if e.delivered:
        return f"Told the agent's callback (attempt {e.attempt}, {got})", []
    return f"The agent's callback failed (attempt {e.attempt}, {got})", []


def _callback_refused(e: ev.CallbackRefused) -> Said:
    return "The agent's callback refused by the egress rules", [e.reason or ""]


def _callback_abandoned(e: ev.CallbackAbandoned) -> Said:
    return f"Gave up on the agent's callback after {e.attempts} attempts", []


def _sms_status(e: ev.SmsStatus) -> Said:
    code = f"Error code {e.errorCode}" if e.errorCode else ""
    return f"Text {e.status}", [code, f"Message {e.messageSid}"]


def _edit_texted(e: ev.EditTexted) -> Said:
    to = ", ".join(e.texted or [])
    what = f"Texted the edited call to {to}" if to else "The edited call could not be texted"
    return what, list(e.problems or [])


def _prepared(e: ev.Prepared) -> Said:
    return f"Operation {e.operation} prepared", [
        str(e.preview or ""),
        f"Arguments digest {e.argumentsDigest}",
    ]


def _claimed(e: ev.Claimed) -> Said:
    return "The approved operation started executing (once)", []


def _execute_sent(e: ev.ExecuteSent) -> Said:
    return f"Sent to the application to execute (send {e.send})", []


def _status_asked(e: ev.StatusAsked) -> Said:
    return f"Asked the application how it went: {e.answer}", []


def _outcome(e: ev.Outcome) -> Said:
    return "The application reported the outcome", pairs(e.outcome or {})


def _reconciled(e: ev.Reconciled) -> Said:
    return "The application settled the outcome", pairs(e.outcome or {})


def _handoff_done(e: ev.HandoffDone) -> Said:
    return "Marked done; the result is being checked", []


def _handoff_check(e: ev.HandoffCheck) -> Said:
    return "Checked the result with the application", _fields(e)


def _sentence(
    kind: type[_E], say: Callable[[_E], Said]
) -> tuple[type[ev.AuditEventModel], Callable[[Any], Said]]:
    return kind, say


SENTENCES: dict[type[ev.AuditEventModel], Callable[[Any], Said]] = dict(
    [
        _sentence(ev.DecisionRefused, _refused),
        _sentence(ev.Delivered, _delivered),
        _sentence(ev.SignedIn, _signed_in),
        _sentence(ev.StandingDenySet, _deny_set),
        _sentence(ev.StandingDenyLifted, _deny_lifted),
        _sentence(ev.Reminded, _reminded),
        _sentence(ev.Escalated, _escalated),
        _sentence(ev.EscalationDelivered, _escalation_delivered),
        _sentence(ev.EscalationFailed, _escalation_failed),
        _sentence(ev.Result, _result),
        _sentence(ev.AllowanceRevoked, _allowance_revoked),
        _sentence(ev.Coalesced, _coalesced),
        _sentence(ev.PasskeyConfirmed, _passkey),
        _sentence(ev.EmailSent, _email_sent),
        _sentence(ev.EmailFailed, _email_failed),
        _sentence(ev.PushSent, _push_sent),
        _sentence(ev.PushFailed, _push_failed),
        _sentence(ev.CallbackAttempt, _callback_attempt),
        _sentence(ev.CallbackRefused, _callback_refused),
        _sentence(ev.CallbackAbandoned, _callback_abandoned),
        _sentence(ev.SmsStatus, _sms_status),
        _sentence(ev.EditTexted, _edit_texted),
        _sentence(ev.Prepared, _prepared),
        _sentence(ev.Claimed, _claimed),
        _sentence(ev.ExecuteSent, _execute_sent),
        _sentence(ev.StatusAsked, _status_asked),
        _sentence(ev.Outcome, _outcome),
        _sentence(ev.Reconciled, _reconciled),
        _sentence(ev.HandoffDone, _handoff_done),
        _sentence(ev.HandoffCheck, _handoff_check),
    ]
)
"""Each kind's sentence, by its model (each function reads its own model's fields)."""
# The kinds `Trail.said` says itself (they need the call as it stands, or who and when).
OWN_SENTENCE = frozenset(
    {ev.Requested, ev.Counted, ev.Edited, ev.SetAside, ev.AllowanceGranted, ev.AllowanceUsed}
)


def has_sentence(event: str) -> bool:
    """True when the timeline says `event` in a sentence of its own, not as raw fields."""
    if event in {s.value for s in ApprovalStatus}:
        return True  # said as how the request closed
    model = ev.MODELS.get(event)
    return model is not None and (model in SENTENCES or model in OWN_SENTENCE)


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
        event, by = row.typed(), loaded(row.actor)
        who, on = actor(by)
        trail.at, trail.by = row.at, who
        what, details = trail.said(event)
        comment = event.comment if isinstance(event, ev.Closing | ev.Counted) else None
        entries.append(
            Entry(when(row.at), who, what, on, [d for d in details if d], comment or None, row.event)
        )
    return entries
