"""Audit events as CloudEvents 1.0 (JSON event format): what `cosigner audit export --format
cloudevents` writes, one per line, and what the audit sink POSTs in structured mode.

Each link of an approval's audit chain is one CloudEvent: `type` from `TYPES` (a kind not
listed maps to `dev.cosigner.approval.` and its name with `_` as `.`), `source` the tenant
(`/tenants/<name>`), `subject` the approval id, `id` the link's chain hash, `time` RFC 3339,
`data` the typed event (`contracts.audit_events`). Extension attributes carry what a
receiver needs to verify the chain: `cosignerprevhash`, `cosignerseq`, `cosignerevent`
(the stored kind), `cosignerat` (the recorded time exactly as hashed) and `cosigneractor`
(the actor's JSON text exactly as hashed). docs/audit.md says how to verify.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from contracts.audit_events import event_data, parse_event

PREFIX = "dev.cosigner.approval."
MEDIA_TYPE = "application/cloudevents+json"  # the structured mode's content type
# Every kind's CloudEvents type, less the prefix (docs/audit.md has the table).
TYPES = {
    "requested": "requested",
    "approved": "approved",
    "denied": "denied",
    "expired": "expired",
    "cancelled": "cancelled",
    "completed": "completed",
    "failed": "failed",
    "approval_counted": "counted",
    "call_edited": "edited",
    "approvals_set_aside": "approvals.set_aside",
    "allowance_granted": "allowance.granted",
    "allowance_used": "allowance.used",
    "allowance_revoked": "allowance.revoked",
    "coalesced": "coalesced",
    "decision_refused": "decision.refused",
    "delivered": "delivered",
    "callback_attempt": "callback.attempted",
    "callback_refused": "callback.refused",
    "callback_abandoned": "callback.abandoned",
    "result": "result",
    "sms_status": "sms.status",
    "standing_deny_set": "standing_deny.set",
    "standing_deny_lifted": "standing_deny.lifted",
    "signed_in": "answerer.signed_in",
    "passkey_confirmed": "answerer.passkey_confirmed",
    "prepared": "operation.prepared",
    "claimed": "operation.claimed",
    "execute_sent": "operation.execute_sent",
    "status_asked": "operation.status_asked",
    "outcome": "operation.outcome",
    "reconciled": "operation.reconciled",
    "handoff_done": "handoff.done",
    "handoff_check": "handoff.checked",
    "reminded": "reminded",
    "escalated": "escalated",
    "escalation_delivered": "escalation.delivered",
    "escalation_failed": "escalation.failed",
    "edit_texted": "edit.texted",
    "email_sent": "email.sent",
    "email_failed": "email.failed",
    "push_sent": "push.sent",
    "push_failed": "push.failed",
}


def event_type(kind: str) -> str:
    """The CloudEvents `type` of a stored kind."""
    return PREFIX + TYPES.get(kind, kind.replace("_", "."))


def tenant_source(tenant: str) -> str:
    """The CloudEvents `source` of a tenant: a URI-reference, the name percent-encoded."""
    return "/tenants/" + quote(tenant, safe="")


def rfc3339(at: float) -> str:
    """A recorded time as RFC 3339 in UTC, to the microsecond."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class AuditCloudEvent(BaseModel):
    """One audit chain link as a CloudEvent 1.0 in the JSON event format."""

    model_config = ConfigDict(frozen=True)

    specversion: Literal["1.0"] = "1.0"
    id: str  # the link's chain hash
    source: str  # /tenants/<tenant>
    type: str
    subject: str  # the approval id
    time: str
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any]
    cosignerprevhash: str
    cosignerseq: int
    cosignerevent: str
    cosignerat: str
    cosigneractor: str


def cloudevent(
    *,
    approval_id: str,
    tenant: str,
    seq: int,
    at: float,
    event: str,
    actor: str,
    data: Any,
    prev_hash: str,
    hash: str,
) -> AuditCloudEvent:
    """The CloudEvent of one stored link; `actor` is its JSON text as stored, `data` its
    parsed data (read through the kind's typed model)."""
    fields = data if isinstance(data, dict) else {"value": data}
    return AuditCloudEvent(
        id=hash,
        source=tenant_source(tenant),
        type=event_type(event),
        subject=approval_id,
        time=rfc3339(at),
        data=event_data(parse_event(event, fields)),
        cosignerprevhash=prev_hash,
        cosignerseq=seq,
        cosignerevent=event,
        cosignerat=repr(at),
        cosigneractor=actor,
    )
