"""Pydantic models of every JSON shape on the wire (DESIGN.md), camelCase as sent."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl, TypeAdapter

from contracts.enums import ApprovalStatus, SurfaceType
from contracts.names import PhoneNumber, SlackId, ToolName


class Wire(BaseModel):
    """Base of wire models: unknown fields are refused so typos surface as errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- surfaces ---------------------------------------------------------------


class SlackSurface(Wire):
    """A run triggered from a Slack conversation."""

    type: Literal["slack"]
    teamId: SlackId
    enterpriseId: SlackId | None = None
    channelId: SlackId
    threadTs: str | None = Field(default=None, max_length=32, pattern=r"^\d+(\.\d+)?$")
    userId: SlackId


class SmsSurface(Wire):
    """A run triggered by a text message from `phone` (E.164)."""

    type: Literal["sms"]
    phone: PhoneNumber


class DashboardSurface(Wire):
    """The tenant's own authenticated app, deciding through the API on behalf of `userId`."""

    type: Literal["dashboard"]
    userId: str = Field(min_length=1, max_length=200)


class ApiSurface(Wire):
    """A bare API call with no live caller."""

    type: Literal["api"]


class ScheduleSurface(Wire):
    """A scheduled run."""

    type: Literal["schedule"]


class BatchSurface(Wire):
    """A batch run."""

    type: Literal["batch"]


class WebWidgetSurface(Wire):
    """A browser widget; a `client` token cannot host a person."""

    type: Literal["web_widget"]
    tokenKind: Literal["client", "server"]


Surface = Annotated[
    SlackSurface
    | SmsSurface
    | DashboardSurface
    | ApiSurface
    | ScheduleSurface
    | BatchSurface
    | WebWidgetSurface,
    Field(discriminator="type"),
]

# --- agent requests ---------------------------------------------------------

Identifier = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")]


def _no_nul(text: str) -> str:
    # PostgreSQL text cannot hold U+0000: let it through and the INSERT fails with a 500.
    if "\x00" in text:
        raise ValueError("must not contain the NUL character (\\u0000)")
    return text


FreeText = Annotated[str, AfterValidator(_no_nul)]
"""Free text stored as is (reason, comment): any characters but NUL."""


class ApprovalRequest(Wire):
    """`POST /v1/approvals`: a gated tool call."""

    executionId: Identifier
    toolCallId: Identifier
    toolName: ToolName
    parameters: dict[str, Any]
    reason: FreeText | None = Field(default=None, max_length=2000)
    surface: Surface
    timeoutSeconds: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    callbackUrl: HttpUrl | None = None


class AdmitRequest(Wire):
    """`POST /v1/runs/admit`: may this run start on this surface with these tools?"""

    executionId: Identifier
    surface: Surface
    tools: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(max_length=500)


class AdmitResponse(Wire):
    """The run may start."""

    admitted: bool


class DecisionRequest(Wire):
    """`POST /v1/approvals/{id}/decision`: a dashboard user's answer."""

    decision: Literal["approve", "deny"]
    userId: str = Field(min_length=1, max_length=200)
    comment: FreeText | None = Field(default=None, max_length=2000)


class ResultReport(Wire):
    """`POST /v1/approvals/{id}/result`: what the executed call returned."""

    outcome: Literal["succeeded", "failed"] = "succeeded"
    result: Any = None
    error: str | None = Field(default=None, max_length=2000)


# --- answers ----------------------------------------------------------------


class ApprovalStart(Wire):
    """`201`: a person must decide."""

    type: Literal["approval_start"] = "approval_start"
    approvalId: str
    executionId: str
    toolCallId: str
    toolName: str
    parameters: dict[str, Any] = Field(description="Redacted, exactly as displayed.")
    parametersDigest: str
    timeout: int = Field(description="Milliseconds.")
    startedAt: datetime
    expiresAt: datetime
    status: ApprovalStatus
    shortCode: str | None = None


class PersonDecider(Wire):
    """A person answered."""

    kind: Literal["person"] = "person"
    surface: SurfaceType
    userId: str
    teamId: str | None = None


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


DecidedBy = Annotated[
    PersonDecider | TimeoutDecider | PolicyDecider | AgentDecider | SystemDecider,
    Field(discriminator="kind"),
]
DECIDED_BY: TypeAdapter[DecidedBy] = TypeAdapter(DecidedBy)
"""Parses a stored or received `decidedBy` into its typed form."""


class Decision(Wire):
    """The decision object: GET, server-sent events and callbacks."""

    type: Literal["approval_decided"] = "approval_decided"
    approvalId: str
    executionId: str
    toolCallId: str
    toolName: str
    status: ApprovalStatus
    decidedBy: DecidedBy
    decidedAt: datetime
    comment: str | None = None
    parametersDigest: str
    grant: str | None = None


class ErrorDetail(BaseModel):
    """The inside of an error body; extra keys (`field`, `policy`, `surface`) may follow."""

    model_config = ConfigDict(extra="allow")
    code: str
    message: str


class ErrorBody(BaseModel):
    """`{"error": {...}}`."""

    error: ErrorDetail
