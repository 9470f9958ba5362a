"""Pydantic models of every answer body: what the agent API sends back, and callbacks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cosigner.audit_events import AuditEventModel, UnknownEvent, parse_event
from cosigner.denials import Denial
from cosigner.enums import ApprovalStatus, ErrorCode, SurfaceType
from cosigner.handoff import HandoffReceipt
from cosigner.operations import OperationOutcome, OutcomeType, Preview, PreviewField
from cosigner.wire import ApprovalId, Timestamp, Wire

OPERATION_PARTS = (OutcomeType, PreviewField)
"""Components `/openapi.json` publishes inside operation answers, named here with them."""


def _absent(value: Any) -> bool:
    return value is None


def _empty(value: Any) -> bool:
    return not value


class AdmitResponse(Wire):
    """The run may start; `standingDenies` are the tools it will be refused (403) without asking."""

    admitted: Literal[True] = True
    standingDenies: list[Denial] = Field(default_factory=list, exclude_if=_empty)


class ApprovalGiven(Wire):
    """One approver's Approve, counted toward the request's quorum: who, where, when."""

    by: str = Field(description="The approver's id on that surface (a Slack user id, a phone number).")
    surface: SurfaceType
    at: Timestamp


_QUORUM_DOC = (
    "How many distinct approvers must approve (the policy's `quorum`); sent only above 1, so a "
    "request one answer decides keeps the shape older SDKs read."
)
_APPROVALS_DOC = "Every Approve counted so far, oldest first; one entry per approver (sent with `quorum`)."


def _one(value: Any) -> bool:
    return bool(value == 1)


class CurrentCall(Wire):
    """A pending call an approver edited (a quorum must approve): the call the approvers are
    asked to approve now instead of the agent's."""

    parameters: dict[str, Any] = Field(description="The edited call, redacted as displayed.")
    editedFields: list[str] = Field(description="The parameters that differ from the agent's call.")
    digest: str = Field(
        description="RFC 8785 digest of the edited call: send it as the decision's `parametersDigest`."
    )
    editedBy: str | None = Field(default=None, exclude_if=_absent, description="Who made this version.")
    editedOn: SurfaceType | None = Field(
        default=None, exclude_if=_absent, description="Where they edited it."
    )


class ApprovalStart(Wire):
    """`201`: a person must decide."""

    type: Literal["approval_start"] = "approval_start"
    approvalId: ApprovalId
    executionId: str
    toolCallId: str
    toolName: str
    parameters: dict[str, Any] = Field(description="Redacted, exactly as displayed.")
    parametersDigest: str
    timeout: int = Field(description="Milliseconds.")
    startedAt: Timestamp
    expiresAt: Timestamp
    status: ApprovalStatus
    shortCode: str | None = None
    quorum: int = Field(default=1, ge=1, exclude_if=_one, description=_QUORUM_DOC)
    approvals: list[ApprovalGiven] = Field(
        default_factory=list, exclude_if=_empty, description=_APPROVALS_DOC
    )
    operation: str | None = Field(default=None, exclude_if=_absent)
    preview: Preview | None = Field(default=None, exclude_if=_absent, description="What the person approves.")
    argumentsDigest: str | None = Field(default=None, exclude_if=_absent)
    editable: list[str] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Edits: the parameters an approver may change (the agent accepts edits and the "
        "policy marks them editable).",
    )
    currentCall: CurrentCall | None = Field(
        default=None,
        exclude_if=_absent,
        description="Edits under a quorum: once an approver edited the call, the call every "
        "approver is asked to approve now (`parameters` and `parametersDigest` stay the agent's). "
        "Approvals of an earlier version no longer count.",
    )
    coalesced: bool = Field(
        default=False,
        exclude_if=_empty,
        description="One question, not two: an identical request (tenant, execution, tool, requester, "
        "parametersDigest) was pending, and this is it (its own `toolCallId`); wait on this "
        "`approvalId` for the one decision. Sent only when true.",
    )


class PersonDecider(Wire):
    """A person answered; `teamId` is sent only for Slack answers that carry one."""

    kind: Literal["person"] = "person"
    surface: SurfaceType
    userId: str
    teamId: str | None = Field(default=None, exclude_if=_absent)


class TimeoutDecider(Wire):
    """Nobody answered in time; expiry means deny."""

    kind: Literal["timeout"] = "timeout"


class PolicyDecider(Wire):
    """The policy decided without a person; `rule` names the rule."""

    kind: Literal["policy"] = "policy"
    rule: str


class AgentDecider(Wire):
    """The agent cancelled its own request."""

    kind: Literal["agent"] = "agent"


class SystemDecider(Wire):
    """Cosigner failed the request closed; `code` says why."""

    kind: Literal["system"] = "system"
    code: str


class AllowanceDecider(Wire):
    """A standing allow decided at once: `allowanceId` names it, and `surface`, `userId` and
    `teamId` the person who granted it with "Allow for …"."""

    kind: Literal["allowance"] = "allowance"
    allowanceId: str
    surface: SurfaceType
    userId: str
    teamId: str | None = Field(default=None, exclude_if=_absent)


Decider = PersonDecider | TimeoutDecider | PolicyDecider | AgentDecider | SystemDecider | AllowanceDecider
DecidedBy = Annotated[Decider, Field(discriminator="kind")]
_DECIDERS: TypeAdapter[Decider] = TypeAdapter(DecidedBy)


def decider_from_json(stored: str | bytes) -> Decider:
    """The `decidedBy` model of a decider as stored (its JSON)."""
    return _DECIDERS.validate_json(stored, strict=False)


