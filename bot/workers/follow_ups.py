"""Reminders and escalations, run by the job worker when their jobs fall due.

The intake queued one job per follow-up with the request (`bot.policy.follow_up_plan`), due at its
time; the outbox gives each to one worker on one replica, and a job done is never run
again, across restarts. A job that finds the request closed does nothing.

- `remind`: once, where the request was asked, to the approvers still to answer (Slack: a
  thread reply under the card mentioning them; SMS: a text to each). A surface with no way
  to reach a person (the dashboard: the tenant's own app) gets the audit event only.
- `escalate`: the step is recorded first (`storage.follow_ups.escalate`, once per step),
  then the card is delivered on the step's route and its receipt stored, which is what lets
  that route's approvers answer there; the original card then says so.
- `show_outcomes`: when the request closes, each escalated card is closed in place too.
- `retext`: after an edit under a quorum (`lifecycle.revise` queues it), the edited call is
  texted to every number that was texted an earlier version (SMS and WhatsApp texts cannot
  change in place), once per number and version; their answers then count for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from bot.approvals import Engine, Wakeups
from bot.oncall import Asked
from bot.policy.oncall_refs import parse_oncall
from bot.workers.pushes import push_escalated
from contracts.audit_events import (
    EditTexted,
    Escalated,
    EscalationDelivered,
    EscalationFailed,
    OnCallNote,
    Reminded,
    written,
)
from contracts.enums import ApprovalStatus, AuditEvent, JobKind
from contracts.errors import CosignerError, SurfaceUnavailable
from contracts.ports import (
    Delivered,
    FollowUpSurface,
    RetextSurface,
    Route,
    SmsRoute,
    SurfaceAdapter,
)
from contracts.reach import Unsent, carrier, delivered_by_worker
from storage import follow_ups as follow_up_store
from storage import jobs
from storage.audit import Event
from storage.database import Database
from storage.jobs import EscalationStep, Job, Version
from storage.record_columns import Escalation, route_fields
from storage.records import Record

log = logging.getLogger("cosigner.follow_ups")

SYSTEM = {"kind": "system"}
SHOW_WINDOW = 3600.0
NOT_DELIVERED_RETRY = 5.0  # seconds before a reminder looks again for its card
Finish = Callable[..., Awaitable[None]]


def still_to_answer(rec: Record) -> tuple[str, ...]:
    """The approvers of the request's own route who have not answered: all of them while
    one answer decides; under a quorum, those whose Approve is not counted yet."""
    if rec.route is None:
        return ()
    counted = {v.by for v in rec.votes}
    return tuple(a for a in rec.route.approvers if a not in counted)


class FollowUps:
    """The worker's handlers of `remind` and `escalate` jobs, and the escalated cards' closing."""

    def __init__(
        self,
        engine: Engine,
        surfaces: Mapping[str, SurfaceAdapter],
        finish: Finish,
        *,
        db: Database,
        clock: Callable[[], float],
        wakeups: Wakeups,
    ) -> None:
        self.engine = engine
        self.surfaces = surfaces
        self._finish = finish
        self.db = db
        self.clock = clock
        self.wakeups = wakeups

    async def remind(self, job: Job) -> None:
        """Send the one reminder, if the request is still pending; then put it on the chain."""
        rec = await self.engine.record(job.approval_id)
        state = rec.follow_ups
        if rec.closed or rec.route is None or (state is not None and state.reminded_at is not None):
            await self._finish(job.id)
            return
        who = still_to_answer(rec)
        adapter = self.surfaces.get(carrier(rec.route))
        sent, why = False, None
        if isinstance(adapter, FollowUpSurface) and rec.delivered is None:
            # The card is still on its way (its delivery is being retried, or its receipt not
            # stored yet): remind once it is there, until the request closes.
            await self._finish(job.id, "not delivered yet", self.clock() + NOT_DELIVERED_RETRY)
            return
        if not isinstance(adapter, FollowUpSurface):
            why = f"{rec.route.surface.value} has no way to reach the approvers; this record is the reminder"
        else:
            try:
                await adapter.remind(rec.card(), rec.route, rec.delivered, who)
                sent = True
            except SurfaceUnavailable as exc:
                why = exc.message
        data = Reminded(surface=rec.route.surface.value, approvers=list(who), sent=sent, why=why)
        event = Event(AuditEvent.REMINDED, SYSTEM, written(data))
        await self.db.run_write(lambda tx: follow_up_store.remind(tx, rec.id, self.clock, event))
        await self._finish(job.id)

    async def escalate(self, job: Job) -> None:
        """Record the step, deliver the request on its route, store the receipt."""
        if not isinstance(job.payload, EscalationStep):
            await self._finish(job.id, "no escalation step")
            return
        step, to, route = job.payload.step, job.payload.to, job.payload.route
        oncall: OnCallNote | None = None
        if job.payload.oncall is not None:
            # Whoever is on call now (the rotation may have moved since the request came);
            # nobody reachable: the step's own route, the tenant's admins.
            rec = await self.engine.record(job.approval_id)
            found = await self.engine.on_call(rec.tenant, [parse_oncall(job.payload.oncall)])
            route = found.route if isinstance(found, Asked) else route
            oncall = found.audit()

        def event(e: Escalation) -> Event:
            taken = Escalated(step=e.step, to=e.to.value, route=route_fields(e.route))
            if oncall is not None:
                taken = taken.model_copy(update={"oncall": oncall})
            return Event(AuditEvent.ESCALATED, SYSTEM, written(taken))

        sending = _sending(route)
        taken = await self.db.run_write(
            lambda tx: follow_up_store.escalate(
                tx, job.approval_id, step, to, route, self.clock, event, sending
            )
        )
        if taken is not None and job.attempts == 1:
            await push_escalated(self.engine, self.surfaces, taken.record, route.approvers)
        if taken is None or not delivered_by_worker(route):
            # Closed (nothing to do), or the dashboard: the tenant's app lists it for its approvers.
            await self._finish(job.id)
            return
        if taken.step.delivered is not None and taken.step.delivered.message_refs:
            await self._finish(job.id)  # delivered before; this attempt repeated the job
            return
        adapter = self.surfaces.get(carrier(route))
        if adapter is None:
            await self._failed(job, taken.record, step, f"{carrier(route)} is not configured")
            return
        # Always deny belongs to the request's one approver (`bot.approvals.denials`): not offered here.
        card = replace(taken.record.card(), offers_always_deny=False)
        try:
            delivered = await adapter.deliver(card, route)
        except SurfaceUnavailable as exc:
            # The request stays pending with its own approvers: a step that cannot be
            # delivered takes nothing away from them.
            await self._failed(job, taken.record, step, exc.message)
            return
        except Unsent as exc:
            retry_at = self.clock() + min(2.0 ** max(job.attempts - 1, 0), 600.0)
            if exc.lasting or retry_at >= taken.record.expires_at:
                await self._failed(job, taken.record, step, exc.reason)
                return
            # The step is recorded once; the job runs again and delivers it (`follow_up_store.escalate`).
            data = EscalationFailed(step=step, why=exc.reason, retrying=True)
            await self.engine.note(job.approval_id, AuditEvent.ESCALATION_FAILED, written(data))
            await self._finish(job.id, exc.reason, retry_at)
            return
        where = EscalationDelivered(
            step=step,
            surface=delivered.surface.value,
            conversation=delivered.conversation,
            messages=list(delivered.message_refs),
        )
        shown = Event(AuditEvent.ESCALATION_DELIVERED, SYSTEM, written(where))
        closed = await self.db.run_write(
            lambda tx: follow_up_store.receipt(tx, job.approval_id, step, delivered, self.clock, shown)
        )
        if closed:
            self.wakeups.jobs.set()
        else:
            await self._show_escalated(taken.record.id)
        await self._finish(job.id)

    async def retext(self, job: Job) -> None:
        """Text an edited call to every number that was texted an earlier version of the
        request (SMS, WhatsApp; its own route and each escalation step's), once per number
        and version, so they can answer it; then record who was texted on the chain. A
        request closed or edited again since texts nothing (the later edit queued its own)."""
        if not isinstance(job.payload, Version):
            await self._finish(job.id, "no version")
            return
        rec = await self.engine.record(job.approval_id)
        if rec.closed or rec.call_digest != job.payload.digest:
            await self._finish(job.id)
            return
        card = rec.card()
        steps = [(rec.route, rec.delivered, card)]
        # Always deny belongs to the request's one approver (see `escalate`).
        escalated = replace(card, offers_always_deny=False)
        steps += [(e.route, e.delivered, escalated) for e in rec.escalated]
        texted: list[str] = []
        in_flight: list[str] = []
        problems: list[str] = []
        for route, delivered, shown in steps:
            adapter = self.surfaces.get(route.surface) if route is not None else None
            if route is None or delivered is None or not isinstance(adapter, RetextSurface):
                continue
            try:
                done = await adapter.retext(shown, route, delivered)
            except SurfaceUnavailable as exc:
                problems.append(exc.message)
                continue
            texted += done.texted
            in_flight += done.in_flight
            problems += done.problems
        if texted or (problems and not in_flight):
            data = EditTexted(digest=job.payload.digest, texted=texted, problems=problems)
            await self.engine.note(rec.id, AuditEvent.EDIT_TEXTED, written(data))
        if in_flight:
            # A number's first text is still being sent (an escalation running now): text
            # the edited call after it, not before.
            await self._finish(job.id, "a first text is still on its way", self.clock() + NOT_DELIVERED_RETRY)
            return
        await self._finish(job.id)

    async def _failed(self, job: Job, rec: Record, step: int, why: str) -> None:
        log.warning("escalation not delivered", extra={"approval_id": rec.id, "job": "escalate"})
        failed = EscalationFailed(step=step, why=why)
        await self.engine.note(rec.id, AuditEvent.ESCALATION_FAILED, written(failed))
        await self._finish(job.id, why)

    async def _show_escalated(self, approval_id: str) -> None:
        """Say on the original card that the request was escalated; if it closed meanwhile,
        close the card again (the update may have overtaken the closing one)."""
        rec = await self.engine.record(approval_id)
        if rec.route is None or rec.delivered is None:
            return
        adapter = self.surfaces.get(rec.route.surface)
        if not isinstance(adapter, FollowUpSurface):
            return
        try:
            await adapter.show_escalated(rec.card(), rec.route, rec.delivered)
        except CosignerError as exc:
            log.warning("card not updated: %s", exc.message, extra={"approval_id": rec.id})
            return
        after = await self.engine.record(approval_id)
        if after.closed:
            now = self.clock()
            await self.db.run_write(
                lambda tx: jobs.queue(tx, JobKind.SHOW, approval_id, None, now, now + SHOW_WINDOW)
            )
            self.wakeups.jobs.set()

    async def show_outcomes(self, approval_id: str) -> None:
        """Close each escalated card in place (or text the outcome) once the request closed;
        while it is pending, show each escalated card as it stands now (a quorum's progress,
        or the call an approver edited, with buttons that answer that call only)."""
        rec = await self.engine.record(approval_id)
        card = rec.card()
        pending = rec.status is ApprovalStatus.PENDING
        for e in rec.escalated:
            adapter = self.surfaces.get(e.route.surface)
            if adapter is None or e.delivered is None:
                continue
            if not pending:
                await adapter.show_outcome(card, e.route, e.delivered)
            elif isinstance(adapter, FollowUpSurface):
                await adapter.show_escalated(card, e.route, e.delivered)
        if pending and rec.escalated and (await self.engine.record(approval_id)).closed:
            await self.show_outcomes(approval_id)  # it closed meanwhile: close the cards again


def _sending(route: Route) -> Delivered | None:
    """SMS: where answers will come from, stored before any text leaves (a reply may be fast)."""
    if isinstance(route, SmsRoute):
        return Delivered(
            surface=route.surface, conversation=route.from_number or route.messaging_service_sid or ""
        )
    return None
