"""Taking a request in: load → weigh → write, inside one transaction.

`question` says what the call is decided on; `storage.intake.load` reads it in one call as a
typed `Snapshot`; `weigh` (pure: no database, no clock) turns call and snapshot into a
`Replay`, a `Refuse` or an `Admit`; `storage.intake.write` stores an admitted call in one
call. What happens to a pending approval after that is `bot.approvals.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.approvals.allowances import allowance_decider, covered_by, used_event
from bot.approvals.denials import decider as standing_decider
from bot.approvals.lifecycle import closing_event, new_id
from bot.approvals.run_grants import requester_key
from bot.observability import NO_TRACE, ApprovalTrace
from bot.oncall import Asked, Fallback
from bot.policy import Policy, Ruling, ToolRule
from bot.policy.allow_for import Terms
from bot.policy.follow_up_plan import Plan
from contracts.answers import DecidedBy, PolicyDecider
from contracts.audit_events import Requested as RequestedEvent
from contracts.audit_events import written
from contracts.denials import scope_of
from contracts.edits import EditState
from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, JobKind, SurfaceType
from contracts.errors import (
    ApprovalModeUnsupported,
    CosignerError,
    ParametersMismatch,
    ToolCallCapExceeded,
)
from contracts.handoff import HandoffState
from contracts.names import fold
from contracts.ports import Route
from contracts.reach import delivered_by_worker
from contracts.wire import ApprovalRequest
from storage import allowances, operations
from storage import intake as store
from storage.allowances import Scope, StandingAllow
from storage.audit import Event
from storage.denials import StandingDeny
from storage.jobs import Delivery, Queued
from storage.operations import OperationRecord
from storage.records import Record, route_fields
from storage.work import Work

DELIVERY_WINDOW = 120.0


@dataclass(frozen=True)
class Call:
    """What the intake decision reads of one call: its ids, digest and what the policy said."""

    tool_name: str
    digest: str
    execution_id: str
    tool_call_id: str
    mode: ApprovalMode
    kind: str
    deny: bool
    rule_path: str  # the key path of the rule that decided (`Ruling.decided_by`)
    threshold: str | None  # decidedBy.rule when a threshold lets the call through
    routed: Route | ApprovalModeUnsupported | None
    cap: int  # max gated calls in one execution
    block: str | None = None  # the `when` block that decided (`tools.Bash.when[1]`), if one did
    unevaluable: str | None = None  # why that block could not be evaluated: the call is asked
    # What a standing allow ("Allow for …") would have to cover; None where none may.
    allow: Terms | None = None
    requester: str = ""  # `requester_key` of the call's surface, which a standing allow names

    @classmethod
    def of(
        cls,
        policy: Policy,
        tenant: str,
        req: ApprovalRequest,
        rule: ToolRule,
        dig: str,
        ruling: Ruling,
        shown: Mapping[str, Any] | None = None,
    ) -> Call:
        """The decision's inputs for this request under `rule`, as `bot.policy.decision.decide` ruled;
        with `shown` (the redacted parameters) also what a standing allow would have to cover."""
        # Only a tool that offers "Allow for …" pays for what a standing allow is matched on.
        allow = None
        if shown is not None and ruling.rule.allow_for is not None:
            allow = covered_by(ruling, req.parameters, shown, req.surface.type)
        return cls(
            tool_name=req.toolName,
            digest=dig,
            execution_id=req.executionId,
            tool_call_id=req.toolCallId,
            mode=rule.mode,
            kind=rule.kind.value,
            deny=ruling.deny,
            rule_path=ruling.decided_by,
            threshold=ruling.threshold,
            routed=ruling.route,
            cap=policy.max_gated_calls(tenant),
            block=ruling.rule.block,
            unevaluable=ruling.unevaluable,
            allow=allow,
            requester=requester_key(req.surface.model_dump()) if allow is not None else "",
        )


@dataclass(frozen=True)
class Replay:
    """The call was made before with the same parameters: answer with what it got then."""

    record: Record


@dataclass(frozen=True)
class Refuse:
    """The call is refused and nothing is stored."""

    error: CosignerError


@dataclass(frozen=True)
class Admit:
    """Store the call: closed by policy or a standing deny, or pending on `route`."""

    status: ApprovalStatus
    decided_by: DecidedBy | None
    route: Route | None
    standing: StandingDeny | None = None  # the standing deny that refused it
    allowance: StandingAllow | None = None  # the standing allow that approved it


@dataclass(frozen=True)
class Coalesce:
    """The same question is pending already (`bot.approvals.coalescing`): answer with it."""

    record: Record


Outcome = Replay | Refuse | Admit | Coalesce


@dataclass(frozen=True)
class Created:
    """What the intake transaction did, for the caller to answer with."""

    record: Record
    replay: bool
    denied_by_policy: bool = False
    coalesced: bool = False  # the identical pending request answered this one (nothing stored)
    standing: StandingDeny | None = None  # the standing deny that refused it


def question(
    tenant: str, call: Call, surface: Mapping[str, Any], coalesce: str | None = None, now: float = 0.0
) -> store.Question:
    """What `weigh` needs of the database for `call` at `now`, and nothing it will not read;
    `coalesce` is the call's coalescing key, looked for only when the call would be asked."""
    route = call.routed if isinstance(call.routed, Route) else None
    scope = (
        None if call.deny or route is None else scope_of(tenant, call.tool_name, call.mode, route, surface)
    )
    asks = not call.deny and call.mode is not ApprovalMode.NONE
    grant = None
    if asks and call.threshold is None and call.mode is ApprovalMode.ASK:
        grant = (fold(call.tool_name), requester_key(surface))
    alike = coalesce if asks and call.threshold is None and isinstance(call.routed, Route) else None
    allowance = None
    if asks and call.threshold is None and call.allow is not None:
        allowance = Scope(tenant, fold(call.tool_name), call.requester, call.allow.key)
    return store.Question(
        tenant,
        call.execution_id,
        call.tool_call_id,
        count=asks,
        grant=grant,
        scope=scope,
        coalesce=alike,
        allowance=allowance,
        now=now,
    )