class Decision(Wire):
    """The decision object: GET, server-sent events and callbacks."""

    type: Literal["approval_decided"] = "approval_decided"
    approvalId: ApprovalId
    executionId: str
    toolCallId: str
    toolName: str
    status: ApprovalStatus
    decidedBy: DecidedBy
    decidedAt: Timestamp
    comment: str | None
    parametersDigest: str
    grant: str | None = Field(description="A compact JWS; only when approved.")
    quorum: int = Field(default=1, ge=1, exclude_if=_one, description=_QUORUM_DOC)
    approvals: list[ApprovalGiven] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=_APPROVALS_DOC + " Approved: the approvers who made the quorum; denied: who had "
        "approved before the veto.",
    )
    traceId: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="The W3C trace id (32 hex) of the trace the approval belongs to, when it has one.",
    )
    operation: str | None = Field(default=None, exclude_if=_absent)
    argumentsDigest: str | None = Field(default=None, exclude_if=_absent)
    outcome: OperationOutcome | None = Field(
        default=None, exclude_if=_absent, description="An operation's outcome, once the application answered."
    )
    code: ErrorCode | None = Field(
        default=None, exclude_if=_absent, description="Handoffs: why not completed."
    )
    receipt: HandoffReceipt | None = Field(
        default=None, exclude_if=_absent, description="Handoffs: completed."
    )
    detail: str | None = Field(default=None, exclude_if=_absent, description="Handoffs: what the check said.")
    edited: bool | None = Field(
        default=None, exclude_if=_absent, description="Edits: true when an approver changed the call."
    )
    parameters: dict[str, Any] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Edits: the call to run, as the approver saw it (values the policy hides stay "
        "hidden: they are the agent's own, unchanged).",
    )
    editedFields: list[str] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Edits: the parameters the approver changed; every other one is the agent's own.",
    )
    originalDigest: str | None = Field(
        default=None, exclude_if=_absent, description="Edits: the digest of the call the agent asked for."
    )
    digest: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="Edits: the RFC 8785 digest of the call to run (also `parametersDigest` and the "
        "grant's `digest`).",
    )


class ResultRecorded(Wire):
    """`POST /v1/approvals/{id}/result` answer: the report is on the audit record."""

    approvalId: ApprovalId
    recorded: Literal[True] = True


class AuditEvent(Wire):
    """One event of an approval's hash-chained audit record; `typed()` reads its data."""

    approvalId: str
    tenant: str
    seq: int
    at: float = Field(description="Unix seconds.")
    event: str
    actor: Any
    data: Any
    prevHash: str
    hash: str

    def typed(self) -> AuditEventModel | UnknownEvent:
        """The event's data read through its kind's model (`cosigner.audit_events`, the models
        the server writes it from): `UnknownEvent` for a kind this SDK does not know, or data
        its model cannot read (kept whole, under `unparseable` when no JSON object)."""
        if isinstance(self.data, dict):
            return parse_event(self.event, self.data)
        return UnknownEvent(kind=self.event, fields={"unparseable": self.data})


class AuditTrail(Wire):
    """`GET /v1/approvals/{id}/audit`: every event, oldest first."""

    approvalId: ApprovalId
    events: list[AuditEvent]


class Jwk(Wire):
    """The public Ed25519 key that signs grants."""

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    x: str
    kid: str
    use: Literal["sig"]
    alg: Literal["EdDSA"]


class Jwks(Wire):
    """`GET /v1/keys`: a JSON Web Key Set."""

    keys: list[Jwk]


class Problem(Wire):
    """One invalid field of a request."""

    field: str
    message: str


class ErrorDetail(Wire):
    """The inside of an error body: a code, a message naming the fix, and what it is about."""

    model_config = ConfigDict(extra="allow")
    code: ErrorCode
    message: str
    field: str | None = Field(default=None, exclude_if=_absent)
    problems: list[Problem] | None = Field(default=None, exclude_if=_absent)
    approvalId: str | None = Field(default=None, exclude_if=_absent)
    policy: str | list[str] | None = Field(default=None, exclude_if=_absent)
    tools: list[str] | None = Field(default=None, exclude_if=_absent)
    surface: str | None = Field(default=None, exclude_if=_absent)
    status: ApprovalStatus | None = Field(default=None, exclude_if=_absent)
    denial: Denial | None = Field(default=None, exclude_if=_absent)
    reference: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="OPERATION_UNAVAILABLE: what to give the operator, who finds the detail under it.",
    )
    digest: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="PARAMETERS_MISMATCH on an answer: the digest of the call the approvers are asked "
        "to approve now (an approver edited it since the version answered); fetch the approval, show "
        "its `currentCall` and answer with this `parametersDigest`.",
    )
    editedBy: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="PARAMETERS_MISMATCH on an answer: who made the current version of the call "
        "(their id on the surface they edited it on).",
    )


class ErrorBody(Wire):
    """`{"error": {...}}`: every refusal."""

    error: ErrorDetail

    @classmethod
    def of(cls, code: ErrorCode, message: str, details: dict[str, Any]) -> ErrorBody:
        """An error body; `details` become the extra keys beside code and message."""
        detail = ErrorDetail.model_validate({"code": code, "message": message, **details}, strict=False)
        return cls(error=detail)

    def dump(self) -> dict[str, Any]:
        """The JSON body; keys not given are left out rather than sent as null."""
        return self.model_dump(mode="json", exclude_unset=True)


def dump(model: BaseModel) -> dict[str, Any]:
    """An answer model as its JSON body."""
    return model.model_dump(mode="json")
