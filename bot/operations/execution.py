"""Carrying out an approved operation exactly once, and learning its outcome.

Approving an operation claims it (`pending → executing`, in the approval's one conditional
UPDATE, see `bot.approvals.lifecycle.close`) and queues one `execute` job. The job counts each
`execute` in the database before it leaves; so an attempt that finds one already sent (its
answer was lost, it timed out, or the server died meanwhile) asks `status` first, and only
`not_started` lets it send `execute` again, with the same idempotency key. The outcome is
stored once and is final, except `needs_reconciliation`: then a `reconcile` job asks
`status` with backoff until the application knows. Storing an outcome wakes the waiting
agent, and queues the callback and the card update.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bot.approvals import (
    EXECUTE_GRACE,
    Engine,
    Notifier,
    Wakeups,
    queue_callback,
    queue_card_update,
    queue_execution,
)
from bot.observability import SpanName, Tracing, outcome_type
from bot.operations.contract_client import ApplicationFailed, ContractClient
from bot.policy import Policy
from contracts.answers import Decision
from contracts.audit_events import StatusAsked, written
from contracts.enums import AuditEvent, JobKind, OperationState
from contracts.operations import (
    ExecuteCall,
    ExecuteOutcome,
    InProgress,
    NotStarted,
    OperationOutcome,
    StatusCall,
    outcome_of,
)
from storage import jobs, ledger, operations
from storage.database import Database
from storage.jobs import Job
from storage.operations import arguments_context
from storage.record_columns import iso
from storage.records import Changes, Record
from storage.sealing import SealError, TokenSeal
from storage.work import Work

log = logging.getLogger("cosigner.jobs")

STATUS_TIMEOUT = 10.0

Finish = Callable[[int], Awaitable[None]]
Retry = Callable[[Job, str], Awaitable[bool]]


def mark_sent(tx: Work, approval_id: str, now: float, job_id: int, until: float) -> Record | None:
    """Count an `execute` about to leave, and hold its job until the answer is due (so after a
    crash another attempt starts soon, and asks `status`); None unless it is executing."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or rec.operation is None or rec.operation.state is not OperationState.EXECUTING:
        return None
    jobs.relock(tx, job_id, until)
    counted, event = operations.sending(rec.operation, rec.id)
    return ledger.append(tx, rec, now, [event], Changes(operation=counted))


def claim_to_send(tx: Work, approval_id: str, now: float) -> tuple[Job, Record] | None:
    """Claim a just-approved operation's job and count its first `execute`, in one step;
    None if it was sent before (its attempt must ask `status`) or another holds the job."""
    rec = ledger.load(tx, approval_id, lock=True)
    op = rec.operation if rec is not None else None
    if rec is None or op is None or op.state is not OperationState.EXECUTING or op.sent:
        return None
    job = jobs.claim_one(tx, approval_id, JobKind.EXECUTE, now, op.execute_timeout + EXECUTE_GRACE)
    if job is None:
        return None
    counted, event = operations.sending(op, rec.id)
    return job, ledger.append(tx, rec, now, [event], Changes(operation=counted))


def settle(
    tx: Work,
    job_id: int,
    approval_id: str,
    outcome: OperationOutcome,
    event: AuditEvent,
    now: float,
    *,
    window: float,
) -> Record | None:
    """Store an outcome and finish the job that learnt it; None if an outcome is final
    already (a replay never invents another)."""
    jobs.finish(tx, job_id, now)
    rec = ledger.load(tx, approval_id, lock=True)
    op = rec.operation if rec is not None else None
    if rec is None or op is None or op.state in (OperationState.DONE, OperationState.PREPARED):
        return None
    if op.state is OperationState.RECONCILING and not outcome.final:
        return None  # still reconciling: nothing new to tell
    stored, audit = operations.settled(op, outcome, event)
    rec = ledger.append(tx, rec, now, [audit], Changes(operation=stored))
    if rec.callback_url:
        queue_callback(tx, rec.id, now, window)
    if rec.delivered is not None:
        queue_card_update(tx, rec.id, now)
    if not outcome.final:
        jobs.queue(tx, JobKind.RECONCILE, rec.id, None, now, now + window)
    ledger.notify_closed(tx, rec.id)
    return rec


