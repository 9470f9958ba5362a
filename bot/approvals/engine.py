"""The engine: the async side of an approval's life.

It creates approvals by policy (`bot.approvals.creating`: load → `bot.approvals.prepare` → write,
`bot.approvals.intake`), wakes the agents waiting on them (`bot.approvals.reading`), and closes
them through its closing side (`Engine.closer`, `bot.approvals.closing`), which runs the one
transition of `bot.approvals.lifecycle`. Each step is one synchronous function run inside one
transaction (`Database.create`, `Database.answer`, `Database.run_write`); this module only
orchestrates them and wakes the workers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from bot.approvals import allowances, creating, reading, trail
from bot.approvals.bodies import Start
from bot.approvals.closing import Closer
from bot.approvals.collaborators import Observe, Reach, Rules, Stores, Wakeups
from bot.approvals.denials import Denials
from bot.approvals.lifecycle import Closing
from bot.approvals.notifier import Notifier
from bot.egress import AllowList
from bot.observability import Tracing
from bot.oncall import Found
from bot.policy import SmsSender, ToolRule, json_limits
from bot.policy.oncall_refs import OnCallRef
from contracts.answers import (
    Decision,
)
from contracts.denials import Denial
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType, Verdict
from contracts.ports import ApprovalCard, Delivered, Placed
from contracts.wire import AdmitRequest, ApprovalRequest, ResultReport
from storage import ledger
from storage.audit import AuditRow
from storage.jobs import Job
from storage.operations import OperationRecord
from storage.records import Record

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

    @cached_property
    def closer(self) -> Closer:
        """The closing side: answers, expiry, cancels, edits approved (`bot.approvals.closing`)."""
        return Closer(self)

    async def close(self, approval_id: str, closing: Closing) -> Record:
        """Run the one transition (`Closer.close`); a refusal it audited is raised after it commits."""
        return await self.closer.close(approval_id, closing)

    async def expire(self, approval_id: str) -> bool:
        """Close a pending approval whose time is up; False if it was not due or closed."""
        return await self.closer.expire(approval_id)

    async def cancel(self, tenant: str, approval_id: str) -> Record:
        """The agent withdraws its request."""
        return await self.closer.cancel(tenant, approval_id)

    def _execute(self, rec: Record, claimed: Job | None = None) -> None:
        self.closer.execute(rec, claimed)

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
