"""The audit events of a request and what is decided about it: the request, each answer and
closing, edits, standing allows and denies, who signed in, and the result the agent reported
(`cosigner.audit_events` gathers every kind)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cosigner._audit_base import OnCallNote, _Event


class Requested(_Event):
    """A call arrived and was admitted: what was asked, under which rule, decided how."""

    kind: Literal["requested"] = "requested"
    executionId: str | None = None
    toolCallId: str | None = None
    toolName: str
    parameters: Any = None  # as redacted by the policy
    parametersDigest: str | None = None
    reason: str | None = None
    surface: dict[str, Any] = Field(default_factory=dict)
    policy: str | None = None
    mode: str | None = None
    route: dict[str, Any] | None = None
    traceId: str | None = None
    rule: Any = None
    decision: str | None = None
    block: Any = None
    unevaluable: Any = None
    quorum: int | None = None
    separateDuties: bool | None = None
    stepUp: bool | None = None
    shadow: Any = None
    oncall: OnCallNote | None = None
    editable: list[str] | None = None


class _Closing(_Event):
    """A closing: who decided is the event's actor; the comment and, for a quorum, the approvers;
    `edited`, the edit an approver approved the call with."""

    comment: str | None = None
    approvers: list[dict[str, Any]] | None = None
    edited: dict[str, Any] | None = None


class Approved(_Closing):
    """The request was approved."""

    kind: Literal["approved"] = "approved"


class Denied(_Closing):
    """The request was denied (by a person, the policy, or a standing deny)."""

    kind: Literal["denied"] = "denied"


class Expired(_Closing):
    """Nobody answered in time: the request expired (and so was not allowed)."""

    kind: Literal["expired"] = "expired"


class Cancelled(_Closing):
    """The agent withdrew the request."""

    kind: Literal["cancelled"] = "cancelled"


class Completed(_Closing):
    """A handoff's step was confirmed."""

    kind: Literal["completed"] = "completed"


class Failed(_Closing):
    """A handoff's step was not confirmed."""

    kind: Literal["failed"] = "failed"


class DecisionRefused(_Event):
    """An answer that was not applied, and why."""

    kind: Literal["decision_refused"] = "decision_refused"
    code: str | None = None
    message: str | None = None
    wanted: str | None = None


class Result(_Event):
    """What the agent reported of running the approved call (redacted)."""

    kind: Literal["result"] = "result"
    outcome: str | None = None
    result: Any = None
    error: Any = None


class Counted(_Event):
    """One approver's Approve toward a quorum above 1."""

    kind: Literal["approval_counted"] = "approval_counted"
    count: int
    quorum: int
    comment: str | None = None


class Edited(_Event):
    """An approver edited the call: a new version for the quorum to approve."""

    kind: Literal["call_edited"] = "call_edited"
    edited: dict[str, Any] | None = None  # the new version's parameters, fields, changes, digests


class SetAside(_Event):
    """Approves of a version an edit replaced, no longer counted."""

    kind: Literal["approvals_set_aside"] = "approvals_set_aside"
    approvers: list[dict[str, Any]] = Field(default_factory=list)
    approvedDigest: str | None = None
    digest: str | None = None
    reason: str | None = None


class Coalesced(_Event):
    """An identical request while this one was pending: answered with it."""

    kind: Literal["coalesced"] = "coalesced"
    executionId: str | None = None
    toolCallId: str | None = None
    reason: str | None = None
    surface: dict[str, Any] = Field(default_factory=dict)


class AllowanceUsed(_Event):
    """A standing allow let the call run with nobody asked (`use` counts this one)."""

    kind: Literal["allowance_used"] = "allowance_used"
    allowanceId: str | None = None
    use: int | None = None
    maxUses: int | None = None
    grantedOn: str | None = None  # the request where it was granted
    expiresAt: str | None = None


class AllowanceGranted(_Event):
    """An Allow for … put a standing allow in force."""

    kind: Literal["allowance_granted"] = "allowance_granted"
    allowanceId: str | None = None
    toolName: str | None = None
    requester: str | None = None
    match: dict[str, Any] | None = None  # the match paths' values, as shown
    atMost: dict[str, Any] | None = None
    expiresAt: str | None = None
    maxUses: int | None = None


class AllowanceRevoked(_Event):
    """A standing allow was revoked before it ran out."""

    kind: Literal["allowance_revoked"] = "allowance_revoked"
    allowanceId: str | None = None
    by: str | None = None


class StandingDenySet(_Event):
    """A standing deny was set from this request (or one was in force already)."""

    kind: Literal["standing_deny_set"] = "standing_deny_set"
    denialId: str | None = None
    toolName: str | None = None
    requester: str | None = None
    alreadyInForce: bool | None = None


class StandingDenyLifted(_Event):
    """A standing deny set from this request was lifted."""

    kind: Literal["standing_deny_lifted"] = "standing_deny_lifted"
    denialId: str | None = None
    by: str | None = None


class SignedIn(_Event):
    """The OpenID issuer and subject of who answered in the inbox."""

    kind: Literal["signed_in"] = "signed_in"
    issuer: str | None = None
    subject: str | None = None


class PasskeyConfirmed(_Event):
    """Step-up: the passkey of an Approve."""

    kind: Literal["passkey_confirmed"] = "passkey_confirmed"
    credentialId: str | None = None
    userVerified: bool | None = None
