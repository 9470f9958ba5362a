"""A handoff's life after it is created: Done is claimed once, then checked against `expect`.

Pressing Done proves nothing by itself. `press_done` makes the same checks as an approval's
answer (tenant, conversation, message, approver) and then claims the handoff in one
transaction: the first Done records who pressed it and queues one `verify` job; any later
Done is refused while that check runs. The job (`verify`) POSTs the call, with its
unredacted parameters, to the application's `expect` URL, signed like callbacks and sent
through the same checked egress, and closes the handoff `completed` (with a receipt) or
`failed` (with the application's detail, or "could not be verified" when it did not answer).
Cancel and expiry close a handoff through the ordinary transition of `bot.approvals.lifecycle`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.approvals import Closing, Wakeups, actor_of, closed_error, new_id, refused, stored
from bot.egress import Egress, EgressFailed, EgressRefused
from bot.observability import SpanName, Tracing, expect_outcome
from bot.policy import redact
from contracts.answers import PersonDecider, decider_from_json
from contracts.audit_events import HandoffCheck, HandoffDone, written
from contracts.enums import ApprovalStatus, AuditEvent, JobKind, SurfaceType
from contracts.errors import AlreadyDecided, ApprovalNotFound, CosignerError
from contracts.handoff import DETAIL_MAX, UNVERIFIED, ExpectAnswer, ExpectCall, HandoffReceipt, HandoffState
from contracts.ports import ApprovalCard
from contracts.wire import ApprovalRequest
from storage import inbound, jobs, ledger
from storage.audit import Event
from storage.database import Database
from storage.jobs import Delivery, Job
from storage.record_columns import ts
from storage.records import Changes, Record
from storage.sealing import TokenSeal
from storage.work import Work

if TYPE_CHECKING:
    from bot.approvals import Engine

log = logging.getLogger("cosigner.handoff")

CHECK_WINDOW = 90.0
"""Seconds a pressed Done holds the handoff open for its check (longer than a job's lock)."""
CHECK_TIMEOUT = 10.0
"""Seconds the `expect` endpoint has to answer."""
DONE_WAIT = 30
"""Seconds the dashboard's Done waits for the check before answering with the pending handoff."""

Check = Callable[[Record], None]


def sealed_context(tenant: str, execution_id: str, tool_call_id: str) -> str:
    """What the sealed parameters are bound to: they open for this call only."""
    return f"handoff parameters|{tenant}|{execution_id}|{tool_call_id}"


@dataclass(frozen=True)
class Claimed:
    """What the Done step did: the record, a refusal to raise, or that the handoff is past its time."""

    record: Record | None
    refusal: CosignerError | None = None
    late: bool = False


def claim(
    tx: Work,
    approval_id: str,
    decider: PersonDecider,
    check: Check,
    now: float,
    *,
    tenant: str | None,
    message: tuple[SurfaceType, str] | None,
) -> Claimed:
    """The Done step, in one write transaction: the first valid Done claims the check."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or (tenant is not None and rec.tenant != tenant):
        raise ApprovalNotFound(f"no approval {approval_id} for this caller")
    if not rec.closed and rec.expires_at <= now:
        return Claimed(rec, late=True)  # the ordinary transition expires it and refuses the Done
    if message is not None and not inbound.record(tx, *message, now):
        return Claimed(rec)  # this text was handled before
    try:
        check(rec)
        if rec.closed:
            raise closed_error(rec)
        if rec.handoff is None:
            raise AlreadyDecided(f"approval {rec.id} is not a handoff")
        if rec.handoff.done_by is not None:
            raise AlreadyDecided(
                f"Done was already pressed for {rec.id}; the application is being asked whether "
                "the step really happened",
                status=rec.status.value,
            )
    except CosignerError as exc:
        event = refused(decider, exc, ApprovalStatus.COMPLETED)
        return Claimed(ledger.append(tx, rec, now, [event]), exc)
    assert rec.handoff is not None
    delivery = new_id("dlv")
    state = rec.handoff.model_copy(update={"done_by": stored(decider), "done_at": now, "delivery": delivery})
    changes = Changes(handoff=state, expires_at=max(rec.expires_at, now + CHECK_WINDOW))
    event = Event(AuditEvent.HANDOFF_DONE, actor_of(decider), written(HandoffDone(delivery=delivery)))
    rec = ledger.append(tx, rec, now, [event], changes, only_pending=True)
    jobs.queue(tx, JobKind.VERIFY, rec.id, Delivery(delivery), now, now + CHECK_WINDOW)
    return Claimed(rec)


class Handoffs:
    """The handoff request kind as the engine is given it: a new handoff's parameters sealed
    (its state is `bot.approvals.prepare`'s), Done pressed, and the `verify` job that checks it.

    The engine passes itself to `press_done` and `verify` for what changes an approval
    (`close`, `record`, `note`); everything else is given here at construction."""

    done_wait: float = DONE_WAIT

    def __init__(
        self,
        seal: TokenSeal | None,
        *,
        db: Database,
        clock: Callable[[], float],
        tracing: Tracing,
        wakeups: Wakeups,
    ) -> None:
        self.seal = seal
        self.db = db
        self.clock = clock
        self.tracing = tracing
        self.wakeups = wakeups

    def sealed(self, tenant: str, req: ApprovalRequest) -> str | None:
        """A new handoff's parameters sealed for its check, bound to this call (None: no seal
        on this server, so no handoffs); `bot.approvals.prepare` builds its state."""
        if self.seal is None:
            return None
        context = sealed_context(tenant, req.executionId, req.toolCallId)
        return self.seal.seal(json.dumps(req.parameters, separators=(",", ":")), context)

    async def press_done(
        self,
        engine: Engine,
        approval_id: str,
        decider: PersonDecider,
        check: Check,
        *,
        tenant: str | None = None,
        message: tuple[SurfaceType, str] | None = None,
    ) -> ApprovalCard:
        """Claim a handoff's check for the person who pressed Done (on the dashboard, or on a
        surface whose `message` carried it); refusals are audited, then raised."""
        claimed = await self.db.run_write(
            lambda tx: claim(tx, approval_id, decider, check, self.clock(), tenant=tenant, message=message)
        )
        if claimed.late:
            # A Done after the time is up never counts: the one transition expires the handoff
            # now and refuses this answer with APPROVAL_EXPIRED.
            # It closes as failed, never completed, should it not be late after all (then it
            # is refused: its time is not up, as the closing's own instant says).
            closing = Closing(
                ApprovalStatus.FAILED,
                decider,
                tenant=tenant,
                check=check,
                audit_refusal=True,
                inbound=message,
                not_due=AlreadyDecided(f"Done was already pressed for {approval_id}; it is being checked"),
            )
            return (await engine.close(approval_id, closing)).card()
        if claimed.refusal is not None:
            raise claimed.refusal
        self.wakeups.jobs.set()
        assert claimed.record is not None
        return claimed.record.card()

    async def verify(self, engine: Engine, http: Egress, job: Job) -> None:
        """The `verify` job: ask `expect` once and close the handoff completed or failed."""
        rec = await engine.record(job.approval_id)
        state = rec.handoff
        delivery = job.delivery
        if rec.closed or state is None or delivery is None or state.delivery != delivery:
            return
        asking = self._ask(http, rec, state, delivery)
        checked = await self.tracing.run(rec, SpanName.EXPECT, asking, result=expect_outcome)
        outcome, detail, receipt, note = checked
        await engine.note(rec.id, AuditEvent.HANDOFF_CHECK, written(note))
        decided_by = decider_from_json(state.done_by or "")
        closing = Closing(
            outcome,
            decided_by,
            check=lambda current: _same_claim(current, state.delivery),
            changes=Changes(handoff=state.model_copy(update={"receipt": receipt, "detail": detail})),
        )
        try:
            await engine.close(rec.id, closing)
        except CosignerError as exc:
            log.info("handoff check not applied", extra={"approval_id": rec.id, "code": str(exc.code)})

    async def _ask(
        self, http: Egress, rec: Record, state: HandoffState, delivery: str
    ) -> tuple[ApprovalStatus, str | None, HandoffReceipt | None, HandoffCheck]:
        """(status, detail, receipt, audit note) of one signed call to `expect`; fails closed."""
        note = HandoffCheck(delivery=delivery, status=None, done=None, error=None)
        secret = os.environ.get(state.secret_env)
        try:
            if not secret:
                raise _Unverified(f"{state.secret_env} is not set")
            if self.seal is None:
                raise _Unverified("no key to open the parameters with")
            context = sealed_context(rec.tenant, rec.execution_id, rec.tool_call_id)
            parameters = json.loads(self.seal.open(state.sealed, context))
            call = ExpectCall(
                approvalId=rec.id,
                tenant=rec.tenant,
                executionId=rec.execution_id,
                toolCallId=rec.tool_call_id,
                toolName=rec.tool_name,
                parameters=parameters,
            )
            response = await http.post_signed(
                state.url,
                call.model_dump_json().encode(),
                secret=secret,
                delivery=delivery,
                at=self.clock(),
                user_agent="cosigner-expect/1",
                timeout=CHECK_TIMEOUT,
            )
            note = note.model_copy(update={"status": response.status_code})
            if response.status_code != 200:
                raise _Unverified(f"HTTP {response.status_code}")
            answer = ExpectAnswer.model_validate_json(response.content)
        except Exception as exc:
            if isinstance(exc, EgressFailed):
                error = exc.reason  # the network failure's name (Unreached, Lost)
            elif isinstance(exc, (_Unverified, EgressRefused)):
                error = str(exc)
            else:
                error = type(exc).__name__
            note = note.model_copy(update={"error": error})
            return ApprovalStatus.FAILED, UNVERIFIED, None, note
        # The application's words go to the card, the agent and the record: a credential in
        # them is redacted like one in the agent's reason.
        detail = str(redact(answer.detail[:DETAIL_MAX])) if answer.detail else None
        note = note.model_copy(update={"done": answer.done, "detail": detail})
        if not answer.done:
            return ApprovalStatus.FAILED, detail or "the application says the step was not done", None, note
        receipt = HandoffReceipt(
            checkedAt=ts(self.clock()),
            delivery=delivery,
            responseDigest="sha256:" + hashlib.sha256(response.content).hexdigest(),
            detail=detail,
        )
        return ApprovalStatus.COMPLETED, None, receipt, note


def _same_claim(rec: Record, delivery: str | None) -> None:
    if rec.handoff is None or rec.handoff.delivery != delivery:
        raise AlreadyDecided(f"approval {rec.id} was claimed by another Done")


class _Unverified(Exception):
    """The application gave no usable answer; the message says what happened (no secrets)."""
