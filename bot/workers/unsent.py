"""A message a channel could not hand over (`contracts.reach.Unsent`): recorded, retried, or
left to the policy's escalation, else the request fails closed.

The request's own approvers may still find it in the inbox, but nobody was told: so a
failure that may pass (a 4xx reply, a timeout, a dropped connection) is retried with the
worker's backoff while the request is pending, and each attempt is an `email_failed` event
saying why and what follows. One that cannot pass (a 5xx reply), or that outlasts the
request, ends the delivery: the request then waits for its next escalation step when the
policy has one (`escalate`), and is otherwise denied as `SURFACE_UNAVAILABLE`; never approved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.approvals import Engine
from contracts.audit_events import EmailFailed, written
from contracts.enums import AuditEvent, ErrorCode
from contracts.reach import Unsent
from storage.jobs import Job
from storage.record_columns import iso
from storage.records import Record

Finish = Callable[..., Awaitable[None]]


def escalation_ahead(engine: Engine, rec: Record) -> bool:
    """True while the request's rule has an escalation step not taken yet."""
    return len(engine.policy.rule_for(rec.tenant, rec.tool_name).escalate) > len(rec.escalated)


async def unsent(engine: Engine, job: Job, rec: Record, exc: Unsent, retry_at: float, finish: Finish) -> None:
    """Record the failed attempt of `job` and retry it at `retry_at`, or end it (see above)."""
    retrying = not exc.lasting and retry_at < rec.expires_at
    ahead = not retrying and escalation_ahead(engine, rec)
    then = "retried" if retrying else ("waits for its escalation" if ahead else "denied: nobody was told")
    data = EmailFailed(
        attempt=job.attempts,
        reason=exc.reason,
        retrying=retrying,
        retryAt=iso(retry_at) if retrying else None,
        then=then,
    )
    await engine.note(rec.id, AuditEvent.EMAIL_FAILED, written(data))
    if retrying:
        await finish(job.id, exc.reason, retry_at)
        return
    if not ahead:
        message = f"the request could not be emailed to its approvers: {exc.reason}"
        await engine.closer.fail_closed(rec.id, ErrorCode.SURFACE_UNAVAILABLE, message)
    await finish(job.id, f"gave up: {exc.reason}")
