"""The `notify` job: a pending request's notice emailed to the tenant's `admins.email`.

Queued with the request when its tool's rule has `notify = ["email"]` (`bot.approvals.intake`).
The request is asked where its route says; the notice tells the addresses that it waits
and where an answer counts (`surfaces.email.notice`). It is never an approval path: it
changes nobody's right to answer. Addresses the route's own delivery emails already are
left out, so nobody gets the request twice. What the SMTP server said is on the audit
record (`email_sent` with kind `notice`, or `email_failed`); a failure that may pass is
retried with the worker's backoff while the request is pending, and a lasting one is
recorded and ends the notice, never the request: it is still asked where its route says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from bot.approvals import Engine
from contracts.audit_events import EmailFailed, written
from contracts.enums import AuditEvent, SurfaceType
from contracts.ports import DashboardRoute, Route, SurfaceAdapter
from contracts.reach import Channel, NoticeSurface, Unsent
from storage.jobs import Job

Finish = Callable[..., Awaitable[None]]
Retry = Callable[[Job, str], Awaitable[bool]]


def to_notify(route: Route, addresses: tuple[str, ...]) -> tuple[str, ...]:
    """The addresses a notice goes to: the tenant's, less those the route emails already."""
    emailed = route.email if isinstance(route, DashboardRoute) else ()
    return tuple(a for a in addresses if a not in emailed)


async def notify_job(
    engine: Engine, surfaces: Mapping[str, SurfaceAdapter], job: Job, finish: Finish, retry: Retry
) -> None:
    """Email the notice of `job`'s request, record what the server said, retry what may pass."""
    rec = await engine.found(job.approval_id)
    if rec is None or rec.closed or rec.route is None:
        await finish(job.id)
        return
    adapter = surfaces.get(Channel.EMAIL.value)
    if not isinstance(adapter, NoticeSurface):
        await finish(job.id, "email is not configured on this server")  # serve refuses this policy
        return
    to = to_notify(rec.route, engine.policy.tenant(rec.tenant).admins.email)
    if not to:
        await finish(job.id)
        return
    try:
        await adapter.notice(rec.card(), SurfaceType(rec.route.surface), to)
    except Unsent as exc:
        retrying = not exc.lasting and await retry(job, exc.reason)
        then = "retried" if retrying else "not sent: the request is still asked where its route says"
        data = EmailFailed(
            email="notice", attempt=job.attempts, reason=exc.reason, retrying=retrying, then=then
        )
        await engine.note(rec.id, AuditEvent.EMAIL_FAILED, written(data))
        if not retrying and exc.lasting:
            await finish(job.id, f"gave up: {exc.reason}")
        return
    await finish(job.id)
