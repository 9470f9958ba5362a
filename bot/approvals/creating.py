"""Creating approvals: load → prepare → write → side effects, for every kind of request.

`Engine.create` and `Engine.admit` are these functions: what needs I/O before the decision
(the agent's schema checked on a worker thread, whoever is on call looked up, the
parameters sealed) is `load`; everything decided without I/O is `bot.approvals.prepare`;
the write is one call into storage (`Database.create` running `create_tx`); after it, the
waiters, workers, metrics and logs are told. An operation's proposal
(`bot.operations.proposals`) calls `prepare_request` and `create_prepared` itself, around
asking its application to prepare the call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.approvals import agent_schema, coalescing, edits
from bot.approvals import denials as standing
from bot.approvals.bodies import Start, decision_body, start_body
from bot.approvals.intake import Created, create_tx
from bot.approvals.prepare import Given, Prepared, Sealed, needs_on_call, prepare, rule_of
from bot.observability.activity import Activity, Step
from bot.oncall import Fallback, Found
from bot.policy import ToolRule, rule_on, surface_belongs
from bot.policy.oncall_refs import OnCallRef
from bot.policy.thresholds import above
from contracts.answers import Decision, PolicyDecider
from contracts.denials import Denial
from contracts.enums import ApprovalStatus
from contracts.errors import ApprovalModeUnsupported, InvalidRequest, PermissionDenied
from contracts.names import fold
from contracts.reach import Channel, delivered_by_worker
from contracts.wire import AdmitRequest, ApprovalRequest
from storage.allowances import UsedUp
from storage.database import Conflict
from storage.operations import OperationRecord
from storage.records import Record

if TYPE_CHECKING:
    from bot.approvals.engine import Engine

log = logging.getLogger("cosigner.engine")


async def create(
    engine: Engine,
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
    prepared = await prepare_request(
        engine, tenant, req, rule=rule, contract=contract, approval_id=approval_id, agent=agent
    )
    return await create_prepared(engine, prepared)


async def prepare_request(
    engine: Engine,
    tenant: str,
    req: ApprovalRequest,
    *,
    rule: ToolRule | None = None,
    contract: OperationRecord | None = None,
    approval_id: str | None = None,
    agent: str = "",
) -> Prepared:
    """Load what the request is prepared on, then `prepare` it (nothing is stored)."""
    await agent_schema.check_schema(req.parametersSchema)
    first = rule_of(engine.policy, tenant, req, rule)
    found = await on_call(engine, tenant, first.oncall) if needs_on_call(first) else None
    handoff = None
    if first.handoff is not None and engine.handoffs is not None:
        handoff = engine.handoffs.sealed(tenant, req)
    edit = edits.sealed_for_edit(req, engine.seal, tenant) if contract is None else None
    prepared = prepare(
        Given(
            tenant,
            req,
            engine.policy,
            engine.clock(),
            rule=rule,
            shadow=engine.shadow,
            surfaces=engine.surfaces,
            sms=engine.sms_sender,
            callback_allow=engine.callback_allow,
            found=found,
            sealed=Sealed(handoff, edit),
            contract=contract,
            approval_id=approval_id,
            agent=agent,
            trace=engine.tracing.begin(),
        )
    )
    if prepared.shadow_failed is not None:
        failed = prepared.shadow_failed
        log.error("the shadow policy failed to decide", extra={"tool": req.toolName}, exc_info=failed)
    return prepared


async def create_prepared(engine: Engine, prepared: Prepared) -> tuple[int, Start | Decision]:
    """Write the prepared request (`create_tx`), tell whoever waits on it, and answer."""
    it = prepared.intake
    for _attempt in range(3):
        try:
            # Storage chooses how it runs, and keeps the new pending approval at hand.
            created: Created = await engine.db.create(lambda tx: create_tx(tx, it, engine.clock()))
        except (Conflict, UsedUp):
            continue  # a concurrent create of the same call won (read its result), or
            # took a standing allow's last use (read what is left)
        if created.coalesced and created.record.expires_at <= engine.clock():
            await engine.expire(created.record.id)  # its time is up: this one is a new question
            continue
        break
    else:
        raise InvalidRequest("could not create the approval; retry the same request")
    rec = created.record
    if created.coalesced:
        return await _coalesced(engine, rec, it.req)
    if created.replay:
        await engine.denials.refuse_again(rec)
        return _replay(engine, rec)
    if rec.closed:
        engine.tracing.closed(rec)
    if it.shadow is not None:
        _shadow_differs(engine, rec, it.shadow)
    engine.metrics.created(rec.status.value)
    log.debug(
        "approval created",
        extra={
            "approval_id": rec.id,
            "tenant": it.tenant,
            "tool": rec.tool_name,
            "status": rec.status.value,
            "activity": Activity(Step.CREATED, rec),
        },
    )
    if not rec.closed:
        engine.notifier.changed()  # the inbox's live lists
    to_deliver = delivered_by_worker(rec.route) or (not rec.closed and Channel.PUSH in engine.surfaces)
    if to_deliver or (rec.closed and rec.callback_url):
        engine.wakeups.jobs.set()
    engine._execute(rec)
    if created.denied_by_policy:
        rule, ruling = it.rule, prepared.ruling
        over = above(rule, it.req.parameters)[1]
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
    return 200, engine.decision(rec)


async def admit(engine: Engine, tenant: str, req: AdmitRequest, agent: str = "") -> list[Denial]:
    """Refuse a run whose gated tools need a person the surface cannot host; report the
    standing denies its tools would be refused by."""
    held: list[Denial] = []
    needing: list[str] = []
    messages: list[str] = []
    rules: list[str] = []
    surface_belongs(engine.policy, tenant, req.surface)
    for tool in dict.fromkeys(req.tools):
        # No parameters yet: a threshold cannot let the call through before it is made.
        ruling = rule_on(
            engine.policy,
            tenant,
            tool,
            {},
            req.surface,
            enabled=engine.surfaces,
            sms=engine.sms_sender,
            agent=agent,
            now=engine.clock(),
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
        found = await engine.denials.held(tenant, tool, ruling.mode, route, req.surface.model_dump())
        held += [found] if found is not None else []
    if needing:
        raise ApprovalModeUnsupported(
            f"this run would need a person for {', '.join(needing)}, and cannot host one: " + messages[0],
            policy=rules,
            tools=needing,
            surface=req.surface.type,
        )
    return held


async def on_call(engine: Engine, tenant: str, refs: Sequence[OnCallRef]) -> Found:
    """Whoever is on call for `refs` and the route to them, or why nobody on call can be
    asked (then the rule's other approvers are: fail closed, never nobody)."""
    if engine.oncall is None:
        names = tuple(map(str, refs))
        return Fallback(names, "no on-call provider is configured on this server")
    return await engine.oncall.find(engine.policy, tenant, refs, engine.surfaces)


def _shadow_differs(engine: Engine, rec: Record, shadow: Mapping[str, Any]) -> None:
    """Log and count a shadow difference, once per request (a replayed call is not new)."""
    # The label names only tools a policy names: an agent sends any name it likes, and
    # each new label value would be a new time series kept for good.
    assert engine.shadow is not None
    named = engine.policy.knows(rec.tenant, rec.tool_name) or engine.shadow.knows(rec.tenant, rec.tool_name)
    label = fold(rec.tool_name) if named else "(unnamed)"
    engine.metrics.shadow_difference(label, shadow["from"], shadow["to"])
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


async def _coalesced(engine: Engine, rec: Record, req: ApprovalRequest) -> tuple[int, Start | Decision]:
    """Answer an identical request with the pending approval, its arrival audited on it."""
    now = await engine.db.run_write(lambda tx: coalescing.record(tx, rec.id, req, engine.clock()))
    rec = now or rec
    log.debug("request coalesced", extra={"approval_id": rec.id, "tenant": rec.tenant})
    if rec.closed:  # decided meanwhile: the same decision
        return 200, decision_body(rec, engine.signer, engine.grant_ttl)
    return 201, start_body(rec, coalesced=True)


def _replay(engine: Engine, rec: Record) -> tuple[int, Start | Decision]:
    if not rec.closed:
        return 201, start_body(rec)
    by = rec.decided_by
    rule = by.rule if isinstance(by, PolicyDecider) else ""
    if rec.status is ApprovalStatus.DENIED and rule.endswith(".deny"):
        raise PermissionDenied(f"{rule} denies {rec.tool_name}", policy=rule[:-5], approvalId=rec.id)
    return 200, engine.decision(rec)
