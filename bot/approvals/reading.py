"""Reading approvals: one approval for its tenant, its wire body, and the agent's wait for it.

`Engine.record`, `Engine.decision`, `Engine.body` and `Engine.wait` are these functions.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bot.approvals.bodies import Start, decision_body, start_body
from contracts.answers import Decision
from contracts.errors import ApprovalNotFound
from storage import ledger
from storage.records import Record

if TYPE_CHECKING:
    from bot.approvals.engine import Engine


async def record(engine: Engine, approval_id: str, tenant: str | None = None) -> Record:
    """The approval, if it belongs to `tenant` (None: any tenant)."""
    rec = await engine.db.run_read(lambda tx: ledger.load(tx, approval_id))
    if rec is None or (tenant is not None and rec.tenant != tenant):
        raise ApprovalNotFound(
            f"no approval {approval_id} for this API key; check the id "
            "and that you use the key of the tenant that created it"
        )
    return rec


def decision(engine: Engine, rec: Record) -> Decision:
    """The decision object, its grant for the executor the tool's rule names (`audience`)."""
    policy = engine.policy
    audience = None if rec.operation is not None else policy.rule_for(rec.tenant, rec.tool_name).audience
    return decision_body(rec, engine.signer, engine.grant_ttl, audience)


def body(engine: Engine, rec: Record) -> Start | Decision:
    """The wire body for GET: `approval_start` while pending, else the decision."""
    if rec.closed:
        return decision(engine, rec)
    return start_body(rec)


async def wait(engine: Engine, tenant: str, approval_id: str, seconds: float) -> Record:
    """Return once the approval settles (closes; an approved operation: has its outcome)
    or `seconds` pass.

    Push, not polling: the waiter subscribes before it reads, and the closing step hands
    it the closed record. A NOTIFY from another replica wakes it to read again, and a
    slow recheck covers a lost notification.
    """
    deadline = engine.clock() + seconds
    # The first look may take "pending" from this replica's copy (`Database.pending_copy`):
    # it only starts the wait, and a close, heard here, wakes it to read the database.
    copy = engine.db.pending_copy(approval_id)
    while True:
        fut = engine.notifier.subscribe(approval_id)
        try:
            if copy is not None and copy.tenant == tenant and deadline > engine.clock():
                rec, copy = copy, None
            else:
                rec = await engine.record(approval_id, tenant)
            now = engine.clock()
            if rec.settled or deadline <= now:
                return rec
            timeout = min(deadline - now, engine.recheck_seconds)
            if not rec.closed:  # else an approved operation, waiting for its outcome
                if rec.expires_at <= now:
                    await engine.expire(rec.id)
                    continue
                timeout = min(timeout, rec.expires_at - now + 0.01)
            try:
                pushed = await asyncio.wait_for(asyncio.shield(fut), timeout)
            except TimeoutError:
                continue
            if isinstance(pushed, Record) and pushed.tenant == rec.tenant and pushed.settled:
                return pushed
        finally:
            engine.notifier.unsubscribe(approval_id, fut)
