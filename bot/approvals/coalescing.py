"""One question, not two: an identical request while the first is pending is answered with it.

Two requests are the same question when they share tenant, execution, tool (names folded as
the policy folds them), requester and conversation (`bot.approvals.run_grants.requester_key`)
and parameters digest, and also the callback URL and whether the agent accepts edits (an
answer must reach the second caller the way it asked, and an edited call only an agent that
accepts edits). The pending request carries the digest of all of these (`key`), stored in
`approvals.coalesce_key` under a unique index of pending rows: of two concurrent identical
creates, one inserts and the other conflicts, reads again and is coalesced.

Only what would be asked is coalesced (`bot.approvals.intake.weigh` looks for the pending
twin after every rule that decides without a person), and only plain tool calls: an
operation's application prepares each request itself, and a handoff is a step each caller
waits on for its own. The second request gets the pending approval, `coalesced: true`, and a
`coalesced` event on that approval's audit record names its `toolCallId`; nothing else is
stored for it and no second card is posted.
"""

from __future__ import annotations

import hashlib

from bot.approvals.run_grants import requester_key
from contracts.audit_events import Coalesced, written
from contracts.enums import AuditEvent
from contracts.names import fold
from contracts.wire import ApprovalRequest
from storage import ledger
from storage.audit import Event
from storage.records import Record
from storage.work import Work


def key(tenant: str, req: ApprovalRequest, digest: str) -> str:
    """The coalescing key of a plain tool call: hex SHA-256 over the parts that make it one question."""
    parts = (
        tenant,
        req.executionId,
        fold(req.toolName),
        requester_key(req.surface.model_dump()),
        digest,
        str(req.callbackUrl) if req.callbackUrl is not None else "",
        "edits" if req.acceptsEdits else "",
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def record(tx: Work, approval_id: str, req: ApprovalRequest, now: float) -> Record | None:
    """Put the coalesced request on the pending approval's audit record; the approval as it
    stands after (None if it is gone)."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None:
        return None
    coalesced = Coalesced(
        executionId=req.executionId,
        toolCallId=req.toolCallId,
        reason=req.reason,  # redacted by the engine before intake
        surface=req.surface.model_dump(mode="json"),
    )
    actor = {"kind": "agent", "tenant": rec.tenant}
    return ledger.append(tx, rec, now, [Event(AuditEvent.COALESCED, actor, written(coalesced))])
