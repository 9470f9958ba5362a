"""Background work: the job outbox (deliveries, card updates, callbacks, operations) and the expiry sweep.

Jobs are rows written in the same transaction as the change that needs them, so none is
lost across a crash or restart. A worker claims due rows by moving `locked_until` forward
(with `FOR UPDATE SKIP LOCKED` on PostgreSQL), so each attempt runs on one replica only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from bot.approvals import Engine, Wakeups, callback_secret
from bot.egress import Egress, EgressFailed, EgressRefused
from bot.handoffs import Handoffs
from bot.observability import Metrics, SpanName, Tracing, delivery_outcome, http_outcome
from bot.operations import ContractClient, Execution, Finish, Retry
from bot.workers.batch_cards import BatchCards
from bot.workers.follow_ups import FollowUps
from bot.workers.notices import notify_job
from bot.workers.pushes import push_job
from bot.workers.unsent import unsent
from contracts.audit_events import CallbackAbandoned, CallbackAttempt, CallbackRefused, written
from contracts.enums import ApprovalStatus, AuditEvent, ErrorCode, JobKind
from contracts.errors import CosignerError, SurfaceUnavailable
from contracts.ports import SurfaceAdapter
from contracts.reach import Unsent, carrier
from storage import jobs
from storage.database import Database
from storage.jobs import Job

log = logging.getLogger("cosigner.jobs")

LOCK_SECONDS = 60.0
BATCH = 50


def backoff(attempt: int) -> float:
    """Seconds before retry `attempt` (1, 2, 4 … capped at ten minutes)."""
    return float(min(2 ** max(attempt - 1, 0), 600))


class JobWorker:
    """Claims due jobs and runs them: deliver a card, update it, or POST a callback."""

    def __init__(
        self,
        engine: Engine,
        surfaces: Mapping[str, SurfaceAdapter],
        http: Egress,
        secret: str,
        contracts: ContractClient,
        *,
        db: Database,
        clock: Callable[[], float],
        metrics: Metrics,
        tracing: Tracing,
        wakeups: Wakeups,
        handoffs: Handoffs,
        execution: Callable[[Finish, Retry], Execution],
    ) -> None:
        """`execution` builds the operations' job handlers around this worker's finish and
        retry."""
        self.engine = engine
        self.surfaces = surfaces
        self.http = http
        self.secret = secret
        self.db = db
        self.clock = clock
        self.metrics = metrics
        self.tracing = tracing
        self.wakeups = wakeups
        self.handoffs = handoffs
        self.execution = execution(self._finish, self._retry)
        self.follow_ups = FollowUps(engine, surfaces, self._finish, db=db, clock=clock, wakeups=wakeups)
        self.batches = BatchCards(surfaces, db=db, clock=clock)
        self.executing: set[asyncio.Task[None]] = set()

    async def execute_approved(self, stop: asyncio.Event) -> None:
        """Send each operation the engine approved (`Engine.approved`) at once, each in its
        own task, until `stop` is set; a job left unsent is the poll's, after its hold ends."""
        while not stop.is_set():
            approval_id, claimed = await self.engine.approved()
            task = asyncio.create_task(self.execution.start(approval_id, claimed))
            self.executing.add(task)
            task.add_done_callback(self.executing.discard)

    async def run(self, stop: asyncio.Event, poll: float = 1.0) -> None:
        """Work until `stop` is set; sleep until woken or `poll` seconds pass."""
        while not stop.is_set():
            try:
                done = await self.run_once()
            except Exception:
                log.exception("job batch failed; retrying")
                done = 0
            if done == 0:
                self.wakeups.jobs.clear()
                try:
                    await asyncio.wait_for(self.wakeups.jobs.wait(), poll)
                except TimeoutError:
                    pass

    async def run_once(self) -> int:
        """Claim and run one batch of due jobs; return how many ran."""
        claimed = await self._claim()
        if claimed:
            await asyncio.gather(*(self._run(job) for job in claimed))
        return len(claimed)

    async def _claim(self) -> list[Job]:
        now = self.clock()
        return await self.db.run_write(lambda tx: jobs.claim(tx, now, LOCK_SECONDS, BATCH))

    async def _finish(self, job_id: int, error: str | None = None, retry_at: float | None = None) -> None:
        now = self.clock()
        if retry_at is None:
            await self.db.run_write(lambda tx: jobs.finish(tx, job_id, now, error))
        else:
            await self.db.run_write(lambda tx: jobs.reschedule(tx, job_id, retry_at, error or ""))

    async def _run(self, job: Job) -> None:
        kind = job.kind
        handlers: dict[JobKind, Callable[[Job], Awaitable[None]]] = {
            JobKind.DELIVER: self._deliver,
            JobKind.SHOW: self._show,
            JobKind.CALLBACK: self._callback,
            JobKind.EXECUTE: self.execution.execute,
            JobKind.RECONCILE: self.execution.reconcile,
            JobKind.VERIFY: self._verify,
            JobKind.REMIND: self.follow_ups.remind,
            JobKind.ESCALATE: self.follow_ups.escalate,
            JobKind.RETEXT: self.follow_ups.retext,
            JobKind.PUSH: lambda job: push_job(self.engine, self.surfaces, job, self._finish, self._retry),
            JobKind.NOTIFY: lambda job: notify_job(
                self.engine, self.surfaces, job, self._finish, self._retry
            ),
        }
        try:
            await handlers[kind](job)
            self.metrics.jobs.labels(kind.value, "ran").inc()
        except Exception as exc:  # a job must never take the worker down
            log.exception("job failed", extra={"approval_id": job.approval_id, "job": kind})
            await self._retry(job, f"{type(exc).__name__}")

    async def _retry(self, job: Job, error: str) -> bool:
        """Schedule another attempt; False when the job's deadline has passed."""
        retry_at = self.clock() + backoff(job.attempts)
        if retry_at > job.deadline_at:
            await self._finish(job.id, f"gave up: {error}")
            self.metrics.jobs.labels(job.kind.value, "abandoned").inc()
            return False
        await self._finish(job.id, error, retry_at)
        self.metrics.jobs.labels(job.kind.value, "retried").inc()
        return True

    async def _deliver(self, job: Job) -> None:
        # The record, not just its card: its stored trace is the delivery span's parent.
        rec = await self.engine.found(job.approval_id)
        placed = rec.placed() if rec is not None else None
        if rec is None or placed is None or placed.card.status.value != "pending":
            await self._finish(job.id)
            return
        adapter = self.surfaces.get(carrier(placed.route))
        if adapter is None:
            await self.engine.closer.fail_closed(
                job.approval_id, ErrorCode.SURFACE_UNAVAILABLE, f"{placed.route.surface} is not configured"
            )
            await self._finish(job.id, "surface not configured")
            return
        try:
            delivery = adapter.deliver(self.engine.card_of(rec), placed.route)
            receipt = await self.tracing.run(
                rec, SpanName.DELIVER, delivery, surface=adapter.name, result=delivery_outcome
            )
        except SurfaceUnavailable as exc:
            await self.engine.closer.fail_closed(job.approval_id, ErrorCode.SURFACE_UNAVAILABLE, exc.message)
            await self._finish(job.id, exc.message)
            return
        except Unsent as exc:
            await unsent(self.engine, job, rec, exc, self.clock() + backoff(job.attempts), self._finish)
            return
        except Exception as exc:
            if not await self._retry(job, type(exc).__name__):
                await self.engine.closer.fail_closed(
                    job.approval_id, ErrorCode.SURFACE_UNAVAILABLE, "the card could not be delivered in time"
                )
            return
        await self.engine.delivered(job.approval_id, receipt)
        await self._finish(job.id)
        await self.batches.refresh(job.approval_id)  # offered with the others waiting beside it

    async def _show(self, job: Job) -> None:
        rec = await self.engine.found(job.approval_id)  # with its trace, the span's parent
        placed = rec.placed() if rec is not None else None
        escalated = placed is not None and bool(placed.card.escalations)
        if rec is None or placed is None or (placed.delivered is None and not escalated):
            await self._finish(job.id)
            return
        adapter = self.surfaces.get(carrier(placed.route))
        if adapter is None and not escalated:
            await self._finish(job.id, "surface not configured")
            return
        try:
            if adapter is not None and placed.delivered is not None:
                showing = adapter.show_outcome(placed.card, placed.route, placed.delivered)
                await self.tracing.run(rec, SpanName.SHOW, showing, surface=adapter.name)
                if placed.card.quorum > 1 and placed.card.status is ApprovalStatus.PENDING:
                    # A quorum's progress. If the approval closed while it was being shown,
                    # this update may have landed after the closing one: show the closed card again.
                    now = await self.engine.placed(job.approval_id)
                    if (
                        now is not None
                        and now.delivered is not None
                        and now.card.status is not ApprovalStatus.PENDING
                    ):
                        await adapter.show_outcome(now.card, now.route, now.delivered)
            if escalated:
                await self.follow_ups.show_outcomes(job.approval_id)
        except Exception as exc:
            await self._retry(job, type(exc).__name__)
            return
        await self._finish(job.id)
        await self.batches.refresh(job.approval_id)  # no longer waiting: its batch card lists the rest

    async def _verify(self, job: Job) -> None:
        # One attempt: a check that fails closes the handoff failed, it is not retried.
        await self.handoffs.verify(self.engine, self.http, job)
        await self._finish(job.id)

    async def _callback(self, job: Job) -> None:
        rec = await self.engine.record(job.approval_id)
        delivery = job.delivery
        if rec.callback_url is None or delivery is None:
            await self._finish(job.id, None if delivery is not None else "no delivery id")
            return
        body = self.engine.body(rec).model_dump_json().encode()
        status: int | None = None
        error: str | None = None
        try:
            post = self.http.post_signed(
                rec.callback_url,
                body,
                secret=callback_secret(self.secret, rec.tenant),
                delivery=delivery,
                at=self.clock(),
                user_agent="cosigner-callback/1",
            )
            response = await self.tracing.run(
                rec, SpanName.CALLBACK, post, attempt=job.attempts, result=http_outcome
            )
            status = response.status_code
        except EgressRefused as exc:
            await self._refuse(job, rec.id, delivery, str(exc))
            return
        except EgressFailed as exc:
            error = exc.reason
        ok = status is not None and 200 <= status < 300
        attempt = CallbackAttempt(
            delivery=delivery, attempt=job.attempts, status=status, error=error, delivered=ok
        )
        await self.engine.note(rec.id, AuditEvent.CALLBACK_ATTEMPT, written(attempt))
        if ok:
            await self._finish(job.id)
            return
        if not await self._retry(job, error or f"HTTP {status}"):
            abandoned = CallbackAbandoned(delivery=delivery, attempts=job.attempts)
            await self.engine.note(rec.id, AuditEvent.CALLBACK_ABANDONED, written(abandoned))

    async def _refuse(self, job: Job, approval_id: str, delivery: str, reason: str) -> None:
        # A refusal is the operator's rule, not a passing failure: retrying would only ask
        # the tenant's DNS again until it answers something else. So the job ends here.
        log.warning("callback refused", extra={"approval_id": approval_id, "job": "callback"})
        refused = CallbackRefused(delivery=delivery, attempt=job.attempts, reason=reason)
        await self.engine.note(approval_id, AuditEvent.CALLBACK_REFUSED, written(refused))
        await self._finish(job.id, "refused by the egress rules")
        self.metrics.jobs.labels(JobKind.CALLBACK.value, "refused").inc()


class ExpirySweeper:
    """Expires pending approvals at their time, and at start those that expired while down."""

    def __init__(
        self, engine: Engine, *, clock: Callable[[], float], wakeups: Wakeups, max_sleep: float = 1.0
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.wakeups = wakeups
        self.max_sleep = max_sleep

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep until `stop` is set."""
        while not stop.is_set():
            delay = self.max_sleep
            try:
                await self.engine.closer.expire_due()
                nxt = await self.engine.closer.next_expiry()
                if nxt is not None:
                    delay = min(max(nxt - self.clock(), 0.0), self.max_sleep)
            except CosignerError:
                pass
            except Exception:
                log.exception("expiry sweep failed; retrying")
            self.wakeups.expiry.clear()
            try:
                await asyncio.wait_for(self.wakeups.expiry.wait(), delay)
            except TimeoutError:
                pass
