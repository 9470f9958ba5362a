"""An operation's contract and execution as the approvals table keeps them (`operation`, JSON).

The contract (the application's arguments and preview, frozen under `argumentsDigest`) is
written once with the approval. The arguments are sealed (`storage.sealing`, bound to the
tenant and approval by `arguments_context`), as a handoff's parameters are: they are what
the application will run, often with account numbers or addresses in them, and nobody
reads them but the `execute` call. A row written before they were sealed holds them as
clear JSON text, which `TokenSeal.open` returns as it is. The execution part changes in the approval's own
conditional UPDATEs: `claimed` when the approval closes approved, `sent` before each
`execute` leaves, and `settled` when the application's outcome is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from typing import Any

from contracts.audit_events import Claimed, ExecuteSent, Outcome, Prepared, Reconciled, written
from contracts.enums import AuditEvent, OperationState
from contracts.operations import OperationOutcome, Preview
from storage.audit import Event


@dataclass(frozen=True)
class OperationRecord:
    """One approval's operation: the frozen contract, where to execute it, and how far it got."""

    name: str
    sealed_arguments: str  # the arguments' JSON text, sealed (clear in rows older than sealing)
    preview: dict[str, Any]
    arguments_digest: str
    url: str
    secret_env: str
    execute_timeout: float
    state: OperationState = OperationState.PREPARED
    sent: int = 0
    outcome: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, text: str | None) -> OperationRecord | None:
        """Rebuild a stored operation; None for a plain tool call."""
        if not text:
            return None
        d = json.loads(text)
        d["state"] = OperationState(d["state"])
        if "arguments" in d:  # written before arguments were sealed: read as clear text
            d["sealed_arguments"] = json.dumps(d.pop("arguments"), separators=(",", ":"))
        return cls(**d)

    def to_json(self) -> str:
        """The column's JSON text."""
        # Field by field, not dataclasses.asdict: that deep-copies the arguments and preview
        # before json.dumps walks them anyway (the same text, at a fraction of the cost).
        return json.dumps({name: getattr(self, name) for name in _FIELDS}, separators=(",", ":"))

    @property
    def preview_model(self) -> Preview:
        """The preview as its wire model."""
        return Preview.model_validate(self.preview)

    @property
    def outcome_model(self) -> OperationOutcome | None:
        """The stored outcome as its wire model, once there is one."""
        return None if self.outcome is None else OperationOutcome.model_validate(self.outcome, strict=False)


_FIELDS = tuple(f.name for f in fields(OperationRecord))


def arguments_context(tenant: str, approval_id: str) -> str:
    """What sealed arguments are bound to: they open for this approval only."""
    return f"operation arguments|{tenant}|{approval_id}"


def prepared_event(op: OperationRecord) -> Event:
    """The audit event of a contract frozen under its digest (arguments are not repeated)."""
    data = Prepared(operation=op.name, preview=op.preview, argumentsDigest=op.arguments_digest)
    return Event(AuditEvent.PREPARED, {"kind": "system"}, written(data))


def _claim_event(op: OperationRecord) -> Event:
    return Event(
        AuditEvent.CLAIMED, {"kind": "system"}, written(Claimed(argumentsDigest=op.arguments_digest))
    )


def claim(op: OperationRecord) -> tuple[OperationRecord, Event]:
    """An approved operation that is now executing, and the audit event saying so."""
    return replace(op, state=OperationState.EXECUTING), _claim_event(op)


def claimed_and_sending(op: OperationRecord, attempt_key: str) -> tuple[OperationRecord, list[Event]]:
    """`claim` and the first `sending` in one step: the approving replica sends at once."""
    counted, sent = sending(replace(op, state=OperationState.EXECUTING), attempt_key)
    return counted, [_claim_event(op), sent]


def sending(op: OperationRecord, attempt_key: str) -> tuple[OperationRecord, Event]:
    """Count an `execute` about to leave: a later attempt must ask `status` first."""
    return (
        replace(op, sent=op.sent + 1),
        Event(
            AuditEvent.EXECUTE_SENT,
            {"kind": "system"},
            written(ExecuteSent(send=op.sent + 1, idempotencyKey=attempt_key)),
        ),
    )


_SETTLED = {AuditEvent.OUTCOME: Outcome, AuditEvent.RECONCILED: Reconciled}


def settled(
    op: OperationRecord, outcome: OperationOutcome, event: AuditEvent
) -> tuple[OperationRecord, Event]:
    """Store the application's outcome: final, or `reconciling` while it settles."""
    state = OperationState.DONE if outcome.final else OperationState.RECONCILING
    shown = outcome.model_dump(mode="json")
    return (
        replace(op, state=state, outcome=shown),
        Event(event, {"kind": "application", "operation": op.name}, written(_SETTLED[event](outcome=shown))),
    )
