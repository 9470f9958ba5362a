"""The engine: the async side of an approval's life.

It creates approvals by policy (`bot.approvals.creating`: load → `bot.approvals.prepare` → write,
`bot.approvals.intake`), wakes the agents waiting on them (`bot.approvals.reading`), and closes
them through the one transition of `bot.approvals.lifecycle`. Each step is one synchronous function
run inside one transaction (`Database.run_write`); this module only orchestrates them and
wakes the workers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.approvals import allowances, creating, edits, reading, trail
from bot.approvals import denials as standing
from bot.approvals import lifecycle as approval
from bot.approvals.bodies import Start
from bot.approvals.collaborators import Observe, Reach, Rules, Stores, Wakeups
from bot.approvals.denials import Denials
from bot.approvals.lifecycle import Closing
from bot.approvals.notifier import Notifier
from bot.egress import AllowList
from bot.observability import Answered, Tracing
from bot.observability.activity import Activity, Answer, Step
from bot.oncall import Found
from bot.policy import SmsSender, ToolRule, json_limits, rule_on
from bot.policy.oncall_refs import OnCallRef
from contracts.allowances import choice_named
from contracts.answers import (
    AgentDecider,
    Decision,
    PersonDecider,
    PolicyDecider,
    SystemDecider,
    TimeoutDecider,
)
from contracts.denials import Denial
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalNotFound,
    CosignerError,
    InvalidRequest,
)
from contracts.ports import ApprovalCard, Delivered, Placed
from contracts.wire import AdmitRequest, ApprovalRequest, DecisionRequest, ResultReport
from storage import ledger
from storage.audit import AuditRow, Event
from storage.jobs import Job
from storage.operations import OperationRecord
from storage.records import Changes, Record
from storage.work import Work

log = logging.getLogger("cosigner.engine")

RECHECK_SECONDS = 5.0
DASHBOARD_VERDICTS = {
    Verdict.APPROVE: ApprovalStatus.APPROVED,
    Verdict.DENY: ApprovalStatus.DENIED,
    Verdict.ALWAYS_DENY: ApprovalStatus.DENIED,
    Verdict.ALLOW_FOR: ApprovalStatus.APPROVED,
    Verdict.CANCEL: ApprovalStatus.CANCELLED,
}


class Engine:
    """The approval lifecycle: create, wait, close, expire, and the receipts of deliveries.

    Built from its collaborators in four groups (`bot.approvals.collaborators`: `Stores`,
    `Rules`, `Observe`, `Reach`), each kept under its own name (`self.db`, `self.policy`, …).
    Creating is `bot.approvals.creating` (the pure part `bot.approvals.prepare`), reading
    and waiting `bot.approvals.reading`; this class closes and records."""

    def __init__(
        self,
        stores: Stores,
        rules: Rules,
        observe: Observe,
        reach: Reach | None = None,
        *,
        clock: Callable[[], float] = time.time,
        executes: bool = False,
    ) -> None:
        reach = reach or Reach()
        self.db = db = stores.db
        self.policy = rules.policy
        self.signer = rules.signer
        self.shadow = rules.shadow  # decided alongside, acts on nothing (COSIGNER_POLICY_SHADOW)
        self.callback_allow = rules.callback_allow or AllowList()
        self.seal = rules.seal  # seals a handoff's parameters until its check, an edit's hidden ones
        self.metrics = observe.metrics
        self.tracing = observe.tracing or Tracing()
        # Where requests may be routed (the dashboard and the app's surfaces), read at each
        # request: the app's own set, which its surface adapters join once built.
        self.surfaces = reach.surfaces if reach.surfaces is not None else {SurfaceType.DASHBOARD}
        self.sms_sender = reach.sms_sender or SmsSender()
        self.notifier = reach.notifier or Notifier()
        self.oncall = reach.oncall  # asks PagerDuty / Opsgenie who is on call (rules naming a rotation)
        self.handoffs = reach.handoffs
        self.wakeups = reach.wakeups or Wakeups()
        self.clock = clock
        self.denials = stores.denials or Denials(db, clock)
        # How often a waiter re-reads on its own, in case a notification from another
        # replica was lost; push is the normal path.
        self.recheck_seconds = RECHECK_SECONDS
        # With `executes` (a job worker runs in this process), an approved operation is sent
        # at once: `close` claims its job, and the worker takes it from `to_execute` (its
        # claimed job, or None when the worker must claim it). Without, the job waits for a
        # worker's poll.
        self.executes = executes
        self.to_execute: asyncio.Queue[tuple[str, tuple[Job, Record] | None]] = asyncio.Queue()

    async def approved(self) -> tuple[str, tuple[Job, Record] | None]:
        """The next operation approved here to send at once (with `executes`): its approval id
        and the `execute` job `close` claimed for it (None: the worker must claim it)."""
        return await self.to_execute.get()

    @property
    def grant_ttl(self) -> float:
        """How long a grant stays valid after the decision."""
        return self.policy.defaults.grant_ttl

    # --- reading (bot.approvals.reading) ----------------------------------------

    async def record(self, approval_id: str, tenant: str | None = None) -> Record:
        """The approval, if it belongs to `tenant` (None: any tenant)."""
        return await reading.record(self, approval_id, tenant)

    def decision(self, rec: Record) -> Decision:
        """The decision object, its grant for the executor the tool's rule names (`audience`)."""
        return reading.decision(self, rec)

    def body(self, rec: Record) -> Start | Decision:
        """The wire body for GET: `approval_start` while pending, else the decision."""
        return reading.body(self, rec)

    async def wait(self, tenant: str, approval_id: str, seconds: float) -> Record:
        """Return once the approval settles or `seconds` pass (`bot.approvals.reading.wait`)."""
        return await reading.wait(self, tenant, approval_id, seconds)

    # --- creating (bot.approvals.creating) --------------------------------------

    async def admit(self, tenant: str, req: AdmitRequest, agent: str = "") -> list[Denial]:
        """Refuse a run whose gated tools need a person the surface cannot host; report the
        standing denies its tools would be refused by."""
        return await creating.admit(self, tenant, req, agent)

    async def create(
        self,
        tenant: str,
        req: ApprovalRequest,
        *,
        rule: ToolRule | None = None,
        contract: OperationRecord | None = None,
        approval_id: str | None = None,
        agent: str = "",
    ) -> tuple[int, Start | Decision]:
        """Handle `POST /v1/approvals`; returns (HTTP status, body). An operation passes its
        own rule and the contract its application prepared for `approval_id`."""
        return await creating.create(
            self, tenant, req, rule=rule, contract=contract, approval_id=approval_id, agent=agent
        )

    async def on_call(self, tenant: str, refs: Sequence[OnCallRef]) -> Found:
        """Whoever is on call for `refs` and the route to them, or why nobody on call can be asked."""
        return await creating.on_call(self, tenant, refs)

    # --- closing ----------------------------------------------------------------

    async def close(self, approval_id: str, closing: Closing) -> Record:
        """Run the one transition (`bot.approvals.lifecycle.close`); a refusal it audited is raised after
        its transaction commits."""
        # This process hands its waiters the closed record: its own NOTIFY wakes none of them.
        with self.notifier.closing(approval_id):
            started = self.tracing.clock()
            done = await self.db.run_write(
                lambda tx: approval.close(
                    tx,
                    approval_id,
                    closing,
                    self.clock,
                    schema=self.db.schema,
                    callback_window=self.policy.defaults.callback_retry_window,
                    send_execute=self.executes,
                    people=self.policy.people,
                ),
                # Without a message to record or more to write, PostgreSQL decides in one
                # conditional write, after an unlocked read (of this replica's copy, when
                # it created the approval), instead of a locked transaction.
                optimistic=closing.inbound is None and closing.also is None and closing.run_grant is None,
            )
            if self.tracing.enabled:  # the answer's span and the approval's, when spans are exported
                answered = Answered(closing.decided_by, closing.to, done.refusal, done.changed, done.counted)
                self.tracing.after_close(done.record, answered, started)
            if isinstance(closing.decided_by, PersonDecider) and log.isEnabledFor(logging.DEBUG):
                refused = str(done.refusal.code) if done.refusal is not None else None
                log.debug(
                    "answer",
                    extra={
                        "approval_id": approval_id,
                        "code": refused,
                        "activity": Activity(
                            Step.ANSWERED, done.record, Answer(closing.decided_by, closing.to, refused)
                        ),
                    },
                )
            if done.changed:
                self._closed(done.record, done.execute)
            elif done.counted:
                # Each counted Approve is on the audit chain; the log says so only at DEBUG, as
                # it does for every answer, and at INFO once the approval closes.
                log.debug(
                    "approval counted",
                    extra={"approval_id": approval_id, "tenant": done.record.tenant, "status": "pending"},
                )
                if done.record.delivered is not None or done.record.escalated:
                    self.wakeups.jobs.set()  # the card shows the progress (an edit: texts it again)
        if done.refusal is not None:
            raise done.refusal
        return done.record

    def _closed(self, rec: Record, execute: Job | None = None) -> None:
        surface = rec.route.surface.value if rec.route is not None else "none"
        self.metrics.closed(rec.status.value, surface, rec.created_at, rec.decided_at or self.clock())
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
            self.notifier.publish(rec.id, rec)
        else:
            self.notifier.changed()  # no longer pending: the inbox's live lists
        if rec.callback_url or rec.delivered is not None or rec.escalated:
            self.wakeups.jobs.set()
        self._execute(rec, execute)

    def _execute(self, rec: Record, claimed: Job | None = None) -> None:
        # An approved operation is carried out at once; its job is the fallback.
        if rec.operation is None or rec.status is not ApprovalStatus.APPROVED:
            return
        if not self.executes:
            self.wakeups.jobs.set()
            return
        self.to_execute.put_nowait((rec.id, None if claimed is None else (claimed, rec)))

    async def expire(self, approval_id: str) -> bool:
        """Close a pending approval whose time is up; False if it was not due or closed."""

        def due(rec: Record) -> None:
            if rec.expires_at > self.clock():
                raise InvalidRequest("not due")

        try:
            await self.close(approval_id, Closing(ApprovalStatus.EXPIRED, TimeoutDecider(), check=due))
        except CosignerError:
            return False
        return True

    async def expire_due(self, limit: int = 200) -> int:
        """Expire every pending approval past its time, including ones that expired while
        the server was down. Safe on several replicas: each expiry happens once."""
        now = self.clock()
        ids = await self.db.run_read(lambda tx: ledger.due_ids(tx, now, limit))
        done = 0
        for approval_id in ids:
            done += await self.expire(approval_id)
        return done

    async def next_expiry(self) -> float | None:
        """When the next pending approval expires."""
        return await self.db.run_read(ledger.next_expiry)

    async def cancel(self, tenant: str, approval_id: str) -> Record:
        """The agent withdraws its request."""
        return await self.close(approval_id, Closing(ApprovalStatus.CANCELLED, AgentDecider(), tenant=tenant))

    async def dashboard_decide(self, tenant: str, approval_id: str, req: DecisionRequest) -> Record:
        """The tenant's app decides on behalf of its signed-in user (a handoff: done or cancel)."""
        verdict = Verdict(req.decision)
        person = PersonDecider(surface=SurfaceType.DASHBOARD, userId=req.userId)

        def check(rec: Record) -> None:
            approval.check_dashboard(rec, req.userId)
            approval.check_verdict(rec, verdict)

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
            if self.handoffs is None:
                raise InvalidRequest("handoffs need COSIGNER_SECRET on this server")
            await self.handoffs.press_done(self, approval_id, person, check, tenant=tenant)
            return await self.wait(tenant, approval_id, self.handoffs.done_wait)
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
            checked = allowances.checked(check, self.policy, seconds)
            setting = allowances.granting(
                self.policy, SurfaceType.DASHBOARD, req.userId, None, seconds or 0.0
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
        return await edits.edited(rec, values, self.seal, self.policy.rule_for(rec.tenant, rec.tool_name))

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
        rec = await self.record(approval_id, tenant)
        check(rec)
        if rec.closed:
            raise approval.closed_error(rec)
        changed = approval.stale(rec, seen)
        if changed is not None:
            raise changed
        basis = rec.call_digest  # the version this edit is of, checked again under the lock
        rule = self.policy.rule_for(rec.tenant, rec.tool_name)
        done = await self.check_edit(rec, values)
        ruling = rule_on(
            self.policy, rec.tenant, rec.tool_name, done.call, None, enabled=self.surfaces, rule=rule
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
        held = await self.db.run_read(
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

    async def report_result(self, tenant: str, approval_id: str, report: ResultReport) -> str:
        """Put what the executed call returned on the audit record (redacted); the approval's id."""
        json_limits(report.result, "result")
        return await self.db.run_write(
            lambda tx: trail.record_result(tx, self.policy, tenant, approval_id, report, self.clock)
        )

    # --- deliveries -------------------------------------------------------------

    def card_of(self, rec: Record) -> ApprovalCard:
        """The card to deliver: the record's, with the "Allow for …" lengths the policy offers."""
        return replace(rec.card(), allow_for=allowances.offered(self.policy, rec))

    async def placed(self, approval_id: str) -> Placed | None:
        """An approval with its route and receipt, whatever its tenant."""
        rec = await self.found(approval_id)
        return rec.placed() if rec else None

    async def found(self, approval_id: str) -> Record | None:
        """The approval whatever its tenant, or None if there is none."""
        return await self.db.run_read(lambda tx: ledger.load(tx, approval_id))

    async def sending(self, approval_id: str, receipt: Delivered) -> None:
        """Store a receipt without messages before the surface sends anything, so an answer
        racing the delivery is matched; only while the approval is pending and has none."""
        await self.db.run_write(lambda tx: ledger.set_receipt_if_pending(tx, approval_id, receipt))

    async def delivered(self, approval_id: str, receipt: Delivered) -> None:
        """Store a delivery receipt; if the approval closed meanwhile, queue the card update."""
        if await self.db.run_write(lambda tx: trail.record_delivery(tx, approval_id, receipt, self.clock)):
            self.wakeups.jobs.set()

    async def note(self, approval_id: str, event: AuditEvent, data: Mapping[str, Any]) -> None:
        """Append a surface or worker event to the approval's audit chain (redacted)."""
        await self.db.run_write(lambda tx: trail.record_note(tx, approval_id, event, data, self.clock))

    async def audit_trail(self, tenant: str | None, approval_id: str) -> list[AuditRow]:
        """Every audit row of one approval, oldest first."""
        await self.record(approval_id, tenant)
        return await self.db.run_read(lambda tx: ledger.events_of(tx, approval_id))