def weigh(call: Call, snap: store.Snapshot) -> Outcome:
    """Replay, refuse, or admit the call (closed by policy or pending with its route); pure."""
    earlier = snap.earlier
    if earlier is not None:
        if earlier.digest != call.digest or earlier.tool_name != call.tool_name:
            return Refuse(
                ParametersMismatch(
                    f"executionId {call.execution_id} + toolCallId {call.tool_call_id} was "
                    f"already used for {earlier.tool_name} with other parameters "
                    f"({earlier.digest}); use a new toolCallId for a different call",
                    approvalId=earlier.id,
                )
            )
        return Replay(earlier)
    if call.deny:
        return Admit(ApprovalStatus.DENIED, PolicyDecider(rule=call.rule_path), None)
    if call.mode is ApprovalMode.NONE:
        # The key path that decided first, then what it means: "tools.lookup_order.kind: read → none".
        by = PolicyDecider(rule=call.block or f"{call.rule_path}: {call.kind} → {call.mode.value}")
        return Admit(ApprovalStatus.APPROVED, by, None, snap.standing)
    # Before any approval by policy: a person's standing no is never turned into a yes.
    if snap.standing is not None:
        return Admit(ApprovalStatus.DENIED, standing_decider(snap.standing), None, snap.standing)
    if snap.gated >= call.cap:
        return Refuse(
            ToolCallCapExceeded(
                f"execution {call.execution_id} has made {snap.gated} gated calls; the cap is {call.cap} "
                "(max_gated_calls_per_execution). Start a new execution or raise the cap "
                "in the policy.",
                limit=call.cap,
            )
        )
    if call.threshold is not None:
        return Admit(ApprovalStatus.APPROVED, PolicyDecider(rule=call.threshold), None)
    if call.mode is ApprovalMode.ASK and snap.grant is not None:
        grant = snap.grant
        by = PolicyDecider(rule=f"approved for this run by {grant.granted_by} ({grant.approval_id})")
        return Admit(ApprovalStatus.APPROVED, by, None)
    if call.allow is not None:
        numbers = call.allow.numbers
        held = next((a for a in snap.allowances if a.covers(numbers)), None)
        if held is not None:
            return Admit(ApprovalStatus.APPROVED, allowance_decider(held), None, allowance=held)
    if isinstance(call.routed, ApprovalModeUnsupported):
        return Refuse(call.routed)
    if snap.pending is not None:
        return Coalesce(snap.pending)
    return Admit(ApprovalStatus.PENDING, None, call.routed)


@dataclass(frozen=True)
class Intake:
    """One request as the intake transaction stores it, besides what `Call` decides on."""

    policy: Policy
    tenant: str
    req: ApprovalRequest
    rule: ToolRule
    call: Call
    shown: dict[str, Any]
    contract: OperationRecord | None = None
    approval_id: str | None = None
    trace: ApprovalTrace = NO_TRACE
    handoff: HandoffState | None = None
    shadow: dict[str, Any] | None = None
    label: str = ""  # the decision in a word or two (`Ruling.label`), for the audit record
    edit: EditState | None = None  # what an approver may edit, if the call is asked
    follow_ups: Plan | None = None  # the reminder and escalations, queued with a pending request
    push: bool = False  # Web Push is on: a pending request is pushed to its approvers' browsers
    coalesce: str | None = None  # the coalescing key of a plain tool call (`bot.approvals.coalescing.key`)
    oncall: Asked | Fallback | None = None  # who is on call, if the rule names a rotation

    def policy_rule(self) -> str:
        """The rule as the card shows it, with the on-call fallback said where there was one."""
        said = self.rule.describe()
        if not isinstance(self.oncall, Fallback):
            return said
        instead = " or ".join(k.value.replace("_", " ") for k in self.rule.approvers)
        return f"{said} · {self.oncall.note(instead)}"


