"""Taking a request in: one transaction that replays an earlier call or inserts the approval.

Whether a call is denied, approved by policy or routed to a person is decided here; what
happens to a pending approval after that is `bot.approval`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.approval import new_id, queue_callback, queue_execution, stored
from bot.bodies import actor_of
from bot.decision import Ruling
from bot.denials import decider as standing_decider
from bot.denials import held_against
from bot.policy import Policy, ToolRule
from bot.run_grants import requester_key
from bot.trace_ids import NO_TRACE, ApprovalTrace
from contracts.answers import DecidedBy, PolicyDecider
from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, JobKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported, ParametersMismatch, ToolCallCapExceeded
from contracts.names import fold
from contracts.ports import DashboardRoute, Route
from contracts.wire import ApprovalRequest
from storage import approvals as ledger
from storage import jobs, operations
from storage.audit import Event
from storage.database import Tx
from storage.denials import StandingDeny
from storage.operations import OperationRecord
from storage.records import Record, delivery_key, route_fields, route_to_json

DELIVERY_WINDOW = 120.0


@dataclass(frozen=True)
class Created:
    """What `_create_tx` decided, for the caller to answer with."""

    record: Record
    replay: bool
    denied_by_policy: bool = False
    standing: StandingDeny | None = None  # the standing deny that refused it


def create_tx(
    tx: Tx,
    policy: Policy,
    now: float,
    tenant: str,
    req: ApprovalRequest,
    rule: ToolRule,
    dig: str,
    shown: dict[str, Any],
    routed: Route | ApprovalModeUnsupported | None,
    contract: OperationRecord | None = None,
    approval_id: str | None = None,
    trace: ApprovalTrace = NO_TRACE,
    *,
    ruling: Ruling,
    handoff: str | None = None,
    shadow: dict[str, Any] | None = None,
) -> Created:
    """Insert the approval (or find the one this call made before) and queue its first jobs;
    `contract` is an operation's, prepared by its application for `approval_id`. `ruling` is
    what `bot.decision.decide` made of the call; `shadow` what a shadow policy would change."""
    row = ledger.made_before(tx, tenant, req.executionId, req.toolCallId)
    if row is not None:
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
    # Before any approval by policy: a person's standing no is never turned into a yes.
    standing = (
        None if rule.deny else held_against(tx, tenant, req.toolName, mode, routed, req.surface.model_dump())
    )
    if rule.deny:
        decided_by = PolicyDecider(rule=ruling.decided_by)
        status = ApprovalStatus.DENIED
    elif mode is ApprovalMode.NONE:
        # The key path that decided first, then what it means: "tools.lookup_order.kind: read → none".
        decided_by = PolicyDecider(rule=f"{ruling.decided_by}: {rule.kind.value} → {mode.value}")
        status = ApprovalStatus.APPROVED
    elif standing is not None:
        decided_by, status = standing_decider(standing), ApprovalStatus.DENIED
    else:
        cap = policy.max_gated_calls(tenant)
        used = ledger.gated_count(tx, tenant, req.executionId)
        if used >= cap:
            raise ToolCallCapExceeded(
                f"execution {req.executionId} has made {used} gated calls; the cap is {cap} "
                "(max_gated_calls_per_execution). Start a new execution or raise the cap "
                "in the policy.",
                limit=cap,
            )
        decided_by = policy_approval(tx, tenant, req, rule, ruling)
        if decided_by is not None:
            status, route = ApprovalStatus.APPROVED, None
        elif isinstance(routed, ApprovalModeUnsupported):
            raise routed
    if status is not ApprovalStatus.PENDING:
        route = None
    timeout = policy.timeout_for(
        rule, route.surface if route else SurfaceType(req.surface.type), req.timeoutSeconds
    )
    approval_id = approval_id or new_id("apv")
    events = [
        Event(
            AuditEvent.REQUESTED,
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
                "traceId": trace.trace_id,
                "rule": ruling.decided_by,
                "decision": ruling.label,
                **({"shadow": shadow} if shadow is not None else {}),
            },
        )
    ]
    executing = contract is not None and status is ApprovalStatus.APPROVED
    if contract is not None:
        events.append(operations.prepared_event(contract))
    if decided_by is not None:
        events.append(Event(status.value, actor_of(decided_by), {"comment": None}))
    operation = contract.to_json() if contract is not None else None
    if contract is not None and executing:
        operation, claim = operations.claimed(contract)
        events.append(claim)
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
        **trace.columns(),
        "operation": operation,
        "handoff": handoff,
    }
    rec = ledger.insert_approval(tx, values, events)
    if route is not None and not isinstance(route, DashboardRoute):
        jobs.queue(tx, JobKind.DELIVER, approval_id, {}, now, now + DELIVERY_WINDOW)
    if executing:
        queue_execution(tx, approval_id, now, policy.defaults.callback_retry_window)
    elif decided_by is not None and values["callback_url"]:
        queue_callback(tx, approval_id, now, policy.defaults.callback_retry_window)
    return Created(rec, replay=False, denied_by_policy=rule.deny, standing=standing)


def policy_approval(
    tx: Tx, tenant: str, req: ApprovalRequest, rule: ToolRule, ruling: Ruling
) -> DecidedBy | None:
    """Approve by policy: below a threshold (as `ruling` found), or an earlier 'approve for
    this run'."""
    if ruling.threshold is not None:
        return PolicyDecider(rule=ruling.threshold)
    if rule.mode is ApprovalMode.ASK:
        requester = requester_key(req.surface.model_dump())
        grant = ledger.run_grant(tx, tenant, req.executionId, fold(req.toolName), requester)
        if grant is not None:
            return PolicyDecider(rule=f"approved for this run by {grant.granted_by} ({grant.approval_id})")
    return None
