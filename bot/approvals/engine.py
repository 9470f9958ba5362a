"""The engine: the async side of an approval's life.

It creates approvals by policy (`bot.approvals.intake`), wakes the agents waiting on them, and closes
them through its closing side (`Engine.closer`, `bot.approvals.closing`), which runs the one
transition of `bot.approvals.lifecycle`. Each step is one synchronous function run inside one
transaction (`Database.run_write`, `Database.answer`); this module only orchestrates them and
wakes the workers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from bot.approvals import agent_schema, allowances, coalescing, edits, trail
from bot.approvals import denials as standing
from bot.approvals.bodies import Start, decision_body, start_body
from bot.approvals.closing import Closer, HandoffKind
from bot.approvals.denials import Denials
from bot.approvals.grants import GrantSigner
from bot.approvals.intake import Call, Intake, create_tx
from bot.approvals.lifecycle import Closing
from bot.approvals.notifier import Notifier
from bot.egress import AllowList
from bot.observability import Metrics, Tracing
from bot.observability.activity import Activity, Step
from bot.oncall import Asked, Fallback, Found, OnCall
from bot.policy import (
    Policy,
    Ruling,
    SmsSender,
    ToolRule,
    callback_allowed,
    decide,
    differences,
    json_limits,
    redact,
    surface_belongs,
)
from bot.policy.oncall_refs import OnCallRef
from bot.policy.thresholds import above
from contracts.answers import Decision, PolicyDecider
from contracts.denials import Denial
from contracts.digest import digest_of_canonical
from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, SurfaceType
from contracts.errors import (
    ApprovalModeUnsupported,
    ApprovalNotFound,
    InvalidRequest,
    PermissionDenied,
)
from contracts.names import fold
from contracts.ports import ApprovalCard, DashboardRoute, Delivered, Placed, SlackRoute
from contracts.reach import Channel, delivered_by_worker
from contracts.wire import AdmitRequest, ApprovalRequest, ResultReport
from storage import ledger
from storage.allowances import UsedUp
from storage.audit import AuditRow
from storage.database import Conflict, Database
from storage.jobs import Job
from storage.operations import OperationRecord
from storage.records import Record
from storage.sealing import TokenSeal

log = logging.getLogger("cosigner.engine")

RECHECK_SECONDS = 5.0


class Wakeups:
    """The events that wake the background workers: `jobs` when work was queued, `expiry`
    when an approval's deadline may have moved. Made once by the app and handed to the
    engine and to whatever queues or runs that work."""

    def __init__(self) -> None:
        self.jobs = asyncio.Event()
        self.expiry = asyncio.Event()

    def all(self) -> None:
        """Wake both (time moved, or the app stops)."""
        self.jobs.set()
        self.expiry.set()


class Engine:
    """The approval lifecycle: create, wait, close, expire, and the receipts of deliveries."""

    def __init__(
        self,
        db: Database,
        policy: Policy,
        signer: GrantSigner,
        *,
        metrics: Metrics,
        sms_sender: SmsSender | None = None,
        notifier: Notifier | None = None,
        surfaces: Collection[str] | None = None,
        clock: Callable[[], float] = time.time,
        callback_allow: AllowList | None = None,
        tracing: Tracing | None = None,
        seal: TokenSeal | None = None,
        handoffs: HandoffKind | None = None,
        shadow: Policy | None = None,
        executes: bool = False,
        denials: Denials | None = None,
        wakeups: Wakeups | None = None,
        oncall: OnCall | None = None,
    ) -> None:
        self.db = db
        self.oncall = oncall  # asks PagerDuty / Opsgenie who is on call (rules naming a rotation)
        self.policy = policy
        self.signer = signer
        self.metrics = metrics
        self.sms_sender = sms_sender or SmsSender()
        # Where requests may be routed (the dashboard and the app's surfaces), read at each
        # request: the app's own set, which its surface adapters join once built.
        self.surfaces = surfaces if surfaces is not None else {SurfaceType.DASHBOARD}
        self.clock = clock
        self.callback_allow = callback_allow or AllowList()
        self.notifier = notifier or Notifier()
        self.denials = denials or Denials(db, clock)
        self.tracing = tracing or Tracing()
        self.seal = seal  # seals a handoff's parameters until its check
        self.handoffs = handoffs
        self.shadow = shadow  # decided alongside, acts on nothing (COSIGNER_POLICY_SHADOW)
        self.wakeups = wakeups or Wakeups()
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

    # --- reading ----------------------------------------------------------------

    async def record(self, approval_id: str, tenant: str | None = None) -> Record:
        """The approval, if it belongs to `tenant` (None: any tenant)."""
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        if rec is None or (tenant is not None and rec.tenant != tenant):
            raise ApprovalNotFound(
                f"no approval {approval_id} for this API key; check the id "
                "and that you use the key of the tenant that created it"
            )
        return rec

    def decision(self, rec: Record) -> Decision:
        """The decision object, its grant for the executor the tool's rule names (`audience`)."""
        audience = (
            None if rec.operation is not None else self.policy.rule_for(rec.tenant, rec.tool_name).audience
        )
        return decision_body(rec, self.signer, self.grant_ttl, audience)

    def body(self, rec: Record) -> Start | Decision:
        """The wire body for GET: `approval_start` while pending, else the decision."""
        if rec.closed:
            return self.decision(rec)
        return start_body(rec)

    async def wait(self, tenant: str, approval_id: str, seconds: float) -> Record:
        """Return once the approval settles (closes; an approved operation: has its outcome)
        or `seconds` pass.

        Push, not polling: the waiter subscribes before it reads, and the closing step hands
        it the closed record. A NOTIFY from another replica wakes it to read again, and a
        slow recheck covers a lost notification.
        """
        deadline = self.clock() + seconds
        # The first look may take "pending" from this replica's copy (PostgreSQL, `Database.known`):
        # it only starts the wait, and a close, heard here, wakes it to read the database.
        copy = self.db.known.get(approval_id)
        while True:
            fut = self.notifier.subscribe(approval_id)
            try:
                if copy is not None and copy.tenant == tenant and deadline > self.clock():
                    rec, copy = copy, None
                else:
                    rec = await self.record(approval_id, tenant)
                now = self.clock()
                if rec.settled or deadline <= now:
                    return rec
                timeout = min(deadline - now, self.recheck_seconds)
                if not rec.closed:  # else an approved operation, waiting for its outcome
                    if rec.expires_at <= now:
                        await self.expire(rec.id)
                        continue
                    timeout = min(timeout, rec.expires_at - now + 0.01)
                try:
                    pushed = await asyncio.wait_for(asyncio.shield(fut), timeout)
                except TimeoutError:
                    continue
                if isinstance(pushed, Record) and pushed.tenant == rec.tenant and pushed.settled:
                    return pushed
            finally:
                self.notifier.unsubscribe(approval_id, fut)

    # --- creating ---------------------------------------------------------------

    async def admit(self, tenant: str, req: AdmitRequest, agent: str = "") -> list[Denial]:
        """Refuse a run whose gated tools need a person the surface cannot host; report the
        standing denies its tools would be refused by."""
        held: list[Denial] = []
        needing: list[str] = []
        messages: list[str] = []
        rules: list[str] = []
        surface_belongs(self.policy, tenant, req.surface)
        for tool in dict.fromkeys(req.tools):
            # No parameters yet: a threshold cannot let the call through before it is made.
            ruling = decide(
                self.policy,
                tenant,
                tool,
                {},
                req.surface,
                enabled=self.surfaces,
                sms=self.sms_sender,
                agent=agent,
                now=self.clock(),
            )
            if ruling.deny or ruling.runs_unasked:
                continue
            route = ruling.route
            if isinstance(route, ApprovalModeUnsupported):
                needing.append(tool)
                rules.append(ruling.rule.source)
                messages.append(route.message)
                continue
            assert route is not None  # a surface was given, so a route or a refusal was found
            found = await self.denials.held(tenant, tool, ruling.mode, route, req.surface.model_dump())
            held += [found] if found is not None else []
        if needing:
            raise ApprovalModeUnsupported(
                f"this run would need a person for {', '.join(needing)}, and cannot host one: " + messages[0],
                policy=rules,
                tools=needing,
                surface=req.surface.type,
            )
        return held

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
        canonical = json_limits(req.parameters)
        await agent_schema.check_schema(req.parametersSchema)
        surface_belongs(self.policy, tenant, req.surface)
        if req.callbackUrl is not None:
            callback_allowed(str(req.callbackUrl), self.callback_allow)
        if req.reason is not None:
            # The reason is free text that goes on the card, the text and the audit record:
            # a credential pasted into it is redacted like one in the parameters.
            req = req.model_copy(update={"reason": redact(req.reason)})
        own_rule = rule is not None
        rule = rule or self.policy.rule_for(tenant, req.toolName)
        dig = digest_of_canonical(canonical)  # the bytes json_limits measured, not written twice
        shown = redact(req.parameters, rule.redact, rule.show)
        handoff = None
        if rule.handoff is not None:
            if self.handoffs is None:
                raise InvalidRequest("handoffs need COSIGNER_SECRET on this server")
            handoff = self.handoffs.state(tenant, req, rule)
        asks = rule.oncall and not rule.deny and rule.mode is not ApprovalMode.NONE
        found = await self.on_call(tenant, rule.oncall) if asks else None
        # An operation's own rule decides it; a tool call's, the policy (Cedar's per call).
        ruling = self._decide(self.policy, tenant, req, rule if own_rule else None, found, agent)
        if ruling.invalid is not None:
            # Nothing is stored: the call was never one the policy could decide.
            bad = ruling.invalid
            raise InvalidRequest(bad.message, field=f"parameters.{bad.parameter}", policy=bad.path)
        rule = ruling.rule  # the outcome of the `when` block that decided, if one did
        # Only gated tool calls have a shadow: an operation's rule is handed in by its caller.
        shadow = None if self.shadow is None or own_rule else self._shadowed(tenant, req, ruling, agent)
        it = Intake(
            self.policy,
            tenant,
            req,
            rule,
            Call.of(self.policy, tenant, req, rule, dig, ruling, shown),
            shown,
            contract,
            approval_id,
            self.tracing.begin(),
            handoff,
            shadow,
            ruling.label,
            # Only where a person can edit: Slack's card, the dashboard (and inbox); SMS,
            # WhatsApp and Teams answer the call as sent.
            edits.offer(rule, req, shown, self.seal, tenant)
            if contract is None and not ruling.deny and isinstance(ruling.route, SlackRoute | DashboardRoute)
            else None,
            follow_ups=ruling.follow_ups,
            push=Channel.PUSH in self.surfaces,
            # One question, not two: only a plain tool call is coalesced with its pending twin.
            coalesce=coalescing.key(tenant, req, dig) if contract is None and handoff is None else None,
            oncall=found,
        )
        for _attempt in range(3):
            try:
                # Reads, then one write (storage.intake.write): no transaction needed; a
                # standing allow's use is a second write, so a tool that offers one takes one.
                since = self.db.known.epoch()
                created = await self.db.run_write(
                    lambda tx: create_tx(tx, it, self.clock()), single_write=it.call.allow is None
                )
            except (Conflict, UsedUp):
                continue  # a concurrent create of the same call won (read its result), or
                # took a standing allow's last use (read what is left)
            if created.coalesced and created.record.expires_at <= self.clock():
                await self.expire(created.record.id)  # its time is up: this one is a new question
                continue
            break
        else:
            raise InvalidRequest("could not create the approval; retry the same request")
        rec = created.record
        if created.coalesced:
            return await self._coalesced(rec, req)
        if created.replay:
            await self.denials.refuse_again(rec)
            return self._replay(rec)
        self.db.known.keep(rec, since)  # pending: the agent's long-poll and the decision read it
        if rec.closed:
            self.tracing.closed(rec)
        if shadow is not None:
            self._shadow_differs(rec, shadow)
        self.metrics.created(rec.status.value)
        log.debug(
            "approval created",
            extra={
                "approval_id": rec.id,
                "tenant": tenant,
                "tool": rec.tool_name,
                "status": rec.status.value,
                "activity": Activity(Step.CREATED, rec),
            },
        )
        if not rec.closed:
            self.notifier.changed()  # the inbox's live lists
        to_deliver = delivered_by_worker(rec.route) or (not rec.closed and Channel.PUSH in self.surfaces)
        if to_deliver or (rec.closed and rec.callback_url):
            self.wakeups.jobs.set()
        self._execute(rec)
        if created.denied_by_policy:
            over = above(rule, req.parameters)[1]
            raise PermissionDenied(
                (rule.deny_reason or f"{rule.source} denies {rec.tool_name} for this tenant")
                if rule.deny
                else f"{ruling.decided_by} refuses this {rec.tool_name} call ({over})",
                policy=rule.block or rule.source,
                approvalId=rec.id,
            )
        if created.standing is not None:
            raise standing.refusal(created.standing, rec.id)
        if not rec.closed:
            return 201, start_body(rec)
        return 200, self.decision(rec)

    async def on_call(self, tenant: str, refs: Sequence[OnCallRef]) -> Found:
        """Whoever is on call for `refs` and the route to them, or why nobody on call can be
        asked (then the rule's other approvers are: fail closed, never nobody)."""
        if self.oncall is None:
            names = tuple(map(str, refs))
            return Fallback(names, "no on-call provider is configured on this server")
        return await self.oncall.find(self.policy, tenant, refs, self.surfaces)

    def _decide(
        self,
        policy: Policy,
        tenant: str,
        req: ApprovalRequest,
        rule: ToolRule | None,
        found: Found | None = None,
        agent: str = "",
    ) -> Ruling:
        return decide(
            policy,
            tenant,
            req.toolName,
            req.parameters,
            req.surface,
            enabled=self.surfaces,
            sms=self.sms_sender,
            requested_timeout=req.timeoutSeconds,
            rule=rule,
            oncall=found.route if isinstance(found, Asked) else None,
            annotations=None
            if req.toolAnnotations is None
            else req.toolAnnotations.model_dump(exclude_none=True),
            agent=agent,
            now=self.clock(),
        )

    def _shadowed(self, tenant: str, req: ApprovalRequest, live: Ruling, agent: str) -> dict[str, Any] | None:
        """What the shadow policy would decide otherwise; it acts on nothing."""
        assert self.shadow is not None
        try:
            return differences(live, self._decide(self.shadow, tenant, req, None, agent=agent))
        except Exception:
            # A shadow must never change what the live policy decides, not even by failing.
            log.exception("the shadow policy failed to decide", extra={"tool": req.toolName})
            return None

    def _shadow_differs(self, rec: Record, shadow: Mapping[str, Any]) -> None:
        """Log and count a shadow difference, once per request (a replayed call is not new)."""
        # The label names only tools a policy names: an agent sends any name it likes, and
        # each new label value would be a new time series kept for good.
        assert self.shadow is not None
        known = self.policy.knows(rec.tenant, rec.tool_name) or self.shadow.knows(rec.tenant, rec.tool_name)
        self.metrics.shadow_difference(
            fold(rec.tool_name) if known else "(unnamed)", shadow["from"], shadow["to"]
        )
        log.warning(
            "the shadow policy decides this request differently",
            extra={
                "approval_id": rec.id,
                "tenant": rec.tenant,
                "tool": rec.tool_name,
                "shadow_from": shadow["from"],
                "shadow_to": shadow["to"],
                "shadow_rule": shadow["rule"],
                "shadow_loosens": shadow["loosens"],
            },
        )

    async def _coalesced(self, rec: Record, req: ApprovalRequest) -> tuple[int, Start | Decision]:
        """Answer an identical request with the pending approval, its arrival audited on it."""
        now = await self.db.run_write(lambda tx: coalescing.record(tx, rec.id, req, self.clock()))
        rec = now or rec
        log.debug("request coalesced", extra={"approval_id": rec.id, "tenant": rec.tenant})
        if rec.closed:  # decided meanwhile: the same decision
            return 200, decision_body(rec, self.signer, self.grant_ttl)
        return 201, start_body(rec, coalesced=True)

    def _replay(self, rec: Record) -> tuple[int, Start | Decision]:
        if not rec.closed:
            return 201, start_body(rec)
        by = rec.decided_by
        rule = by.rule if isinstance(by, PolicyDecider) else ""
        if rec.status is ApprovalStatus.DENIED and rule.endswith(".deny"):
            raise PermissionDenied(f"{rule} denies {rec.tool_name}", policy=rule[:-5], approvalId=rec.id)
        return 200, self.decision(rec)

    # --- closing (bot.approvals.closing) ---------------------------------------

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
