"""The closing side of the engine: answers, expiry, cancels, edits approved, and what follows.

`Closer` is the collaborator the `Engine` holds (`Engine.closer`) for everything that closes an
approval or counts toward closing it: each goes through the one transition
(`bot.approvals.lifecycle.close`, which asks the pure `bot.approvals.judging.judge`) in one
step whose transaction storage chooses (`Database.answer`), then wakes the waiters and the
workers. It reads the engine's parts at each call (its database, policy, clock, notifier,
tracing and wakeups), so a part swapped on the engine is the one used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from bot.approvals import allowances, answerers, edits, lifecycle
from bot.approvals import denials as standing
from bot.approvals.judging import closed_error, stale
from bot.approvals.lifecycle import Closing
from bot.observability import Answered
from bot.observability.activity import Activity, PersonAnswer, Step
from bot.policy import rule_on
from contracts.allowances import choice_named
from contracts.answers import AgentDecider, PersonDecider, PolicyDecider, SystemDecider, TimeoutDecider
from contracts.enums import ApprovalStatus, SurfaceType, Verdict
from contracts.errors import AlreadyDecided, ApprovalExpired, ApprovalNotFound, CosignerError, InvalidRequest
from contracts.wire import DecisionRequest
from storage import ledger
from storage.audit import Event
from storage.jobs import Job
from storage.records import Changes, Record
from storage.work import Work

if TYPE_CHECKING:
    from bot.approvals.engine import Engine

log = logging.getLogger("cosigner.engine")

DASHBOARD_VERDICTS = {
    Verdict.APPROVE: ApprovalStatus.APPROVED,
    Verdict.DENY: ApprovalStatus.DENIED,
    Verdict.ALWAYS_DENY: ApprovalStatus.DENIED,
    Verdict.ALLOW_FOR: ApprovalStatus.APPROVED,
    Verdict.CANCEL: ApprovalStatus.CANCELLED,
}


class Closer:
    """Closes approvals for the engine it is given (see the module's docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def close(self, approval_id: str, closing: Closing) -> Record:
        """Run the one transition (`bot.approvals.lifecycle.close`); a refusal it audited is raised after
        its transaction commits."""
        e = self.engine
        # This process hands its waiters the closed record: its own NOTIFY wakes none of them.
        with e.notifier.closing(approval_id):
            started = e.tracing.clock()
            # Storage chooses the transaction: without a message to record or more to write,
            # one conditional write after an unlocked read (PostgreSQL), else a locked one.
            done = await e.db.answer(
                lambda tx: lifecycle.close(
                    tx,
                    approval_id,
                    closing,
                    e.clock,
                    callback_window=e.policy.defaults.callback_retry_window,
                    send_execute=e.executes,
                    people=e.policy.people,
                ),
                writes_more=closing.writes_more,
            )
            if e.tracing.enabled:  # the answer's span and the approval's, when spans are exported
                answered = Answered(closing.decided_by, closing.to, done.refusal, done.changed, done.counted)
                e.tracing.after_close(done.record, answered, started)
            if isinstance(closing.decided_by, PersonDecider) and log.isEnabledFor(logging.DEBUG):
                refused = str(done.refusal.code) if done.refusal is not None else None
                log.debug(
                    "answer",
                    extra={
                        "approval_id": approval_id,
                        "code": refused,
                        "activity": Activity(
                            Step.ANSWERED, done.record, PersonAnswer(closing.decided_by, closing.to, refused)
                        ),
                    },
                )
            if done.changed:
                self.closed(done.record, done.execute)
            elif done.counted:
                # Each counted Approve is on the audit chain; the log says so only at DEBUG, as
                # it does for every answer, and at INFO once the approval closes.
                log.debug(
                    "approval counted",
                    extra={"approval_id": approval_id, "tenant": done.record.tenant, "status": "pending"},
                )
                if done.record.delivered is not None or done.record.escalated:
                    e.wakeups.jobs.set()  # the card shows the progress (an edit: texts it again)
        if done.refusal is not None:
            raise done.refusal
        return done.record

    def closed(self, rec: Record, execute: Job | None = None) -> None:
        """What follows a closing, once committed: metrics, the log, the waiters, the workers."""
        e = self.engine
        surface = rec.route.surface.value if rec.route is not None else "none"
        e.metrics.closed(rec.status.value, surface, rec.created_at, rec.decided_at or e.clock())
        log.info(
            "approval closed",
            extra={
                "approval_id": rec.id,
                "tenant": rec.tenant,
                "status": rec.status.value,
                "activity": Activity(Step.DECIDED, rec),
            },
        )
        if rec.settled:  # an approved operation's waiters are told once its outcome is stored
            e.notifier.publish(rec.id, rec)
        else:
            e.notifier.changed()  # no longer pending: the inbox's live lists
        if rec.callback_url or rec.delivered is not None or rec.escalated:
            e.wakeups.jobs.set()
        self.execute(rec, execute)

    def execute(self, rec: Record, claimed: Job | None = None) -> None:
        """Carry out an approved operation at once (its job, `claimed` or not, is the fallback)."""
        if rec.operation is None or rec.status is not ApprovalStatus.APPROVED:
            return
        if not self.engine.executes:
            self.engine.wakeups.jobs.set()
            return
        self.engine.to_execute.put_nowait((rec.id, None if claimed is None else (claimed, rec)))

    async def expire(self, approval_id: str) -> bool:
        """Close a pending approval whose time is up; False if it was not due or closed. "Not
        due" is judged against the instant the closing loaded the approval at (`Asked.not_due`)."""
        expiry = Closing(ApprovalStatus.EXPIRED, TimeoutDecider(), not_due=InvalidRequest("not due"))
        try:
            await self.close(approval_id, expiry)
        except CosignerError:
            return False
        return True

    async def expire_due(self, limit: int = 200) -> int:
        """Expire every pending approval past its time, including ones that expired while
        the server was down. Safe on several replicas: each expiry happens once."""
        now = self.engine.clock()
        ids = await self.engine.db.run_read(lambda tx: ledger.due_ids(tx, now, limit))
        done = 0
        for approval_id in ids:
            done += await self.expire(approval_id)
        return done

    async def next_expiry(self) -> float | None:
        """When the next pending approval expires."""
        return await self.engine.db.run_read(ledger.next_expiry)

    async def cancel(self, tenant: str, approval_id: str) -> Record:
        """The agent withdraws its request."""
        return await self.close(approval_id, Closing(ApprovalStatus.CANCELLED, AgentDecider(), tenant=tenant))

    async def dashboard_decide(self, tenant: str, approval_id: str, req: DecisionRequest) -> Record:
        """The tenant's app decides on behalf of its signed-in user (a handoff: done or cancel)."""
        verdict = Verdict(req.decision)
        person = PersonDecider(surface=SurfaceType.DASHBOARD, userId=req.userId)

        def check(rec: Record) -> None:
            answerers.check_dashboard(rec, req.userId)
            answerers.check_verdict(rec, verdict)

        if req.edit is not None:
            if verdict is not Verdict.APPROVE:
                raise InvalidRequest(
                    'an edit is an approval: send it with "decision": "approve"', field="edit"
                )
            return await self.approve_edited(
                approval_id,
                req.edit,
                person,
                check,
                comment=req.comment,
                tenant=tenant,
                seen=req.parametersDigest,
            )
        if verdict is Verdict.DONE:
            if self.engine.handoffs is None:
                raise InvalidRequest("handoffs need COSIGNER_SECRET on this server")
            await self.engine.handoffs.press_done(self.engine, approval_id, person, check, tenant=tenant)
            return await self.engine.wait(tenant, approval_id, self.engine.handoffs.done_wait)
        if req.allowFor is not None and verdict is not Verdict.ALLOW_FOR:
            raise InvalidRequest('allowFor goes with "decision": "allow_for" only', field="allowFor")
        to = DASHBOARD_VERDICTS[verdict]
        checked: standing.Check = check
        setting = None
        if verdict is Verdict.ALWAYS_DENY:
            checked, setting = standing.checked(check, req.userId), standing.setting(req.userId, None)
        elif verdict is Verdict.ALLOW_FOR:
            choice = choice_named(req.allowFor or "")
            seconds = choice.seconds if choice is not None else None
            checked = allowances.checked(check, self.engine.policy, seconds)
            setting = allowances.granting(
                self.engine.policy, SurfaceType.DASHBOARD, req.userId, None, seconds or 0.0
            )
        closing = Closing(
            to,
            person,
            comment=req.comment,
            tenant=tenant,
            audit_refusal=True,
            check=checked,
            also=setting,
            seen=req.parametersDigest,
        )
        return await self.close(approval_id, closing)

    async def check_edit(self, rec: Record, values: Mapping[str, Any]) -> edits.Edited:
        """An edit of a pending call checked against the policy as it stands (what is
        editable) and the tool's schema (on a worker thread, `bot.approvals.schema_rules`);
        raises `InvalidRequest` whose `problems` name each field and why."""
        return await edits.edited(
            rec, values, self.engine.seal, self.engine.policy.rule_for(rec.tenant, rec.tool_name)
        )

    async def approve_edited(
        self,
        approval_id: str,
        values: Mapping[str, Any],
        person: PersonDecider,
        check: Callable[[Record], None],
        *,
        comment: str | None = None,
        tenant: str | None = None,
        inbound: tuple[SurfaceType, str] | None = None,
        also: Callable[[Work, Record, float], list[Event]] | None = None,
        seen: str | None = None,
        ids: tuple[str, ...] = (),
    ) -> Record:
        """Approve an edited call: `check` is the answer's own (who, where), `also` more audited
        with the closing (who vouched for the person), `seen` the digest of the call the edit
        was made of (None: the agent's own), `ids` the person's other ids an identity provider
        vouched for (`Closing.ids`). The edit is checked here again (nothing a surface
        checked is trusted) and the edited call put to the policy again: a deny rule or a
        standing deny it meets denies it; `allow_below` never makes it a call that needs
        nobody (a person approved it).

        Where a quorum must approve, the edited call becomes the current one: the edit is the
        editor's Approve of it, every Approve of the call it replaced is set aside, and the
        count starts again (`bot.approvals.lifecycle.revise`). Under the approval's lock the
        call must still be the one the edit was made of: of two concurrent edits, or an edit
        and an Approve that closes, one wins and the other is refused."""
        rec = await self.engine.record(approval_id, tenant)
        check(rec)
        if rec.closed:
            raise closed_error(rec)
        changed = stale(rec, seen)
        if changed is not None:
            raise changed
        basis = rec.call_digest  # the version this edit is of, checked again under the lock
        rule = self.engine.policy.rule_for(rec.tenant, rec.tool_name)
        done = await self.check_edit(rec, values)
        ruling = rule_on(
            self.engine.policy,
            rec.tenant,
            rec.tool_name,
            done.call,
            None,
            enabled=self.engine.surfaces,
            rule=rule,
        )
        if ruling.invalid is not None:
            bad = ruling.invalid
            field = bad.parameter.split(".")[0]
            raise InvalidRequest(bad.message, problems=[{"field": field, "message": bad.message}])
        moved = ruling.rule.describe() != rec.policy_rule
        if rule.when and moved and not (ruling.deny or ruling.runs_unasked):
            # `when` blocks decide who approves: the edited call could need other approvers, or more.
            said = (
                f"the edited call is decided by {ruling.decided_by}, not by the rule this call was asked "
                f"under ({rec.policy_rule}), so its approvers may differ; approve or deny the call as "
                "it is, and let the agent ask for the other one"
            )
            raise InvalidRequest(said, problems=[{"field": c.name, "message": said} for c in done.changes])
        held = await self.engine.db.run_read(
            lambda tx: standing.held_against(tx, rec.tenant, rec.tool_name, rec.mode, rec.route, rec.surface)
        )
        result = done.result.model_copy(update={"by": person.userId, "surface": person.surface.value})
        data: dict[str, Any] = {
            "edited": {
                "parameters": result.parameters,
                "fields": list(result.fields),
                "changed": [c.name for c in done.changes],
                "digest": result.digest,
                "originalDigest": rec.digest,
                **({"replacedDigest": basis} if basis != rec.digest else {}),
            }
        }
        if ruling.deny or held is not None:
            by = standing.decider(held) if held is not None else PolicyDecider(rule=ruling.decided_by)
            closing = Closing(
                ApprovalStatus.DENIED,
                by,
                comment=f"{person.userId} edited the call into one that {by.rule} refuses",
                tenant=tenant,
                check=check,
                audit_refusal=True,
                inbound=inbound,
                also=also,
                data=data,
                seen=basis,
            )
        else:
            assert rec.edit is not None  # edits.edited refuses a call without one
            quorum = rec.quorum > 1
            state = (edits.state_pending if quorum else edits.state_after)(rec.edit, result)
            closing = Closing(
                ApprovalStatus.APPROVED,
                person,
                comment=comment,
                tenant=tenant,
                check=check,
                audit_refusal=True,
                inbound=inbound,
                also=also,
                changes=Changes(edit=state),
                data=data,
                seen=basis,
                revises=quorum,
                ids=ids,
            )
        return await self.close(approval_id, closing)

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        """Deny a pending approval because its surface failed; no-op if already closed."""
        try:
            await self.close(
                approval_id, Closing(ApprovalStatus.DENIED, SystemDecider(code=code), comment=message)
            )
        except (AlreadyDecided, ApprovalExpired, ApprovalNotFound):
            return