def execute_again(tx: Work, approval_id: str, now: float, window: float) -> None:
    """`status` said `not_started` while reconciling: execute again, with the same key."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or rec.operation is None or rec.operation.state is not OperationState.RECONCILING:
        return
    executing = replace(rec.operation, state=OperationState.EXECUTING)
    ledger.append(tx, rec, now, [], Changes(operation=executing))
    queue_execution(tx, rec.id, now, window)


class Execution:
    """The `execute` and `reconcile` job handlers; the job worker finishes and retries jobs."""

    def __init__(
        self,
        engine: Engine,
        client: ContractClient,
        finish: Finish,
        retry: Retry,
        *,
        db: Database,
        clock: Callable[[], float],
        policy: Policy,
        seal: TokenSeal | None,
        tracing: Tracing,
        notifier: Notifier,
        wakeups: Wakeups,
    ) -> None:
        self.engine = engine
        self.client = client
        self.finish = finish
        self.retry = retry
        self.db = db
        self.clock = clock
        self.seal = seal
        self.tracing = tracing
        self.notifier = notifier
        self.wakeups = wakeups
        self._window = policy.defaults.callback_retry_window

    async def execute(self, job: Job) -> None:
        """Send `execute` once; after a lost answer, ask `status` before anything else."""
        rec = await self.engine.record(job.approval_id)
        op = rec.operation
        if op is None or op.state is not OperationState.EXECUTING:
            await self.finish(job.id)
            return
        if op.sent:
            until = self.clock() + STATUS_TIMEOUT + EXECUTE_GRACE
            await self.db.run_write(lambda tx: jobs.relock(tx, job.id, until))
            answer = await self._status(job, rec)
            if answer is None or isinstance(answer, InProgress):
                return
            if not isinstance(answer, NotStarted):
                await self._settle(job, rec.id, outcome_of(answer), AuditEvent.OUTCOME)
                return
        now = self.clock()
        until = now + op.execute_timeout + EXECUTE_GRACE
        sent = await self.db.run_write(lambda tx: mark_sent(tx, rec.id, now, job.id, until))
        if sent is None:
            await self.finish(job.id)
            return
        await self._send(job, sent)

    async def _send(self, job: Job, rec: Record) -> None:
        """POST `execute` (already counted as sent) and store the outcome it answers."""
        op = rec.operation
        assert op is not None
        if self.seal is None:
            await self.retry(job, "no COSIGNER_SECRET to open the arguments with")
            return
        try:
            opened = self.seal.open(op.sealed_arguments, arguments_context(rec.tenant, rec.id))
        except SealError as exc:
            await self.retry(job, str(exc))
            return
        call = ExecuteCall(
            operation=op.name,
            tenant=rec.tenant,
            proposalId=rec.id,
            arguments=json.loads(opened),
            preview=op.preview_model,
            argumentsDigest=op.arguments_digest,
            approvedBy=rec.decided_by.model_dump(mode="json", exclude_none=True) if rec.decided_by else {},
            approvedAt=iso(rec.decided_at or rec.created_at),
            idempotencyKey=rec.id,
            grant=body.grant if isinstance(body := self.engine.body(rec), Decision) else None,
        )
        try:
            execute = self.client.execute(op.url, op.secret_env, call, op.execute_timeout)
            final = await self.tracing.run(
                rec, SpanName.EXECUTE, execute, operation=op.name, result=outcome_type
            )
        except ApplicationFailed as exc:
            # Never sent blindly again: the next attempt asks `status` first.
            await self.retry(job, str(exc))
            return
        await self._settle(job, rec.id, outcome_of(final), AuditEvent.OUTCOME)

    async def start(self, approval_id: str, claimed: tuple[Job, Record] | None = None) -> None:
        """Execute a just-approved operation now, if its job is not taken (the worker's
        polling is the fallback, after a crash too). `claimed` is its job and record when
        the approving transaction claimed the job and counted this `execute` already."""
        if claimed is not None:
            job, rec = claimed
        else:
            now = self.clock()
            claimed = await self.db.run_write(lambda tx: claim_to_send(tx, approval_id, now))
            if claimed is None:
                self.wakeups.jobs.set()  # sent before, or taken: the worker's attempt decides
                return
            job, rec = claimed
        try:
            await self._send(job, rec)
        except Exception as exc:  # the job stays; its next attempt asks `status` first
            log.exception("operation failed", extra={"approval_id": approval_id, "job": "execute"})
            await self.retry(job, type(exc).__name__)

    async def reconcile(self, job: Job) -> None:
        """Ask `status` until the application's outcome is final (backoff between asks)."""
        rec = await self.engine.record(job.approval_id)
        op = rec.operation
        if op is None or op.state is not OperationState.RECONCILING:
            await self.finish(job.id)
            return
        answer = await self._status(job, rec)
        if answer is None:
            return
        if isinstance(answer, NotStarted):
            now = self.clock()
            await self.db.run_write(lambda tx: execute_again(tx, rec.id, now, self._window))
            await self.finish(job.id)
            self.wakeups.jobs.set()
            return
        if isinstance(answer, InProgress) or not outcome_of(answer).final:
            await self.retry(job, "still reconciling")
            return
        await self._settle(job, rec.id, outcome_of(answer), AuditEvent.RECONCILED)

    async def _status(self, job: Job, rec: Record) -> ExecuteOutcome | NotStarted | InProgress | None:
        """The application's `status` (audited); None when it failed and the job was rescheduled."""
        assert rec.operation is not None
        op = rec.operation
        call = StatusCall(operation=op.name, tenant=rec.tenant, proposalId=rec.id, idempotencyKey=rec.id)
        try:
            status = self.client.status(op.url, op.secret_env, call, STATUS_TIMEOUT)
            answer = await self.tracing.run(
                rec, SpanName.STATUS, status, operation=op.name, result=outcome_type
            )
        except ApplicationFailed as exc:
            await self.retry(job, str(exc))
            return None
        await self.engine.note(rec.id, AuditEvent.STATUS_ASKED, written(StatusAsked(answer=answer.outcome)))
        if isinstance(answer, InProgress):
            await self.retry(job, "in progress")
        return answer

    async def _settle(self, job: Job, approval_id: str, outcome: OperationOutcome, event: AuditEvent) -> None:
        now = self.clock()
        db = self.db
        with self.notifier.closing(approval_id):  # its own NOTIFY wakes no waiter here
            rec = await db.run_write(
                lambda tx: settle(tx, job.id, approval_id, outcome, event, now, window=self._window)
            )
            if rec is not None:
                self.notifier.publish(rec.id, rec)
                if rec.callback_url or rec.delivered is not None or not outcome.final:
                    self.wakeups.jobs.set()  # only when it queued work: a wake-up costs a claim
