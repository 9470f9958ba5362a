"""Preparing a request: everything the intake decides before it touches the database.

Every kind of request goes through `prepare`: a gated tool call (`Engine.create`), an
operation's proposal (`bot.operations.proposals`, its own rule handed in) and a handoff (its
parameters sealed by `bot.handoffs` beforehand). It is pure: plain data in (the request, the
rule, the policy, the enabled surfaces, who is on call, the sealed parameters, `now`), an
`Intake` out, or the refusal raised, with no database, clock, network or logging. What needs
those happens around it (`bot.approvals.creating`): the agent's schema checked and the
on-call lookup before (`needs_on_call` says when), the transaction (`create_tx`) after.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from bot.approvals import coalescing, edits
from bot.approvals.intake import Call, Intake
from bot.egress.urls import AllowList
from bot.observability import NO_TRACE, ApprovalTrace
from bot.oncall import Asked, Found
from bot.policy import (
    Policy,
    Ruling,
    SmsSender,
    ToolRule,
    callback_allowed,
    differences,
    json_limits,
    redact,
    rule_on,
    surface_belongs,
)
from contracts.digest import digest_of_canonical
from contracts.enums import ApprovalMode, SurfaceType
from contracts.errors import InvalidRequest
from contracts.handoff import HandoffState
from contracts.ports import DashboardRoute, SlackRoute
from contracts.reach import Channel
from contracts.wire import ApprovalRequest
from storage.operations import OperationRecord

NO_HANDOFFS = "handoffs need COSIGNER_SECRET on this server"


@dataclass(frozen=True)
class Sealed:
    """The request's parameters sealed (`storage.sealing.TokenSeal`) for what may need them
    unredacted later; sealed before `prepare`, since a seal draws a random nonce."""

    handoff: str | None = None  # for the handoff's check (`bot.handoffs`); None: no seal
    edit: str | None = None  # for an approver's edit of a call shown redacted


@dataclass(frozen=True)
class Given:
    """What `prepare` decides a request on: the request as the agent sent it, the rule an
    operation brings (None: the policy's for the tool, or Cedar's), and what the server is."""

    tenant: str
    req: ApprovalRequest
    policy: Policy
    now: float
    rule: ToolRule | None = None
    shadow: Policy | None = None  # decided alongside, acts on nothing (COSIGNER_POLICY_SHADOW)
    surfaces: Collection[str] = frozenset({SurfaceType.DASHBOARD})
    sms: SmsSender = field(default_factory=SmsSender)
    callback_allow: AllowList = field(default_factory=AllowList)
    found: Found | None = None  # who is on call, where the rule names a rotation
    sealed: Sealed = Sealed()
    contract: OperationRecord | None = None  # an operation's contract, prepared for `approval_id`
    approval_id: str | None = None
    agent: str = ""  # the agent key's id, which a Cedar policy may read
    trace: ApprovalTrace = NO_TRACE


@dataclass(frozen=True)
class Prepared:
    """The request as the intake transaction takes it, and what the policy ruled."""

    intake: Intake
    ruling: Ruling
    shadow_failed: Exception | None = None  # what the shadow policy raised (the live decision stands)


def rule_of(policy: Policy, tenant: str, req: ApprovalRequest, rule: ToolRule | None) -> ToolRule:
    """The rule a request is prepared under before any `when` block: an operation's own, else
    the policy's for the tool."""
    return rule or policy.rule_for(tenant, req.toolName)


def needs_on_call(rule: ToolRule) -> bool:
    """Whether the request's rule asks whoever is on call (then look them up first)."""
    return bool(rule.oncall) and not rule.deny and rule.mode is not ApprovalMode.NONE


