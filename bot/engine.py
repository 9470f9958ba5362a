"""The engine: creates approvals by policy, closes them through one transition, answers waiters.

Every change of `status` goes through `Engine._close`, whose UPDATE is conditional on
`status = 'pending'`: of any number of concurrent answers exactly one wins and the rest
get `AlreadyDecided`. The same transaction appends the audit events, queues the callback
and the card update, and (on PostgreSQL) notifies the other replicas.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.audit import GENESIS, Event, chain_rows
from bot.grants import GrantSigner
from bot.metrics import Metrics
from bot.notifier import CHANNEL, Notifier
from bot.policy import Policy, ToolRule
from bot.records import Record, delivered_to_json, delivery_key, route_to_json
from bot.redaction import REDACTED, digest, measure, redact
from bot.routing import SmsSender, route_for
from contracts.enums import ApprovalMode, ApprovalStatus, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalNotFound,
    CosignerError,
    InvalidRequest,
    NotAnApprover,
    ParametersMismatch,
    PermissionDenied,
    ToolCallCapExceeded,
    WrongConversation,
    WrongTenant,
)
from contracts.ports import Answer, ApprovalCard, Delivered, Placed, SlackRoute, SmsRoute
from contracts.wire import AdmitRequest, ApprovalRequest, DecisionRequest, ResultReport
from storage.database import Database
from storage.tables import approvals, audit_events, flags, jobs, run_grants

log = logging.getLogger("cosigner.engine")

MAX_PARAMETER_BYTES = 64 * 1024
MAX_PARAMETER_DEPTH = 20
_FINAL = {
    ApprovalStatus.PENDING: {ApprovalStatus.APPROVED, ApprovalStatus.DENIED,
                             ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED},
}


def new_id(prefix: str) -> str:
    """A random, URL-safe identifier with a readable prefix."""
    return f"{prefix}_{secrets.token_urlsafe(15)}"


def allowed(src: ApprovalStatus, dst: ApprovalStatus) -> bool:
    """The transition table: only a pending approval may close, and only once."""
    return dst in _FINAL.get(src, set())


def closed_error(rec: Record) -> CosignerError:
    """The refusal for an answer that reached a closed approval, naming its state."""
    if rec.status is ApprovalStatus.EXPIRED:
        return ApprovalExpired(f"approval {rec.id} expired; expiry means deny and nothing "
                               "was done. Ask the agent to request it again.", status="expired")
    return AlreadyDecided(f"approval {rec.id} is already {rec.status.value}; a closed request "
                          "never changes.", status=rec.status.value)


class Engine:
    """The approval lifecycle; also the `ApprovalDesk` that surfaces answer through."""

    def __init__(self, db: Database, policy: Policy, signer: GrantSigner, *,
                 metrics: Metrics, sms_sender: SmsSender | None = None,
                 notifier: Notifier | None = None, surfaces: Sequence[str] = (),
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.policy = policy
        self.signer = signer
        self.metrics = metrics
        self.sms_sender = sms_sender or SmsSender()
        self.surfaces = set(surfaces) | {"dashboard"}
        self.clock = clock
        self.notifier = notifier or Notifier()
        self.jobs_wakeup = asyncio.Event()
        self.expiry_wakeup = asyncio.Event()
        self._listeners: list[Callable[[str], None]] = []
        self.notify_channel = f"{CHANNEL}_{db.schema}" if db.schema else CHANNEL

    # --- wiring -----------------------------------------------------------------

    def on_close(self, listener: Callable[[str], None]) -> None:
        """Call `listener(approval_id)` after any approval closes in this process."""
        self._listeners.append(listener)

    @property
    def grant_ttl(self) -> float:
        """How long a grant stays valid after the decision."""
        return self.policy.defaults.grant_ttl

    # --- reading ----------------------------------------------------------------

    async def _load(self, conn: AsyncConnection, approval_id: str, *,
                    lock: bool = False) -> Record | None:
        q = sa.select(approvals).where(approvals.c.id == approval_id)
        if lock and not self.db.is_sqlite:
            q = q.with_for_update()
        row = (await conn.execute(q)).first()
        return Record.from_row(row) if row else None

    async def record(self, approval_id: str, tenant: str | None = None) -> Record:
        """The approval, if it belongs to `tenant` (None: any tenant)."""
        async with self.db.read() as conn:
            rec = await self._load(conn, approval_id)
        if rec is None or (tenant is not None and rec.tenant != tenant):
            raise ApprovalNotFound(f"no approval {approval_id} for this API key; check the id "
                                   "and that you use the key of the tenant that created it")
        return rec

    def body(self, rec: Record) -> dict[str, Any]:
        """The wire body for GET: `approval_start` while pending, else the decision."""
        if rec.closed:
            return rec.decision_body(self.signer, self.grant_ttl)
        return rec.start_body()

    async def wait(self, tenant: str, approval_id: str, seconds: float) -> Record:
        """Return once the approval closes or `seconds` pass (push, with a slow safety recheck)."""
        deadline = self.clock() + seconds
        while True:
            fut = self.notifier.subscribe(approval_id)
            try:
                rec = await self.record(approval_id, tenant)
                remaining = deadline - self.clock()
                if rec.closed or remaining <= 0:
                    return rec
                if rec.expires_at <= self.clock():
                    await self.expire(rec.id)
                    continue
                timeout = min(remaining, 5.0, max(rec.expires_at - self.clock(), 0) + 0.05)
                try:
                    await asyncio.wait_for(asyncio.shield(fut), timeout)
                except TimeoutError:
                    pass
            finally:
                self.notifier.unsubscribe(approval_id, fut)

    # --- creating ---------------------------------------------------------------

    def _check_parameters(self, parameters: Mapping[str, Any]) -> None:
        if measure(parameters, MAX_PARAMETER_DEPTH) > MAX_PARAMETER_DEPTH:
            raise InvalidRequest(f"parameters nest deeper than {MAX_PARAMETER_DEPTH} levels; "
                                 "flatten them", field="parameters")
        try:
            size = len(json.dumps(parameters, separators=(",", ":"), allow_nan=False))
        except ValueError as exc:
            raise InvalidRequest("parameters must be JSON without NaN or Infinity",
                                 field="parameters") from exc
        if size > MAX_PARAMETER_BYTES:
            raise InvalidRequest(f"parameters are {size} bytes; the limit is "
                                 f"{MAX_PARAMETER_BYTES}", field="parameters")

    def _check_surface_tenant(self, tenant: str, surface: Any) -> None:
        if surface.type != "slack":
            return
        tpol = self.policy.tenant(tenant)
        mine = {t for t in (tpol.slack_team, tpol.slack_enterprise) if t}
        if surface.teamId not in mine and (surface.enterpriseId or "") not in mine:
            raise WrongTenant(f"surface.teamId {surface.teamId} is not a Slack workspace of "
                              f"tenant {tenant}; set slack_team (or slack_enterprise) in "
                              f"[tenants.{tenant}]", field="surface.teamId")

    async def admit(self, tenant: str, req: AdmitRequest) -> None:
        """Refuse a run whose gated tools need a person the surface cannot host."""
        from contracts.errors import ApprovalModeUnsupported

        needing: list[str] = []
        messages: list[str] = []
        rules: list[str] = []
        self._check_surface_tenant(tenant, req.surface)
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
                f"this run would need a person for {', '.join(needing)}, and cannot host one: "
                + messages[0], policy=rules, tools=needing,
                surface=req.surface.type)

    async def create(self, tenant: str, req: ApprovalRequest) -> tuple[int, dict[str, Any]]:
        """Handle `POST /v1/approvals`; returns (HTTP status, body)."""
        self._check_parameters(req.parameters)
        self._check_surface_tenant(tenant, req.surface)
        rule = self.policy.rule_for(tenant, req.toolName)
        dig = digest(req.parameters)
        shown = redact(req.parameters, rule.redact)
        for _attempt in range(3):
            try:
                return await self._create(tenant, req, rule, dig, shown)
            except sa.exc.IntegrityError:
                continue  # a concurrent create of the same call won; read its result
        raise InvalidRequest("could not create the approval; retry the same request")

    async def _create(self, tenant: str, req: ApprovalRequest, rule: ToolRule, dig: str,
                      shown: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        now = self.clock()
        mode = rule.mode
        async with self.db.write() as conn:
            existing = (await conn.execute(sa.select(approvals).where(
                approvals.c.tenant == tenant, approvals.c.execution_id == req.executionId,
                approvals.c.tool_call_id == req.toolCallId))).first()
            if existing is not None:
                return self._replay(Record.from_row(existing), req, dig)
            decided_by: dict[str, Any] | None = None
            route = None
            if rule.deny:
                decided_by = {"kind": "policy", "rule": f"{rule.source}.deny"}
                status = ApprovalStatus.DENIED
            elif mode is ApprovalMode.NONE:
                decided_by = {"kind": "policy", "rule": f"{rule.describe()}"}
                status = ApprovalStatus.APPROVED
            else:
                await self._check_cap(conn, tenant, req.executionId)
                decided_by = await self._policy_approval(conn, tenant, req, rule)
                if decided_by is not None:
                    status = ApprovalStatus.APPROVED
                else:
                    route = route_for(self.policy, tenant, rule, req.surface, self.surfaces,
                                      self.sms_sender)
                    status = ApprovalStatus.PENDING
            timeout = self.policy.timeout_for(rule, route.surface if route else
                                              req.surface.type, req.timeoutSeconds)
            approval_id = new_id("apv")
            short_code = await self._short_code(conn, route) if route else "0000"
            events = [Event("requested", {"kind": "agent", "tenant": tenant},
                            {"executionId": req.executionId, "toolCallId": req.toolCallId,
                             "toolName": req.toolName, "parameters": shown,
                             "parametersDigest": dig, "reason": req.reason,
                             "surface": req.surface.model_dump(mode="json"),
                             "policy": rule.describe(), "mode": mode.value,
                             "route": json.loads(route_to_json(route)) if route else None})]
            if status is not ApprovalStatus.PENDING:
                events.append(Event(status.value, decided_by or {}, {"by": "policy"}))
            rows, seq, head = chain_rows(approval_id, tenant, 0, GENESIS, now, events)
            values = {
                "id": approval_id, "tenant": tenant, "execution_id": req.executionId,
                "tool_call_id": req.toolCallId, "tool_name": req.toolName,
                "kind": rule.kind.value, "mode": mode.value, "status": status.value,
                "parameters": json.dumps(shown, separators=(",", ":")),
                "parameters_digest": dig, "reason": req.reason,
                "surface": req.surface.model_dump_json(),
                "route": route_to_json(route) if route else None,
                "delivery_key": delivery_key(route) if route else None,
                "short_code": short_code, "policy_rule": rule.describe(),
                "callback_url": str(req.callbackUrl) if req.callbackUrl else None,
                "created_at": now, "expires_at": now + timeout,
                "decided_at": None if status is ApprovalStatus.PENDING else now,
                "decided_by": json.dumps(decided_by) if decided_by else None,
                "audit_seq": seq, "audit_head": head,
            }
            await conn.execute(approvals.insert().values(**values))
            await conn.execute(audit_events.insert(), rows)
            if route is not None and route.surface != "dashboard":
                await self._queue(conn, "deliver", approval_id, {}, now, now + 120)
            if status is not ApprovalStatus.PENDING and values["callback_url"]:
                await self._queue_callback(conn, approval_id, now)
        rec = Record.from_row(_Row(values))
        self.metrics.created(status.value)
        log.info("approval created", extra={"approval_id": approval_id, "tenant": tenant,
                                             "tool": req.toolName, "status": status.value})
        if route is not None and route.surface != "dashboard":
            self.jobs_wakeup.set()
        if status is ApprovalStatus.PENDING:
            return 201, rec.start_body()
        if values["callback_url"]:
            self.jobs_wakeup.set()
        if rule.deny:
            raise PermissionDenied(
                rule.deny_reason or f"{rule.source} denies {req.toolName} for this tenant",
                policy=rule.source, approvalId=approval_id)
        return 200, rec.decision_body(self.signer, self.grant_ttl)

    def _replay(self, rec: Record, req: ApprovalRequest, dig: str) -> tuple[int, dict[str, Any]]:
        if rec.digest != dig or rec.tool_name != req.toolName:
            raise ParametersMismatch(
                f"executionId {req.executionId} + toolCallId {req.toolCallId} was already used "
                f"for {rec.tool_name} with other parameters ({rec.digest}); use a new "
                "toolCallId for a different call", approvalId=rec.id)
        if not rec.closed:
            return 201, rec.start_body()
        if (rec.status is ApprovalStatus.DENIED and rec.decided_by
                and rec.decided_by.get("rule", "").endswith(".deny")):
            raise PermissionDenied(f"{rec.decided_by['rule']} denies {rec.tool_name}",
                                   policy=rec.decided_by["rule"], approvalId=rec.id)
        return 200, rec.decision_body(self.signer, self.grant_ttl)

    async def _check_cap(self, conn: AsyncConnection, tenant: str, execution_id: str) -> None:
        cap = self.policy.max_gated_calls(tenant)
        used = (await conn.execute(sa.select(sa.func.count()).select_from(approvals).where(
            approvals.c.tenant == tenant, approvals.c.execution_id == execution_id,
            approvals.c.mode != ApprovalMode.NONE.value))).scalar_one()
        if used >= cap:
            raise ToolCallCapExceeded(
                f"execution {execution_id} has made {used} gated calls; the cap is {cap} "
                "(defaults.max_gated_calls_per_execution). Start a new execution or raise the "
                "cap in the policy.", limit=cap)

    async def _policy_approval(self, conn: AsyncConnection, tenant: str, req: ApprovalRequest,
                               rule: ToolRule) -> dict[str, Any] | None:
        if rule.allow_below is not None:
            value = _lookup(req.parameters, rule.allow_below.parameter)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value < rule.allow_below.value:
                return {"kind": "policy", "rule": f"{rule.source}.allow_below "
                        f"({rule.allow_below.parameter} < {rule.allow_below.value:g})"}
        if rule.mode is ApprovalMode.ASK:
            grant = (await conn.execute(sa.select(run_grants).where(
                run_grants.c.tenant == tenant, run_grants.c.execution_id == req.executionId,
                run_grants.c.tool_name == req.toolName))).first()
            if grant is not None:
                return {"kind": "policy", "rule": f"approved for this run by {grant.granted_by} "
                        f"({grant.approval_id})"}
        return None

    async def _short_code(self, conn: AsyncConnection, route: Any) -> str:
        """Four digits; for SMS, unused among the number's pending requests (replies name it)."""
        if not isinstance(route, SmsRoute):
            return f"{secrets.randbelow(9000) + 1000}"
        key = delivery_key(route)
        for _ in range(20):
            code = f"{secrets.randbelow(9000) + 1000}"
            clash = (await conn.execute(sa.select(approvals.c.id).where(
                approvals.c.delivery_key == key, approvals.c.status == "pending",
                approvals.c.short_code == code).limit(1))).first()
            if clash is None:
                return code
        return f"{secrets.randbelow(900000) + 100000}"

    async def _queue(self, conn: AsyncConnection, kind: str, approval_id: str,
                     payload: Mapping[str, Any], due: float, deadline: float) -> None:
        await conn.execute(jobs.insert().values(kind=kind, approval_id=approval_id,
                                                payload=json.dumps(dict(payload)), due_at=due,
                                                deadline_at=deadline, attempts=0, locked_until=0))

    async def _queue_callback(self, conn: AsyncConnection, approval_id: str, now: float) -> None:
        await self._queue(conn, "callback", approval_id, {"delivery": new_id("dlv")}, now,
                          now + self.policy.defaults.callback_retry_window)

    # --- closing ----------------------------------------------------------------

    async def _close(self, approval_id: str, to: ApprovalStatus, decided_by: dict[str, Any],
                     *, comment: str | None = None, tenant: str | None = None,
                     check: Callable[[Record], None] | None = None,
                     audit_refusal: bool = False, run_grant: str | None = None) -> Record:
        """The one function that writes `status`."""
        refusal: CosignerError | None = None
        expired_now = False
        async with self.db.write() as conn:
            rec = await self._load(conn, approval_id, lock=True)
            if rec is None or (tenant is not None and rec.tenant != tenant):
                raise ApprovalNotFound(f"no approval {approval_id} for this caller")
            now = self.clock()
            try:
                if check is not None:
                    check(rec)
                if rec.closed:
                    raise closed_error(rec)
                if rec.expires_at <= now and to is not ApprovalStatus.EXPIRED:
                    expired_now = True
                    raise ApprovalExpired(f"approval {rec.id} expired before this answer; expiry "
                                          "means deny and nothing was done", status="expired")
            except CosignerError as exc:
                if not (audit_refusal or expired_now):
                    raise
                refusal = exc
            if refusal is not None and not expired_now:
                await self._append(conn, rec, now, [Event("decision_refused", decided_by, {
                    "code": refusal.code.value, "message": refusal.message,
                    "wanted": to.value})])
            else:
                if expired_now:
                    to, decided_by, comment = ApprovalStatus.EXPIRED, {"kind": "timeout"}, None
                if not allowed(rec.status, to):
                    raise closed_error(rec)
                events = []
                if refusal is not None:
                    events.append(Event("decision_refused", {}, {"code": refusal.code.value}))
                events.append(Event(to.value, decided_by, {"comment": comment}))
                seq, head, rows = self._chain(rec, now, events)
                result = await conn.execute(approvals.update().where(
                    approvals.c.id == rec.id, approvals.c.status == "pending",
                    approvals.c.audit_seq == rec.audit_seq).values(
                    status=to.value, decided_at=now, decided_by=json.dumps(decided_by),
                    comment=comment, audit_seq=seq, audit_head=head))
                if result.rowcount != 1:
                    raise AlreadyDecided(f"approval {rec.id} changed while deciding; it is closed")
                await conn.execute(audit_events.insert(), rows)
                if rec.callback_url:
                    await self._queue_callback(conn, rec.id, now)
                if rec.delivered is not None:
                    await self._queue(conn, "show", rec.id, {}, now, now + 3600)
                if run_grant is not None:
                    await conn.execute(_insert_ignore(self.db, run_grants, {
                        "tenant": rec.tenant, "execution_id": rec.execution_id,
                        "tool_name": rec.tool_name, "approval_id": rec.id,
                        "granted_by": run_grant, "created_at": now}))
                if not self.db.is_sqlite:
                    await conn.execute(sa.select(sa.func.pg_notify(self.notify_channel, rec.id)))
                rec = Record.from_row(_Row({**_values(rec), "status": to.value,
                                            "decided_at": now, "comment": comment,
                                            "decided_by": json.dumps(decided_by),
                                            "audit_seq": seq, "audit_head": head}))
        if refusal is not None:
            if expired_now:
                self._closed(rec)
            raise refusal
        self._closed(rec)
        return rec

    def _chain(self, rec: Record, now: float, events: list[Event]
               ) -> tuple[int, str, list[dict[str, Any]]]:
        rows, seq, head = chain_rows(rec.id, rec.tenant, rec.audit_seq, rec.audit_head, now, events)
        return seq, head, rows

    async def _append(self, conn: AsyncConnection, rec: Record, now: float,
                      events: list[Event]) -> None:
        seq, head, rows = self._chain(rec, now, events)
        result = await conn.execute(approvals.update().where(
            approvals.c.id == rec.id, approvals.c.audit_seq == rec.audit_seq).values(
            audit_seq=seq, audit_head=head))
        if result.rowcount != 1:
            raise AlreadyDecided(f"approval {rec.id} changed while recording; retry")
        await conn.execute(audit_events.insert(), rows)

    def _closed(self, rec: Record) -> None:
        self.metrics.closed(rec.status.value, rec.created_at, rec.decided_at or self.clock())
        log.info("approval closed", extra={"approval_id": rec.id, "tenant": rec.tenant,
                                           "status": rec.status.value})
        self.notifier.publish(rec.id)
        for listener in self._listeners:
            listener(rec.id)
        if rec.callback_url or rec.delivered is not None:
            self.jobs_wakeup.set()

    async def expire(self, approval_id: str) -> bool:
        """Close a pending approval whose time is up; False if it was already closed."""
        def due(rec: Record) -> None:
            if rec.expires_at > self.clock():
                raise InvalidRequest("not due")
        try:
            await self._close(approval_id, ApprovalStatus.EXPIRED, {"kind": "timeout"}, check=due)
        except CosignerError:
            return False
        return True

    async def expire_due(self, limit: int = 200) -> int:
        """Expire every pending approval past its time, including ones that expired while
        the server was down. Safe on several replicas: each expiry happens once."""
        async with self.db.read() as conn:
            ids = (await conn.execute(sa.select(approvals.c.id).where(
                approvals.c.status == "pending", approvals.c.expires_at <= self.clock())
                .order_by(approvals.c.expires_at).limit(limit))).scalars().all()
        done = 0
        for approval_id in ids:
            done += await self.expire(approval_id)
        return done

    async def next_expiry(self) -> float | None:
        """When the next pending approval expires."""
        async with self.db.read() as conn:
            value = (await conn.execute(sa.select(sa.func.min(approvals.c.expires_at)).where(
                approvals.c.status == "pending"))).scalar_one()
        return float(value) if value is not None else None

    async def cancel(self, tenant: str, approval_id: str) -> Record:
        """The agent withdraws its request."""
        return await self._close(approval_id, ApprovalStatus.CANCELLED, {"kind": "agent"},
                                 tenant=tenant)

    async def dashboard_decide(self, tenant: str, approval_id: str, req: DecisionRequest) -> Record:
        """The tenant's app decides on behalf of its signed-in user."""
        def check(rec: Record) -> None:
            if rec.route is None or rec.route.surface != "dashboard":
                where = rec.route.surface if rec.route else "nobody (decided by policy)"
                raise WrongConversation(f"approval {rec.id} was delivered to {where}; only "
                                        "dashboard requests are decided through this endpoint")
            if req.userId not in rec.route.approvers:
                raise NotAnApprover(f"user {req.userId} is not an approver of {rec.id}")
        to = ApprovalStatus.APPROVED if req.decision == "approve" else ApprovalStatus.DENIED
        return await self._close(approval_id, to, {"kind": "person", "surface": "dashboard",
                                                   "userId": req.userId},
                                 comment=req.comment, tenant=tenant, check=check,
                                 audit_refusal=True)

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        """Deny a pending approval because its surface failed; no-op if already closed."""
        try:
            await self._close(approval_id, ApprovalStatus.DENIED, {"kind": "system", "code": code},
                              comment=message)
        except (AlreadyDecided, ApprovalExpired, ApprovalNotFound):
            return

    async def report_result(self, tenant: str, approval_id: str, report: ResultReport) -> Record:
        """Put what the executed call returned on the audit record (redacted)."""
        async with self.db.write() as conn:
            rec = await self._load(conn, approval_id, lock=True)
            if rec is None or rec.tenant != tenant:
                raise ApprovalNotFound(f"no approval {approval_id} for this API key")
            if rec.status is not ApprovalStatus.APPROVED:
                raise AlreadyDecided(f"approval {rec.id} is {rec.status.value}; only an approved "
                                     "call can have run, so there is no result to record",
                                     status=rec.status.value)
            self._check_parameters({"result": report.result})
            await self._append(conn, rec, self.clock(), [Event("result", {"kind": "agent"}, {
                "outcome": report.outcome, "result": redact(report.result),
                "error": report.error})])
        return rec

    async def audit_trail(self, tenant: str | None, approval_id: str) -> list[Any]:
        """Every audit row of one approval, oldest first."""
        await self.record(approval_id, tenant)
        async with self.db.read() as conn:
            return list((await conn.execute(sa.select(audit_events).where(
                audit_events.c.approval_id == approval_id).order_by(audit_events.c.seq))).all())

    # --- the desk surfaces answer through -----------------------------------------

    async def answer(self, answer: Answer) -> ApprovalCard:
        """Check an answer from Slack or SMS and apply it; refusals are audited."""
        actor = {"kind": "person", "surface": answer.surface, "userId": answer.actor}
        if answer.surface == "slack" and (answer.actor_org or answer.org):
            actor["teamId"] = answer.actor_org or answer.org or ""
        if answer.verdict is Verdict.DENY:
            to = ApprovalStatus.DENIED
        else:
            to = ApprovalStatus.APPROVED

        def check(rec: Record) -> None:
            _check_answer(rec, answer)

        run_grant = None
        if answer.verdict is Verdict.APPROVE_FOR_RUN:
            run_grant = f"{answer.surface}:{answer.actor}"
        rec = await self._close(answer.approval_id, to, actor, comment=answer.comment,
                                check=check, audit_refusal=True, run_grant=run_grant)
        return rec.card()

    async def placed(self, approval_id: str) -> Placed | None:
        """An approval with its route and receipt, whatever its tenant."""
        async with self.db.read() as conn:
            rec = await self._load(conn, approval_id)
        return rec.placed() if rec else None

    async def _by_number(self, to_number: str, from_number: str, *, pending: bool,
                         limit: int) -> list[Placed]:
        q = sa.select(approvals).where(approvals.c.delivery_key == f"sms:{to_number}")
        if pending:
            q = q.where(approvals.c.status == "pending")
        q = q.order_by(approvals.c.created_at.desc()).limit(limit)
        async with self.db.read() as conn:
            rows = (await conn.execute(q)).all()
        out = []
        for row in rows:
            rec = Record.from_row(row)
            placed = rec.placed()
            if placed is not None and from_number in placed.route.approvers:
                out.append(placed)
        return out

    async def pending_for_number(self, to_number: str, from_number: str) -> Sequence[Placed]:
        """Pending SMS approvals sent from `to_number` (or service) to approver `from_number`."""
        return await self._by_number(to_number, from_number, pending=True, limit=200)

    async def latest_for_number(self, to_number: str, from_number: str) -> Placed | None:
        """The newest SMS approval between these numbers, in any state."""
        found = await self._by_number(to_number, from_number, pending=False, limit=50)
        return found[0] if found else None

    async def delivered(self, approval_id: str, receipt: Delivered) -> None:
        """Store a delivery receipt; if the approval closed meanwhile, queue the card update."""
        async with self.db.write() as conn:
            rec = await self._load(conn, approval_id, lock=True)
            if rec is None:
                return
            now = self.clock()
            await conn.execute(approvals.update().where(approvals.c.id == approval_id)
                               .values(delivered=delivered_to_json(receipt)))
            rec = Record.from_row(_Row({**_values(rec), "delivered": delivered_to_json(receipt)}))
            await self._append(conn, rec, now, [Event("delivered", {"kind": "system"}, {
                "surface": receipt.surface, "conversation": receipt.conversation,
                "messages": list(receipt.message_refs)})])
            if rec.closed:
                await self._queue(conn, "show", rec.id, {}, now, now + 3600)
        if rec.closed:
            self.jobs_wakeup.set()

    async def note(self, approval_id: str, event: str, data: Mapping[str, Any]) -> None:
        """Append a surface event to the approval's audit chain."""
        async with self.db.write() as conn:
            rec = await self._load(conn, approval_id, lock=True)
            if rec is None:
                return
            await self._append(conn, rec, self.clock(), [Event(event, {"kind": "surface"},
                                                               redact(dict(data)))])

    async def mark_once(self, namespace: str, key: str) -> bool:
        """True the first time `key` is seen in `namespace`."""
        try:
            async with self.db.write() as conn:
                await conn.execute(flags.insert().values(namespace=namespace, key=key, value="1",
                                                         created_at=self.clock()))
        except sa.exc.IntegrityError:
            return False
        return True

    async def set_flag(self, namespace: str, key: str, value: str | None) -> None:
        """Set or clear a durable flag."""
        async with self.db.write() as conn:
            await conn.execute(flags.delete().where(flags.c.namespace == namespace,
                                                    flags.c.key == key))
            if value is not None:
                await conn.execute(flags.insert().values(namespace=namespace, key=key,
                                                         value=value, created_at=self.clock()))

    async def get_flag(self, namespace: str, key: str) -> str | None:
        """Read a durable flag."""
        async with self.db.read() as conn:
            return (await conn.execute(sa.select(flags.c.value).where(
                flags.c.namespace == namespace, flags.c.key == key))).scalar_one_or_none()

    def tenant_for_org(self, surface: str, org: str) -> str | None:
        """The tenant whose policy names this Slack team/enterprise or SMS number."""
        return self.policy.tenant_for_org(surface, org)


