"""Pydantic models of every request body of the agent API, camelCase as sent.

Requests are parsed strictly: no string or boolean becomes a number, no number a string.
Answer bodies are in `cosigner.answers`; `/openapi.json` publishes both.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl, PlainSerializer, WithJsonSchema

from cosigner.names import AadId, PhoneNumber, SlackId, ToolName

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


def _refuse_nul(text: str) -> str:
    # PostgreSQL text cannot hold U+0000: let it through and the INSERT or lookup fails with a
    # 500 (SQLite would store it). So no string of any wire model may carry one.
    if "\x00" in text:
        raise ValueError("must not contain the NUL character (\\u0000)")
    return text


FreeText = Annotated[
    str,
    AfterValidator(_refuse_nul),
    # The same rule in the published schema, so a client built from /openapi.json keeps to it.
    Field(json_schema_extra={"pattern": NO_NUL_PATTERN}),
]
"""Any characters but NUL: what `Wire` makes of every `str` field without a pattern of its own."""


def _has_pattern(metadata: Iterable[Any]) -> bool:
    return any(
        getattr(m, "pattern", None) or any(getattr(x, "pattern", None) for x in getattr(m, "metadata", ()))
        for m in metadata
    )


def _without_nul(annotation: Any) -> Any:
    """`annotation` with each bare `str` in it (also in `X | None` and `list[X]`) made `FreeText`;
    a string with a pattern of its own (ids, names) already refuses NUL, and dict keys (the
    free-form `parameters`) are stored as JSON, where NUL is written as an escape."""
    if annotation is str:
        return FreeText
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *metadata = get_args(annotation)
        return annotation if _has_pattern(metadata) else Annotated[(_without_nul(inner), *metadata)]
    if origin is None or origin is Literal or origin is dict:
        return annotation
    args = get_args(annotation)
    changed = tuple(_without_nul(a) for a in args)
    if changed == args:
        return annotation
    if origin in (Union, UnionType):
        return Union[changed]  # noqa: UP007 (built from a tuple of members)
    return origin[changed if len(changed) > 1 else changed[0]]


class Wire(BaseModel):
    """Base of wire models: unknown fields are refused, no value is coerced to another type, and
    no string holds NUL (one rule, applied here to every string field of every subclass, and
    stated in the schema as a pattern)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        strict=True,
        # An answer always carries its defaulted fields (`type`, `kind`): the schema says so.
        json_schema_serialization_defaults_required=True,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        changed = False
        for field in cls.model_fields.values():
            if _has_pattern(field.metadata):
                continue
            annotation = _without_nul(field.annotation)
            if annotation is not field.annotation:
                field.annotation, changed = annotation, True
        if changed:
            # Native checks, built once: a validator per field per request would cost more.
            cls.model_rebuild(force=True)


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


class WhatsAppSurface(Wire):
    """A run triggered by a WhatsApp message from `phone` (E.164, without `whatsapp:`)."""

    type: Literal["whatsapp"]
    phone: PhoneNumber


class TeamsSurface(Wire):
    """A run triggered in a Microsoft Teams conversation by `userId` (the AAD object id)."""

    type: Literal["teams"]
    tenantId: AadId
    conversationId: str = Field(min_length=1, max_length=400)
    userId: AadId


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
    | WhatsAppSurface
    | DashboardSurface
    | TeamsSurface
    | ApiSurface
    | ScheduleSurface
    | BatchSurface
    | WebWidgetSurface,
    Field(discriminator="type"),
]

# --- agent requests ---------------------------------------------------------

Identifier = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")]


class ToolAnnotations(Wire):
    """An MCP tool's behaviour hints as its server lists them: the server's own claim, which
    a policy's `when` block may use to ask or refuse a call, never to allow one."""

    readOnlyHint: bool | None = None
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None


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
    acceptsEdits: bool = Field(
        default=False,
        description="The agent can run an edited call: an approver may then change the fields the "
        "policy marks `editable`, and the decision carries the call to run.",
    )
    parametersSchema: dict[str, Any] | None = Field(
        default=None,
        description="The tool's JSON Schema for `parameters` (as the framework gives it to the "
        "model): typed inputs for an edit, and every edited call is validated against it.",
    )
    toolAnnotations: ToolAnnotations | None = Field(
        default=None,
        description="An MCP tool's annotations (the MCP gateway sends them): `when` blocks may "
        "ask or refuse by them, never allow.",
    )


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

    decision: Literal["approve", "deny", "always_deny", "allow_for", "done", "cancel"] = Field(
        description='"approve", "deny" or "always_deny", or "allow_for" (approve, and allow calls '
        'like it for `allowFor`, where the policy offers it); for a handoff "done" or "cancel".'
    )
    allowFor: Literal["15m", "1h", "8h"] | None = Field(
        default=None,
        description='With "decision": "allow_for": how long the standing allow lasts, at most the '
        "tool's `allow_for` in the policy.",
    )
    userId: str = Field(min_length=1, max_length=200)
    comment: FreeText | None = Field(default=None, max_length=2000)
    edit: dict[str, Any] | None = Field(
        default=None,
        description='Approve an edited call ("decision": "approve"): the parameters changed and their '
        "new values, only those the approval lists as `editable`.",
    )
    parametersDigest: str | None = Field(
        default=None,
        max_length=200,
        description="The digest of the call your app showed the user: the approval's "
        "`parametersDigest`, or once an approver edited the call (a quorum) its `currentCall.digest`. "
        "An answer for another version is refused with 409 PARAMETERS_MISMATCH (fetch the "
        "approval and show its current call); left out, the answer is taken as given for the "
        "agent's own call, and is refused the same way once the call was edited.",
    )


class ResultReport(Wire):
    """`POST /v1/approvals/{id}/result`: what the executed call returned."""

    outcome: Literal["succeeded", "failed"] = "succeeded"
    result: Any = None
    error: FreeText | None = Field(default=None, max_length=2000)


class CancelRequest(Wire):
    """`POST /v1/approvals/{id}/cancel`: no fields; the body may be empty or `{}`."""