def create_tx(tx: Work, it: Intake, now: float) -> Created:
    """Load what the call is decided on, weigh it, and store the outcome: two storage calls."""
    snap = store.load(tx, question(it.tenant, it.call, it.req.surface.model_dump(), it.coalesce, now))
    outcome = weigh(it.call, snap)
    if isinstance(outcome, Replay):
        return Created(outcome.record, replay=True)
    if isinstance(outcome, Coalesce):
        return Created(outcome.record, replay=False, coalesced=True)
    if isinstance(outcome, Refuse):
        raise outcome.error
    if outcome.allowance is not None:
        # Raises UsedUp when a concurrent call took its last use: the create runs again.
        allowances.use(tx, outcome.allowance.id, now)
    rec = store.write(tx, new_approval(it, outcome, now))
    return Created(rec, replay=False, denied_by_policy=it.call.deny, standing=outcome.standing)


def new_approval(it: Intake, admit: Admit, now: float) -> store.NewApproval:
    """The admitted call as storage takes it: its audit events and first jobs included."""
    req, rule, route = it.req, it.rule, admit.route
    status, decided_by = admit.status, admit.decided_by
    timeout = it.policy.timeout_for(
        rule, route.surface if route else SurfaceType(req.surface.type), req.timeoutSeconds
    )
    approval_id = it.approval_id or new_id("apv")
    edit = it.edit if status is ApprovalStatus.PENDING else None
    # The `requested` event as its model (contracts.audit_events): checked as it is built.
    requested = RequestedEvent.model_validate(
        {
            "executionId": req.executionId,
            "toolCallId": req.toolCallId,
            "toolName": req.toolName,
            "parameters": it.shown,
            "parametersDigest": it.call.digest,
            "reason": req.reason,
            "surface": req.surface.model_dump(mode="json"),
            "policy": rule.describe(),
            "mode": rule.mode.value,
            "route": route_fields(route) if route else None,
            "traceId": it.trace.trace_id,
            "rule": it.call.rule_path,
            "decision": it.label,
            **({"block": it.call.block} if it.call.block is not None else {}),
            **({"unevaluable": it.call.unevaluable} if it.call.unevaluable is not None else {}),
            **({"quorum": rule.quorum} if rule.quorum > 1 else {}),
            **({"separateDuties": True} if rule.separate_duties else {}),
            **({"stepUp": True} if rule.step_up else {}),
            **({"shadow": it.shadow} if it.shadow is not None else {}),
            **({"oncall": it.oncall.audit()} if it.oncall is not None else {}),
            **({"editable": list(edit.fields)} if edit is not None else {}),
        }
    )
    events = [Event(AuditEvent.REQUESTED, {"kind": "agent", "tenant": it.tenant}, written(requested))]
    contract = it.contract
    executing = contract is not None and status is ApprovalStatus.APPROVED
    if contract is not None:
        events.append(operations.prepared_event(contract))
    if decided_by is not None:
        events.append(closing_event(status, decided_by, {"comment": None}))
    if admit.allowance is not None:
        events.append(used_event(admit.allowance))
    if contract is not None and executing:
        contract, claim = operations.claim(contract)
        events.append(claim)
    window = it.policy.defaults.callback_retry_window
    queued: list[Queued] = []
    if delivered_by_worker(route):
        queued.append(Queued(JobKind.DELIVER, now, now + DELIVERY_WINDOW))
    if it.follow_ups is not None and status is ApprovalStatus.PENDING:
        queued += it.follow_ups.jobs(now, now + timeout)
    if it.push and route is not None and status is ApprovalStatus.PENDING:
        queued.append(Queued(JobKind.PUSH, now, now + timeout))
    if rule.notify and route is not None and status is ApprovalStatus.PENDING:
        queued.append(Queued(JobKind.NOTIFY, now, now + timeout))  # `notify`: bot.workers.notices
    if executing:
        queued.append(Queued(JobKind.EXECUTE, now, now + window))
    elif decided_by is not None and req.callbackUrl:
        queued.append(Queued(JobKind.CALLBACK, now, now + window, Delivery(new_id("dlv"))))
    return store.NewApproval(
        id=approval_id,
        tenant=it.tenant,
        execution_id=req.executionId,
        tool_call_id=req.toolCallId,
        tool_name=req.toolName,
        kind=rule.kind,
        mode=rule.mode,
        status=status,
        parameters=it.shown,
        digest=it.call.digest,
        reason=req.reason,
        surface=req.surface.model_dump(mode="json"),
        route=route,
        policy_rule=it.policy_rule(),
        callback_url=str(req.callbackUrl) if req.callbackUrl else None,
        created_at=now,
        expires_at=now + timeout,
        decided_by=decided_by,
        trace_id=it.trace.trace_id,
        trace_context=it.trace.context,
        operation=contract,
        handoff=it.handoff,
        edit=edit,
        quorum=rule.quorum,
        separate_duties=rule.separate_duties,
        # Only a call a person is asked about waits for a passkey (a threshold may let it through).
        step_up=rule.step_up and status is ApprovalStatus.PENDING,
        coalesce_key=it.coalesce if status is ApprovalStatus.PENDING else None,
        events=events,
        jobs=queued,
    )
