"""Pydantic models of every request body of the agent API, camelCase as sent.

Requests are parsed strictly: no string or boolean becomes a number, no number a string.
Answer bodies are in `cosigner.answers`; `/openapi.json` publishes both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, PlainSerializer, WithJsonSchema, field_validator

from cosigner.names import PhoneNumber, SlackId, ToolName

APPROVAL_ID_PATTERN = r"^apv_[A-Za-z0-9_-]{20}$"
"""The shape of every approval id (`apv_` and 15 random bytes in URL-safe base64)."""


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    PlainSerializer(_iso, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A UTC moment, sent as ISO 8601 with milliseconds and a `Z`."""

ApprovalId = Annotated[str, Field(pattern=APPROVAL_ID_PATTERN)]

CallbackUrl = Annotated[
    HttpUrl,
    WithJsonSchema(
        {
            "type": "string",
            "format": "uri",
            "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]+",
            "maxLength": 2083,
        }
    ),
]
"""An http(s) URL; the schema states the scheme, which `format: uri` alone does not."""


NO_NUL_PATTERN = "^[^\\u0000]*$"
"""The schema's statement of the NUL rule, on every string field that has no pattern of its own."""


def _no_nul(value: Any) -> Any:
    # PostgreSQL text cannot hold U+0000: let it through and the INSERT or lookup fails with a
    # 500 (SQLite would store it). So no string of any wire model may carry one.
    strings = value if isinstance(value, (list, tuple)) else (value,)
    if any(isinstance(text, str) and "\x00" in text for text in strings):
        raise ValueError("must not contain the NUL character (\\u0000)")
    return value


def _state_no_nul(schema: dict[str, Any]) -> None:
    """Add the NUL rule to the string schemas of one model's properties (and their items)."""
    for prop in schema.get("properties", {}).values():
        for part in (prop, *prop.get("anyOf", ()), prop.get("items") or {}):
            if part.get("type") == "string" and "pattern" not in part and "enum" not in part:
                if "const" not in part and "format" not in part:
                    part["pattern"] = NO_NUL_PATTERN


class Wire(BaseModel):
    """Base of wire models: unknown fields are refused, no value is coerced to another type, and
    no string (nor string in a list) holds NUL: the one rule, here, with the schema saying so."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        strict=True,
        # An answer always carries its defaulted fields (`type`, `kind`): the schema says so.
        json_schema_serialization_defaults_required=True,
        json_schema_extra=_state_no_nul,
    )

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul_in_strings(cls, value: Any) -> Any:
        return _no_nul(value)


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


FreeText = str
"""Free text stored as is (reason, comment): any characters but NUL (the rule of `Wire`)."""


class ApprovalRequest(Wire):
    """`POST /v1/approvals`: a gated tool call."""

    executionId: Identifier
    toolCallId: Identifier
    toolName: ToolName
    parameters: dict[str, Any]
    reason: FreeText | None = Field(default=None, max_length=2000)
    surface: Surface
    timeoutSeconds: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    callbackUrl: CallbackUrl | None = None


class OperationRequest(Wire):
    """`POST /v1/approvals` proposing an operation: the application prepares and executes it."""

    executionId: Identifier
    toolCallId: Identifier
    operation: ToolName
    request: dict[str, Any]
    reason: FreeText | None = Field(default=None, max_length=2000)
    surface: Surface
    timeoutSeconds: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    callbackUrl: CallbackUrl | None = None


class AdmitRequest(Wire):
    """`POST /v1/runs/admit`: may this run start on this surface with these tools?"""

    executionId: Identifier
    surface: Surface
    tools: list[ToolName] = Field(max_length=500)


class DecisionRequest(Wire):
    """`POST /v1/approvals/{id}/decision`: a dashboard user's answer (`always_deny`: deny, and
    refuse this tool from now on for the user's own runs that only they approve)."""

    decision: Literal["approve", "deny", "always_deny", "done", "cancel"] = Field(
        description='"approve", "deny" or "always_deny"; for a handoff "done" or "cancel".'
    )
    userId: str = Field(min_length=1, max_length=200)
    comment: FreeText | None = Field(default=None, max_length=2000)


class ResultReport(Wire):
    """`POST /v1/approvals/{id}/result`: what the executed call returned."""

    outcome: Literal["succeeded", "failed"] = "succeeded"
    result: Any = None
    error: FreeText | None = Field(default=None, max_length=2000)


class CancelRequest(Wire):
    """`POST /v1/approvals/{id}/cancel`: no fields; the body may be empty or `{}`."""