def _check_answer(rec: Record, a: Answer) -> None:
    route, got = rec.route, rec.delivered
    if route is None or route.surface != a.surface:
        where = route.surface if route else "nobody"
        raise WrongConversation(f"approval {rec.id} was delivered to {where}, not {a.surface}")
    if isinstance(route, SlackRoute):
        orgs = {route.team_id, route.enterprise_id} - {None}
    elif isinstance(route, SmsRoute):
        orgs = {route.from_number, route.messaging_service_sid} - {None}
    else:
        orgs = set()
    if a.org not in orgs and (a.enterprise_id is None or a.enterprise_id not in orgs):
        raise WrongTenant(f"this answer came from {a.org}, which is not where approval {rec.id} "
                          "was delivered")
    if got is None:
        raise WrongConversation(f"approval {rec.id} has not been delivered yet")
    if got.app_id and a.app_id != got.app_id:
        raise WrongConversation("this answer came through another Slack app")
    if a.conversation != got.conversation:
        raise WrongConversation(f"approval {rec.id} was not posted in this conversation")
    if isinstance(route, SlackRoute) and a.message_ref not in got.message_refs:
        raise WrongConversation(f"this message is not the card of approval {rec.id}")
    if isinstance(route, SlackRoute) and a.actor_org is not None:
        teams = set(route.approver_teams)
        if a.actor_org not in teams and (a.enterprise_id is None or a.enterprise_id not in teams):
            raise NotAnApprover(f"people from workspace {a.actor_org} cannot approve requests "
                                f"of this tenant (Slack Connect)")
    if a.actor not in route.approvers:
        raise NotAnApprover(f"{a.actor} is not an approver of approval {rec.id}")
    if a.verdict is Verdict.APPROVE_FOR_RUN and rec.mode is not ApprovalMode.ASK:
        raise InvalidRequest("approve for this run is offered only for tools in mode ask")


