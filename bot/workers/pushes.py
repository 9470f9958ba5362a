"""The `push` job: a pending request told to its approvers' subscribed browsers (Web Push).

Queued with the request when Web Push is on (`bot.approvals.intake`); a request closed by
then is pushed to nobody. What the push services said goes on the audit record, naming each
push service by its origin only (an endpoint is a capability URL): `push_sent` when any
browser took it, `push_failed` otherwise. A failure that may pass (429, 5xx, no answer) is
retried with the worker's backoff while the request is pending; a retry sends to every
browser again, and the copies replace each other (the message's `Topic`, the notification's
`tag`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from bot.approvals import Engine
from contracts.audit_events import PushFailed, PushSent, written
from contracts.enums import AuditEvent
from contracts.ports import SurfaceAdapter
from contracts.reach import Channel, Pushed, PushSurface
from storage.jobs import Job
from storage.records import Record

Finish = Callable[..., Awaitable[None]]
Retry = Callable[[Job, str], Awaitable[bool]]


def waiting_for(rec: Record) -> tuple[str, ...]:
    """Everyone the request now waits for: its route's approvers and each escalation's."""
    routes = [rec.route, *(e.route for e in rec.escalated)]
    return tuple(dict.fromkeys(a for r in routes if r is not None for a in r.approvers))


def _origin(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def summary(pushed: Pushed, retrying: bool | None = None) -> PushSent | PushFailed:
    """The audit record: counts, and each failure by push service (`retrying`: as the push
    said, unless given)."""
    event = PushSent if pushed.sent else PushFailed
    return event(
        sent=len(pushed.sent),
        gone=len(pushed.gone),
        failed={_origin(e): why for e, why in pushed.failed.items()},
        retrying=pushed.retry if retrying is None else retrying,
    )


async def push_job(
    engine: Engine, surfaces: Mapping[str, SurfaceAdapter], job: Job, finish: Finish, retry: Retry
) -> None:
    """Push the request of `job`, record what the push services said, retry what may pass."""
    adapter = surfaces.get(Channel.PUSH.value)
    rec = await engine.found(job.approval_id)
    if rec is None or rec.closed or rec.route is None or not isinstance(adapter, PushSurface):
        await finish(job.id)
        return
    pushed = await adapter.push(rec.card(), waiting_for(rec))
    if pushed.sent or pushed.gone or pushed.failed:
        event = AuditEvent.PUSH_SENT if pushed.sent else AuditEvent.PUSH_FAILED
        await engine.note(rec.id, event, written(summary(pushed)))
    if pushed.retry:
        await retry(job, "; ".join(sorted(set(pushed.failed.values())))[:500])
        return
    await finish(job.id)


async def push_escalated(
    engine: Engine, surfaces: Mapping[str, SurfaceAdapter], rec: Record, approvers: tuple[str, ...]
) -> None:
    """Push a request escalated to `approvers` (once, when the step is taken); what the push
    services said is recorded, and nothing is retried: the step's own delivery is."""
    adapter = surfaces.get(Channel.PUSH.value)
    if rec.closed or not approvers or not isinstance(adapter, PushSurface):
        return
    try:
        pushed = await adapter.push(rec.card(), approvers)
    except Exception as exc:  # a push must never stop the escalation it goes with
        await engine.note(rec.id, AuditEvent.PUSH_FAILED, written(PushFailed(error=type(exc).__name__)))
        return
    if pushed.sent or pushed.gone or pushed.failed:
        event = AuditEvent.PUSH_SENT if pushed.sent else AuditEvent.PUSH_FAILED
        await engine.note(rec.id, event, written(summary(pushed, retrying=False)))
