"""The value types of the policy file, each saying in the file's own terms what is wrong with
a bad value, and `Table`, the base of every section: frozen, strict, unknown keys refused.

Shared by `bot.policy.schema` (the file's sections) and `bot.policy.when_schema` (the `when`
blocks of a tool).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bot.policy.durations import parse_duration
from bot.policy.oncall_refs import OnCallRef, is_oncall, parse_oncall
from contracts.enums import ApproverKind, ToolKind
from contracts.names import AadId, PhoneNumber, SlackId, TenantName, ToolName


def say(message: str) -> WrapValidator:
    """Replace whatever the inner type says about a bad value with `message` ({input} is the value)."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("policy", message, {"input": value}) from None

    return WrapValidator(check)


def listed(example: str, *, nonempty: str | None = None) -> BeforeValidator:
    """Require a TOML array before its items are checked one by one."""

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise PydanticCustomError("policy", "must be a list, e.g. {example}", {"example": example})
        if nonempty and not value:
            raise PydanticCustomError("policy", nonempty)
        return value

    return BeforeValidator(check)


def _duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise PydanticCustomError("policy", "{message}", {"message": str(exc)}) from None


def above_zero(value: float) -> float:
    """Refuse a threshold of zero or below: only amounts from 0 up to it would pass."""
    if value <= 0:
        raise PydanticCustomError(
            "policy", "must be above zero: only amounts from 0 up to it pass, so {never}", {"never": NEVER}
        )
    return value


def _not_requester(kind: ApproverKind) -> ApproverKind:
    if kind is ApproverKind.REQUESTER:
        raise ValueError("a headless run has no requester")
    return kind


DOTTED = r"^[^.]+(\.[^.]+)*$"
NEVER = "it could never match a call"

# The value types of the file. Each says, in the file's own terms, what is wrong with a bad
# value; list items are checked one by one so every bad item is named.
Text = Annotated[str, Field(min_length=1), say("must be a non-empty string")]
Flag = Annotated[bool, say("must be true or false")]
Count = Annotated[int, Field(ge=1), say("must be a whole number ≥ 1")]
Duration = Annotated[float, PlainValidator(_duration)]
Phone = Annotated[PhoneNumber, say('"{input}" is not an E.164 number; write it as "+15550000002"')]
# An address the SMTP server can deliver to: one local part, one @, a dotted domain; no
# display name, spaces, commas or angle brackets (a header could carry a second recipient).
Address = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+$"),
    say('"{input}" is not an email address; write it as "alice@acme.example"'),
]
Slack = Annotated[
    SlackId,
    say(f'"{{input}}" is not a Slack id (upper case letters and digits, such as "U0ADMIN"); {NEVER}'),
]
Aad = Annotated[
    AadId,
    say(
        f'"{{input}}" is not a Microsoft Entra id (a GUID such as '
        f'"72f988bf-86f1-41af-91ab-2d7cd011db47"); {NEVER}'
    ),
]
Kind = Annotated[
    ToolKind, Field(strict=False), say('"{input}" is not a kind; use "read", "write" or "danger"')
]
Confirm = Annotated[bool | Literal["always"], say('must be true, false or "always"')]
Approver = Annotated[
    ApproverKind,
    Field(strict=False),
    say('"{input}" is not an approver; use "requester", "tenant_admins", "staff" or "email"'),
]


def _approver_or_oncall(value: Any) -> ApproverKind | OnCallRef:
    if is_oncall(value):
        try:
            return parse_oncall(value)
        except ValueError as exc:
            raise PydanticCustomError("policy", "{message}", {"message": str(exc)}) from None
    try:
        return ApproverKind(value) if isinstance(value, str) else ApproverKind("")
    except ValueError:
        raise PydanticCustomError(
            "policy",
            '"{input}" is not an approver; use "requester", "tenant_admins", "staff", "email" or an '
            'on-call rotation such as "oncall:pagerduty:P1ABCD"',
            {"input": value},
        ) from None


# A tool's approvers: the kinds, or a rotation whose on-call people are asked (`bot.oncall`).
ToolApprover = Annotated[ApproverKind | OnCallRef, PlainValidator(_approver_or_oncall)]
ToolApprovers = Annotated[
    tuple[ToolApprover, ...],
    Field(strict=False),
    listed('["requester"]', nonempty="must name at least one approver"),
]
Route = Annotated[
    ApproverKind,
    Field(strict=False),
    AfterValidator(_not_requester),
    say('must be "tenant_admins", "staff" or "email"'),
]
RedactPath = Annotated[
    str, Field(pattern=DOTTED), say('"{input}" is not a dotted path such as "customer.email"')
]
PolicyToolName = Annotated[
    ToolName,
    say(f'"{{input}}" is not a tool name (letters, digits, _ . -, up to 128); {NEVER}'),
]
PolicyTenantName = Annotated[
    TenantName,
    say(
        f'"{{input}}" is not a tenant name (lower case letters, digits, - or _, as '
        f"`cosigner tenants create` accepts); {NEVER}"
    ),
]


Names = Annotated[tuple[Text, ...], Field(strict=False), listed('["u_42"]')]
SlackIds = Annotated[tuple[Slack, ...], Field(strict=False), listed('["U0ADMIN"]')]
Phones = Annotated[tuple[Phone, ...], Field(strict=False), listed('["+15550000002"]')]
Addresses = Annotated[tuple[Address, ...], Field(strict=False), listed('["alice@acme.example"]')]
AadIds = Annotated[
    tuple[Aad, ...], Field(strict=False), listed('["<the person\'s Microsoft Entra object id>"]')
]
Approvers = Annotated[
    tuple[Approver, ...],
    Field(strict=False),
    listed('["requester"]', nonempty="must name at least one approver"),
]
RedactPaths = Annotated[
    tuple[RedactPath, ...], Field(strict=False), listed('["cardToken", "customer.email"]')
]
# `show`: no `*`, so only a key the operator named is ever shown, never whatever an agent sends.
ShowPath = Annotated[
    str,
    Field(pattern=r"^[^.*]+(\.[^.*]+)*$"),
    say('"{input}" is not a dotted path without "*", such as "key" or "object.key"; name each key to show'),
]
ShowPaths = Annotated[tuple[ShowPath, ...], Field(strict=False), listed('["key"]')]
ParameterName = Annotated[
    str,
    Field(pattern=r"^[^.]+$"),
    say('"{input}" is not a parameter name; editable names top-level parameters such as "amountCents"'),
]


def _editable(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if not isinstance(value, list) or not value:
        raise PydanticCustomError(
            "policy", 'must be true (every parameter) or a non-empty list such as ["amountCents", "note"]'
        )
    return value


Editable = Annotated[
    bool | Annotated[tuple[ParameterName, ...], Field(strict=False)], BeforeValidator(_editable)
]


class Table(BaseModel):
    """A policy table: frozen, strict, unknown keys refused except the operator's own `x_…`."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_own_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not str(k).startswith("x_")}
        return data