def prepare(given: Given) -> Prepared:
    """Check the request, redact what is shown, rule on it by the policy, and build its
    `Intake`; raises `InvalidRequest` (and the policy's checks' refusals) for a request
    that must not be stored at all."""
    tenant, req, policy = given.tenant, given.req, given.policy
    canonical = json_limits(req.parameters)
    surface_belongs(policy, tenant, req.surface)
    if req.callbackUrl is not None:
        callback_allowed(str(req.callbackUrl), given.callback_allow)
    if req.reason is not None:
        # The reason is free text that goes on the card, the text and the audit record:
        # a credential pasted into it is redacted like one in the parameters.
        req = req.model_copy(update={"reason": redact(req.reason)})
    own_rule = given.rule is not None
    rule = rule_of(policy, tenant, req, given.rule)
    dig = digest_of_canonical(canonical)  # the bytes json_limits measured, not written twice
    shown = redact(req.parameters, rule.redact, rule.show)
    handoff = None
    if rule.handoff is not None:
        if given.sealed.handoff is None:
            raise InvalidRequest(NO_HANDOFFS)
        handoff = handoff_state(rule, given.sealed.handoff)
    # An operation's own rule decides it; a tool call's, the policy (Cedar's per call).
    ruling = ruling_of(policy, given, req, given.rule, given.found)
    if ruling.invalid is not None:
        # Nothing is stored: the call was never one the policy could decide.
        bad = ruling.invalid
        raise InvalidRequest(bad.message, field=f"parameters.{bad.parameter}", policy=bad.path)
    rule = ruling.rule  # the outcome of the `when` block that decided, if one did
    # Only gated tool calls have a shadow: an operation's rule is handed in by its caller.
    shadow, failed = None, None
    if given.shadow is not None and not own_rule:
        try:
            shadow = differences(ruling, ruling_of(given.shadow, given, req, None, None))
        except Exception as exc:
            # A shadow must never change what the live policy decides, not even by failing.
            failed = exc
    plain = given.contract is None
    intake = Intake(
        policy,
        tenant,
        req,
        rule,
        Call.of(policy, tenant, req, rule, dig, ruling, shown),
        shown,
        given.contract,
        given.approval_id,
        given.trace,
        handoff,
        shadow,
        ruling.label,
        # Only where a person can edit: Slack's card, the dashboard (and inbox); SMS,
        # WhatsApp and Teams answer the call as sent.
        edits.offer(rule, req, shown, given.sealed.edit)
        if plain and not ruling.deny and isinstance(ruling.route, SlackRoute | DashboardRoute)
        else None,
        follow_ups=ruling.follow_ups,
        push=Channel.PUSH in given.surfaces,
        # One question, not two: only a plain tool call is coalesced with its pending twin.
        coalesce=coalescing.key(tenant, req, dig) if plain and handoff is None else None,
        oncall=given.found,
    )
    return Prepared(intake, ruling, failed)


def ruling_of(
    policy: Policy, given: Given, req: ApprovalRequest, rule: ToolRule | None, found: Found | None
) -> Ruling:
    """`policy`'s ruling on the request (`bot.policy.rule_on`), with `rule` (None: the policy's
    own, or Cedar's) and who is on call (`found`)."""
    annotations: dict[str, Any] | None = (
        None if req.toolAnnotations is None else req.toolAnnotations.model_dump(exclude_none=True)
    )
    return rule_on(
        policy,
        given.tenant,
        req.toolName,
        req.parameters,
        req.surface,
        enabled=given.surfaces,
        sms=given.sms,
        requested_timeout=req.timeoutSeconds,
        rule=rule,
        oncall=found.route if isinstance(found, Asked) else None,
        annotations=annotations,
        agent=given.agent,
        now=given.now,
    )


def handoff_state(rule: ToolRule, sealed: str) -> HandoffState:
    """A new handoff's state: the policy's reason, steps and `expect` target as they are now,
    and the parameters sealed for its check."""
    assert rule.handoff is not None
    return HandoffState(
        reason=rule.handoff.reason,
        steps=rule.handoff.steps,
        url=rule.handoff.expect.url,
        secret_env=rule.handoff.expect.secret_env,
        sealed=sealed,
    )