def _lookup(parameters: Mapping[str, Any], path: str) -> Any:
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class _Row:
    """Attribute access over a dict, so a freshly written row builds a `Record`."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update({"delivered": None, "decided_at": None, "decided_by": None,
                              "comment": None, "route": None, "delivery_key": None})
        self.__dict__.update(values)


def _values(rec: Record) -> dict[str, Any]:
    from bot.records import route_to_json as r2j
    return {
        "id": rec.id, "tenant": rec.tenant, "execution_id": rec.execution_id,
        "tool_call_id": rec.tool_call_id, "tool_name": rec.tool_name, "kind": rec.kind.value,
        "mode": rec.mode.value, "status": rec.status.value,
        "parameters": json.dumps(rec.parameters), "parameters_digest": rec.digest,
        "reason": rec.reason, "surface": json.dumps(rec.surface),
        "route": r2j(rec.route) if rec.route else None,
        "delivered": delivered_to_json(rec.delivered) if rec.delivered else None,
        "short_code": rec.short_code, "policy_rule": rec.policy_rule,
        "callback_url": rec.callback_url, "created_at": rec.created_at,
        "expires_at": rec.expires_at, "decided_at": rec.decided_at,
        "decided_by": json.dumps(rec.decided_by) if rec.decided_by else None,
        "comment": rec.comment, "audit_seq": rec.audit_seq, "audit_head": rec.audit_head,
    }


def _insert_ignore(db: Database, table: sa.Table, values: Mapping[str, Any]) -> Any:
    if db.is_sqlite:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert
        return sqlite_insert(table).values(**values).on_conflict_do_nothing()
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    return pg_insert(table).values(**values).on_conflict_do_nothing()


__all__ = ["REDACTED", "Engine", "allowed", "closed_error", "new_id"]
