"""The engine: creates approvals by policy, closes them through one transition, wakes waiters.

Every change of `status` goes through `Engine._close`, whose UPDATE is conditional on
`status = 'pending'`: of any number of concurrent answers exactly one wins and the rest
get `AlreadyDecided`. The same transaction appends the audit events, queues the callback
and the card update, and (on PostgreSQL) notifies the other replicas. Each step is one
synchronous function run inside one transaction (`Database.run_write`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.bodies import actor_of, decision_body, start_body
from bot.checks import (
    ambiguous,
    callback_allowed,
    check_dashboard,
    closed_error,
    json_limits,
    lookup,
    surface_belongs,
)
from bot.desk import Desk
from bot.egress import AllowList
from bot.grants import GrantSigner
from bot.metrics import Metrics
from bot.notifier import Notifier
from bot.policy import Policy, ToolRule
from bot.redaction import digest, redact
from bot.routing import SmsSender, route_for
from contracts.answers import (
    AgentDecider,
    ApprovalStart,
    DecidedBy,
    Decision,
    PersonDecider,
    PolicyDecider,
    SystemDecider,
    TimeoutDecider,
)
from contracts.enums import ApprovalMode, ApprovalStatus, JobKind, SurfaceType
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalModeUnsupported,
    ApprovalNotFound,
    ApprovalPending,
    CosignerError,
    InvalidRequest,
    ParametersMismatch,
    PermissionDenied,
    ToolCallCapExceeded,
)
from contracts.ports import Route
from contracts.wire import AdmitRequest, ApprovalRequest, DecisionRequest, ResultReport
from storage import approvals as ledger
from storage import jobs
from storage.audit import Event
from storage.database import Conflict, Database, Tx
from storage.records import Record, delivery_key, route_fields, route_to_json

log = logging.getLogger("cosigner.engine")

RECHECK_SECONDS = 5.0
_TRANSITIONS = {
    ApprovalStatus.PENDING: {
        ApprovalStatus.APPROVED,
        ApprovalStatus.DENIED,
        ApprovalStatus.EXPIRED,
        ApprovalStatus.CANCELLED,
    },
}


def new_id(prefix: str) -> str:
    """A random, URL-safe identifier with a readable prefix."""
    return f"{prefix}_{secrets.token_urlsafe(15)}"


def stored(decided_by: DecidedBy) -> str:
    """A decider as the approvals table keeps it."""
    return decided_by.model_dump_json(exclude_none=True)


def allowed(src: ApprovalStatus, dst: ApprovalStatus) -> bool:
    """The transition table: only a pending approval may close, and only once."""
    return dst in _TRANSITIONS.get(src, set())


@dataclass(frozen=True)
class Created:
    """What `_create_tx` decided, for the caller to answer with."""

    record: Record
    replay: bool
    denied_by_policy: bool = False


class Engine(Desk):
    """The approval lifecycle; with `Desk`, also the `ApprovalDesk` surfaces answer through."""

    def __init__(
        self,
        db: Database,
        policy: Policy,
        signer: GrantSigner,
        *,
        metrics: Metrics,
        sms_sender: SmsSender | None = None,
        notifier: Notifier | None = None,
        surfaces: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
        callback_allow: AllowList | None = None,
    ) -> None:
        self.db = db
        self.policy = policy
        self.signer = signer
        self.metrics = metrics
        self.sms_sender = sms_sender or SmsSender()
        self.surfaces = set(surfaces) | {"dashboard"}
        self.clock = clock
        self.callback_allow = callback_allow or AllowList()
        self.notifier = notifier or Notifier()
        self.jobs_wakeup = asyncio.Event()
        self.expiry_wakeup = asyncio.Event()
        # How often a waiter re-reads on its own, in case a notification from another
        # replica was lost; push is the normal path.
        self.recheck_seconds = RECHECK_SECONDS

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

    def body(self, rec: Record) -> ApprovalStart | Decision:
        """The wire body for GET: `approval_start` while pending, else the decision."""
        if rec.closed:
            return decision_body(rec, self.signer, self.grant_ttl)
        return start_body(rec)

    async def wait(self, tenant: str, approval_id: str, seconds: float) -> Record:
        """Return once the approval closes or `seconds` pass.

        Push, not polling: the waiter subscribes before it reads, and the closing step hands
        it the closed record. A NOTIFY from another replica wakes it to read again, and a
        slow recheck covers a lost notification.
        """
        deadline = self.clock() + seconds
        while True:
            fut = self.notifier.subscribe(approval_id)
            try:
                rec = await self.record(approval_id, tenant)
                now = self.clock()
                if rec.closed or deadline <= now:
                    return rec
                if rec.expires_at <= now:
                    await self.expire(rec.id)
                    continue
                timeout = min(deadline - now, self.recheck_seconds, rec.expires_at - now + 0.01)
                try:
                    pushed = await asyncio.wait_for(asyncio.shield(fut), timeout)
                except TimeoutError:
                    continue
                if isinstance(pushed, Record) and pushed.tenant == rec.tenant:
                    return pushed
            finally:
                self.notifier.unsubscribe(approval_id, fut)

    # --- creating ---------------------------------------------------------------

    async def admit(self, tenant: str, req: AdmitRequest) -> None:
        """Refuse a run whose gated tools need a person the surface cannot host."""
        needing: list[str] = []
        messages: list[str] = []
        rules: list[str] = []
        surface_belongs(self.policy, tenant, req.surface)
        for tool in dict.fromkeys(req.tools):
            rule = self.policy.rule_for(tenant, tool)
            if rule.deny or rule.mode is ApprovalMode.NONE:
                continue
            try:
                route_for(self.policy, tenant, rule, req.surface, self.surfaces, self.sms_sender)
            except ApprovalModeUnsupported as exc:
                needing.append(tool)
                rules.append(rule.source)
                messages.append(exc.message)
        if needing:
            raise ApprovalModeUnsupported(
                f"this run would need a person for {', '.join(needing)}, and cannot host one: " + messages[0],
                policy=rules,
                tools=needing,
                surface=req.surface.type,
            )

    async def create(self, tenant: str, req: ApprovalRequest) -> tuple[int, ApprovalStart | Decision]:
        """Handle `POST /v1/approvals`; returns (HTTP status, body)."""
        json_limits(req.parameters)
        surface_belongs(self.policy, tenant, req.surface)
        if req.callbackUrl is not None:
            callback_allowed(str(req.callbackUrl), self.callback_allow)
        if req.reason is not None:
            # The reason is free text that goes on the card, the text and the audit record:
            # a credential pasted into it is redacted like one in the parameters.
            req = req.model_copy(update={"reason": redact(req.reason)})
        rule = self.policy.rule_for(tenant, req.toolName)
        dig = digest(req.parameters)
        shown = redact(req.parameters, rule.redact)
        route: Route | ApprovalModeUnsupported | None = None
        if not rule.deny and rule.mode is not ApprovalMode.NONE:
            try:
                route = route_for(self.policy, tenant, rule, req.surface, self.surfaces, self.sms_sender)
            except ApprovalModeUnsupported as exc:
                route = exc  # raised only if the policy does not decide the call itself
        for _attempt in range(3):
            try:
                created = await self.db.run_write(
                    lambda tx: self._create_tx(tx, tenant, req, rule, dig, shown, route)
                )
                break
            except Conflict:
                continue  # a concurrent create of the same call won; read its result
        else:
            raise InvalidRequest("could not create the approval; retry the same request")
        rec = created.record
        if created.replay:
            return self._replay(rec)
        self.metrics.created(rec.status.value)
        log.debug(
            "approval created",
            extra={
                "approval_id": rec.id,
                "tenant": tenant,
                "tool": rec.tool_name,
                "status": rec.status.value,
            },
        )
        if (rec.route is not None and rec.route.surface != "dashboard") or (rec.closed and rec.callback_url):
            self.jobs_wakeup.set()
        if created.denied_by_policy:
            raise PermissionDenied(
                rule.deny_reason or f"{rule.source} denies {rec.tool_name} for this tenant",
                policy=rule.source,
                approvalId=rec.id,
            )
        if not rec.closed:
            return 201, start_body(rec)
        return 200, decision_body(rec, self.signer, self.grant_ttl)

    def _create_tx(
        self,
        tx: Tx,
        tenant: str,
        req: ApprovalRequest,
        rule: ToolRule,
        dig: str,
        shown: dict[str, Any],
        routed: Route | ApprovalModeUnsupported | None,
    ) -> Created:
        now = self.clock()
        calls = ledger.execution_calls(tx, tenant, req.executionId)
        for row in calls:
            if row.tool_call_id == req.toolCallId:
                rec = Record.from_row(row)
                if rec.digest != dig or rec.tool_name != req.toolName:
                    raise ParametersMismatch(
                        f"executionId {req.executionId} + toolCallId {req.toolCallId} was "
                        f"already used for {rec.tool_name} with other parameters "
                        f"({rec.digest}); use a new toolCallId for a different call",
                        approvalId=rec.id,
                    )
                return Created(rec, replay=True)
        mode = rule.mode
        route = None if isinstance(routed, ApprovalModeUnsupported) else routed
        decided_by: DecidedBy | None = None
        status = ApprovalStatus.PENDING
        if rule.deny:
            decided_by, status = PolicyDecider(rule=f"{rule.source}.deny"), ApprovalStatus.DENIED
        elif mode is ApprovalMode.NONE:
            decided_by, status = PolicyDecider(rule=rule.describe()), ApprovalStatus.APPROVED
        else:
            cap = self.policy.max_gated_calls(tenant)
            used = ledger.gated_count(calls)
            if used >= cap:
                raise ToolCallCapExceeded(
                    f"execution {req.executionId} has made {used} gated calls; the cap is {cap} "
                    "(max_gated_calls_per_execution). Start a new execution or raise the cap "
                    "in the policy.",
                    limit=cap,
                )
            decided_by = self._policy_approval(tx, tenant, req, rule)
            if decided_by is not None:
                status, route = ApprovalStatus.APPROVED, None
            elif isinstance(routed, ApprovalModeUnsupported):
                raise routed
        if status is not ApprovalStatus.PENDING:
            route = None
        timeout = self.policy.timeout_for(
            rule, route.surface if route else req.surface.type, req.timeoutSeconds
        )
        approval_id = new_id("apv")
        events = [
            Event(
                "requested",
                {"kind": "agent", "tenant": tenant},
                {
                    "executionId": req.executionId,
                    "toolCallId": req.toolCallId,
                    "toolName": req.toolName,
                    "parameters": shown,
                    "parametersDigest": dig,
                    "reason": req.reason,
                    "surface": req.surface.model_dump(mode="json"),
                    "policy": rule.describe(),
                    "mode": mode.value,
                    "route": route_fields(route) if route else None,
                },
            )
        ]
        if decided_by is not None:
            events.append(Event(status.value, actor_of(decided_by), {"comment": None}))
        values = {
            "id": approval_id,
            "tenant": tenant,
            "execution_id": req.executionId,
            "tool_call_id": req.toolCallId,
            "tool_name": req.toolName,
            "kind": rule.kind.value,
            "mode": mode.value,
            "status": status.value,
            "parameters": json.dumps(shown, separators=(",", ":")),
            "parameters_digest": dig,
            "reason": req.reason,
            "surface": req.surface.model_dump_json(),
            "route": route_to_json(route) if route else None,
            "delivered": None,
            "delivery_key": delivery_key(route) if route else None,
            "short_code": ledger.short_code(tx, route) if route else "0000",
            "policy_rule": rule.describe(),
            "callback_url": str(req.callbackUrl) if req.callbackUrl else None,
            "created_at": now,
            "expires_at": now + timeout,
            "decided_at": None if decided_by is None else now,
            "decided_by": stored(decided_by) if decided_by else None,
            "comment": None,
        }
        rec = ledger.insert_approval(tx, values, events)
        if route is not None and route.surface != "dashboard":
            jobs.queue(tx, JobKind.DELIVER, approval_id, {}, now, now + 120)
        if decided_by is not None and values["callback_url"]:
            self._queue_callback(tx, approval_id, now)
        return Created(rec, replay=False, denied_by_policy=rule.deny)

    def _replay(self, rec: Record) -> tuple[int, ApprovalStart | Decision]:
        if not rec.closed:
            return 201, start_body(rec)
        by = rec.decided_by
        rule = by.rule if isinstance(by, PolicyDecider) else ""
        if rec.status is ApprovalStatus.DENIED and rule.endswith(".deny"):
            raise PermissionDenied(f"{rule} denies {rec.tool_name}", policy=rule[:-5], approvalId=rec.id)
        return 200, decision_body(rec, self.signer, self.grant_ttl)

    def _policy_approval(self, tx: Tx, tenant: str, req: ApprovalRequest, rule: ToolRule) -> DecidedBy | None:
        if rule.allow_below is not None and not ambiguous(req.parameters, rule.allow_below.parameter):
            value = lookup(req.parameters, rule.allow_below.parameter)
            # Below the threshold but not negative: a negative amount is not a small one.
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and 0 <= value < rule.allow_below.value
            ):
                return PolicyDecider(
                    rule=f"{rule.source}.allow_below "
                    f"({rule.allow_below.parameter} < {rule.allow_below.value:g})"
                )
        if rule.mode is ApprovalMode.ASK:
            grant = ledger.run_grant(tx, tenant, req.executionId, req.toolName)
            if grant is not None:
                return PolicyDecider(
                    rule=f"approved for this run by {grant.granted_by} ({grant.approval_id})"
                )
        return None

    def _queue_callback(self, tx: Tx, approval_id: str, now: float) -> None:
        jobs.queue(
            tx,
            JobKind.CALLBACK,
            approval_id,
            {"delivery": new_id("dlv")},
            now,
            now + self.policy.defaults.callback_retry_window,
        )

    # --- closing ----------------------------------------------------------------

    async def _close(
        self,
        approval_id: str,
        to: ApprovalStatus,
        decided_by: DecidedBy,
        *,
        comment: str | None = None,
        tenant: str | None = None,
        check: Callable[[Record], None] | None = None,
        audit_refusal: bool = False,
        run_grant: str | None = None,
        once: tuple[str, str] | None = None,
    ) -> Record:
        """The one function that writes `status`. A refused answer is audited (when
        `audit_refusal`) in the same transaction, which then commits, and raised after.
        `once` is a (namespace, key) flag recorded in that transaction: if it is already
        there the answer was handled before, and nothing changes."""
        rec, refusal, closed_now = await self.db.run_write(
            lambda tx: self._close_tx(
                tx, approval_id, to, decided_by, comment, tenant, check, audit_refusal, run_grant, once
            )
        )
        if closed_now:
            self._closed(rec)
        if refusal is not None:
            raise refusal
        return rec

    def _close_tx(
        self,
        tx: Tx,
        approval_id: str,
        to: ApprovalStatus,
        decided_by: DecidedBy,
        comment: str | None,
        tenant: str | None,
        check: Callable[[Record], None] | None,
        audit_refusal: bool,
        run_grant: str | None,
        once: tuple[str, str] | None = None,
    ) -> tuple[Record, CosignerError | None, bool]:
        rec = ledger.load(tx, approval_id, lock=True)
        if rec is None or (tenant is not None and rec.tenant != tenant):
            raise ApprovalNotFound(f"no approval {approval_id} for this caller")
        now = self.clock()
        if once is not None and not ledger.mark_once(tx, *once, now):
            return rec, None, False
        try:
            if check is not None:
                check(rec)
            if rec.closed:
                raise closed_error(rec)
        except CosignerError as exc:
            if not audit_refusal:
                raise
            rec = ledger.append(
                tx,
                rec,
                now,
                [
                    Event(
                        "decision_refused",
                        actor_of(decided_by),
                        {"code": exc.code.value, "message": exc.message, "wanted": to.value},
                    )
                ],
            )
            return rec, exc, False
        refusal: CosignerError | None = None
        events: list[Event] = []
        if rec.expires_at <= now and to is not ApprovalStatus.EXPIRED:
            # A late answer never decides: the approval expires now instead.
            refusal = ApprovalExpired(
                f"approval {rec.id} expired before this answer; expiry means deny and nothing was done",
                status="expired",
            )
            events.append(
                Event(
                    "decision_refused",
                    actor_of(decided_by),
                    {"code": refusal.code.value, "message": refusal.message, "wanted": to.value},
                )
            )
            to, decided_by, comment = ApprovalStatus.EXPIRED, TimeoutDecider(), None
        if not allowed(rec.status, to):
            raise closed_error(rec)
        events.append(Event(to.value, actor_of(decided_by), {"comment": comment}))
        rec = ledger.append(
            tx,
            rec,
            now,
            events,
            {"status": to.value, "decided_at": now, "decided_by": stored(decided_by), "comment": comment},
            only_pending=True,
        )
        if rec.callback_url:
            self._queue_callback(tx, rec.id, now)
        if rec.delivered is not None:
            jobs.queue(tx, JobKind.SHOW, rec.id, {}, now, now + 3600)
        if run_grant is not None and to is ApprovalStatus.APPROVED:
            ledger.grant_for_run(tx, rec, run_grant, now)
        ledger.notify_closed(tx, self.db.schema, rec.id)
        return rec, refusal, True

    def _closed(self, rec: Record) -> None:
        self.metrics.closed(rec.status.value, rec.created_at, rec.decided_at or self.clock())
        log.info(
            "approval closed", extra={"approval_id": rec.id, "tenant": rec.tenant, "status": rec.status.value}
        )
        self.notifier.publish(rec.id, rec)
        if rec.callback_url or rec.delivered is not None:
            self.jobs_wakeup.set()

    async def expire(self, approval_id: str) -> bool:
        """Close a pending approval whose time is up; False if it was not due or closed."""

        def due(rec: Record) -> None:
            if rec.expires_at > self.clock():
                raise InvalidRequest("not due")

        try:
            await self._close(approval_id, ApprovalStatus.EXPIRED, TimeoutDecider(), check=due)
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
        return await self._close(approval_id, ApprovalStatus.CANCELLED, AgentDecider(), tenant=tenant)

    async def dashboard_decide(self, tenant: str, approval_id: str, req: DecisionRequest) -> Record:
        """The tenant's app decides on behalf of its signed-in user."""
        to = ApprovalStatus.APPROVED if req.decision == "approve" else ApprovalStatus.DENIED
        return await self._close(
            approval_id,
            to,
            PersonDecider(surface=SurfaceType.DASHBOARD, userId=req.userId),
            comment=req.comment,
            tenant=tenant,
            audit_refusal=True,
            check=lambda rec: check_dashboard(rec, req.userId),
        )

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        """Deny a pending approval because its surface failed; no-op if already closed."""
        try:
            await self._close(approval_id, ApprovalStatus.DENIED, SystemDecider(code=code), comment=message)
        except (AlreadyDecided, ApprovalExpired, ApprovalNotFound):
            return

    async def report_result(self, tenant: str, approval_id: str, report: ResultReport) -> Record:
        """Put what the executed call returned on the audit record (redacted)."""
        json_limits(report.result, "result")

        def step(tx: Tx) -> Record:
            rec = ledger.load(tx, approval_id, lock=True)
            if rec is None or rec.tenant != tenant:
                raise ApprovalNotFound(f"no approval {approval_id} for this API key")
            if rec.status is ApprovalStatus.PENDING:
                raise ApprovalPending(
                    f"approval {rec.id} is pending; run the call only once it is approved, "
                    "then report its result",
                    status=rec.status.value,
                )
            if rec.status is not ApprovalStatus.APPROVED:
                raise AlreadyDecided(
                    f"approval {rec.id} is {rec.status.value}; only an approved "
                    "call can have run, so there is no result to record",
                    status=rec.status.value,
                )
            # The tool's own redact paths too: a result often echoes the call's parameters,
            # and an error message can quote a card number or a key.
            paths = self.policy.rule_for(tenant, rec.tool_name).redact
            return ledger.append(
                tx,
                rec,
                self.clock(),
                [
                    Event(
                        "result",
                        {"kind": "agent"},
                        {
                            "outcome": report.outcome,
                            "result": redact(report.result, paths),
                            "error": redact(report.error),
                        },
                    )
                ],
            )

        return await self.db.run_write(step)

    async def audit_trail(self, tenant: str | None, approval_id: str) -> list[Any]:
        """Every audit row of one approval, oldest first."""
        await self.record(approval_id, tenant)
        return await self.db.run_read(lambda tx: ledger.events_of(tx, approval_id))
