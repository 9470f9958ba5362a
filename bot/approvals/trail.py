"""Events added to an approval's audit trail without changing its status: where it was
delivered, what a surface or worker saw, and what the approved call returned.

Each function is one step run inside one write transaction; `clock` is read once the
approval's row is locked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bot.approvals.lifecycle import queue_card_update
from bot.policy import Policy, redact
from contracts.audit_events import Delivered, Result, written
from contracts.enums import ApprovalStatus, AuditEvent
from contracts.errors import AlreadyDecided, ApprovalNotFound, ApprovalPending
from contracts.ports import Delivered as Receipt
from contracts.wire import ResultReport
from storage import ledger
from storage.audit import Event
from storage.records import Changes
from storage.work import Work

Clock = Callable[[], float]


def record_delivery(tx: Work, approval_id: str, receipt: Receipt, clock: Clock) -> bool:
    """Store a delivery receipt; True if the approval closed meanwhile (its card update is queued)."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None:
        return False
    now = clock()
    seen = Delivered(
        surface=receipt.surface, conversation=receipt.conversation, messages=list(receipt.message_refs)
    )
    rec = ledger.append(
        tx,
        rec,
        now,
        [Event(AuditEvent.DELIVERED, {"kind": "system"}, written(seen))],
        Changes(delivered=receipt),
    )
    if rec.closed:
        queue_card_update(tx, rec.id, now)
    return rec.closed


def record_note(tx: Work, approval_id: str, event: AuditEvent, data: Mapping[str, Any], clock: Clock) -> None:
    """Append a surface or worker event (redacted); nothing if the approval is gone."""
    ledger.note(tx, approval_id, clock(), [Event(event, {"kind": "surface"}, redact(dict(data)))])


def record_result(
    tx: Work, policy: Policy, tenant: str, approval_id: str, report: ResultReport, clock: Clock
) -> str:
    """Put what an approved call returned on its audit record (redacted); the approval's id.
    Only the approval's chain head and status are read: the report changes nothing else."""
    rec = ledger.head(tx, approval_id, lock=True)
    if rec is None or rec.tenant != tenant:
        raise ApprovalNotFound(f"no approval {approval_id} for this API key")
    if rec.operation:
        # The application executed it and its outcome is final (it is on the decision
        # object): an agent's word about the same call must not stand beside it.
        raise AlreadyDecided(
            f"approval {rec.id} is an operation: its application carries it out and reports the "
            "outcome itself (the decision's `outcome`); an agent reports results only for its own calls",
            status=rec.status.value,
        )
    if rec.status is ApprovalStatus.PENDING:
        raise ApprovalPending(
            f"approval {rec.id} is pending; run the call only once it is approved, then report its result",
            status=rec.status.value,
        )
    if rec.status is not ApprovalStatus.APPROVED:
        raise AlreadyDecided(
            f"approval {rec.id} is {rec.status.value}; only an approved "
            "call can have run, so there is no result to record",
            status=rec.status.value,
        )
    # The tool's own redact paths too: a result often echoes the call's parameters,
    # and an error message can quote a card number or a key.
    paths = policy.rule_for(tenant, rec.tool_name).redact
    data = Result(outcome=report.outcome, result=redact(report.result, paths), error=redact(report.error))
    ledger.add_events(tx, rec, clock(), [Event(AuditEvent.RESULT, {"kind": "agent"}, written(data))])
    return rec.id
