"""Typed audit events: one pydantic model per kind of event on an approval's audit chain.

The chain stores each event as its kind (`AuditEvent`, or an `ApprovalStatus` for a closing)
and its data as JSON. `parse_event(kind, data)` reads that data back as the kind's model;
`TypedEvent` is the discriminated union of the known kinds (discriminator `kind`, which is
the stored kind and is not part of the stored data). A kind this version does not know, or
data a kind's model cannot read (an older shape, an edited row), parses as `UnknownEvent`,
which keeps every field: reading never loses what was recorded.

Every model allows fields beyond the ones it names, and `event_data(model)` dumps exactly the
fields that were given: data read and dumped again is the data stored, so the chain's hashes
still verify over it. Parameters are as stored: already redacted by the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from contracts.enums import ApprovalStatus, AuditEvent

ALLOWANCE_USED = "allowance_used"  # a standing allow let the call run with nobody asked


class _Event(BaseModel):
    """What every event model shares: extra fields are kept, never refused."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


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
    oncall: Any = None  # who was on call, or why nobody on call could be asked
    editable: list[str] | None = None


class _Closing(_Event):
    """A closing: who decided is the event's actor; the comment and, for a quorum, the approvers."""

    comment: str | None = None
    approvers: list[dict[str, Any]] | None = None


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


class Delivered(_Event):
    """Where the request was shown."""

    kind: Literal["delivered"] = "delivered"
    surface: str | None = None
    conversation: str | None = None
    messages: list[Any] | None = None


class CallbackAttempt(_Event):
    """One POST of the decision to the agent's callback URL."""

    kind: Literal["callback_attempt"] = "callback_attempt"
    delivery: str | None = None
    attempt: int | None = None
    status: int | None = None
    error: str | None = None
    delivered: bool | None = None


class CallbackRefused(_Event):
    """The egress rules refused the callback URL."""

    kind: Literal["callback_refused"] = "callback_refused"
    delivery: str | None = None
    attempt: int | None = None
    reason: str | None = None


class CallbackAbandoned(_Event):
    """The callback was given up after its retries."""

    kind: Literal["callback_abandoned"] = "callback_abandoned"
    delivery: str | None = None
    attempts: int | None = None


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
    """A standing allow let the call run with nobody asked."""

    kind: Literal["allowance_used"] = "allowance_used"


class _Noted(_Event):
    """An event whose data is shown as recorded: its fields are all kept as given."""


def _noted(name: str, doc: str) -> type[_Noted]:
    # A model for a kind whose data has no fields worth naming: `kind` alone is typed.
    annotations = {"kind": Literal[name]}
    return type(
        name.title().replace("_", ""),
        (_Noted,),
        {"__annotations__": annotations, "kind": name, "__doc__": doc},
    )


SmsStatus = _noted("sms_status", "A delivery status the SMS provider reported.")
StandingDenySet = _noted("standing_deny_set", "A standing deny was set from this request.")
StandingDenyLifted = _noted("standing_deny_lifted", "A standing deny set from this request was lifted.")
SignedIn = _noted("signed_in", "The OpenID issuer and subject of who answered in the inbox.")
Prepared = _noted("prepared", "The application's contract, frozen under its digest.")
Claimed = _noted("claimed", "The approved operation is now executing, once.")
ExecuteSent = _noted("execute_sent", "The operation's execute request was sent.")
StatusAsked = _noted("status_asked", "The operation's status was asked.")
Outcome = _noted("outcome", "The operation's final outcome.")
Reconciled = _noted("reconciled", "The operation's outcome, as settled by reconciling.")
HandoffDone = _noted("handoff_done", "Done was pressed; the check against `expect` is queued.")
HandoffCheck = _noted("handoff_check", "What the handoff's `expect` endpoint answered.")
Reminded = _noted("reminded", "The one reminder went out.")
Escalated = _noted("escalated", "An escalation step: the request goes to its route too.")
EscalationDelivered = _noted("escalation_delivered", "Where the escalated request was shown.")
EscalationFailed = _noted("escalation_failed", "The escalation step's route could not be reached.")
EditTexted = _noted("edit_texted", "The edited call texted to the numbers shown an earlier version.")
PasskeyConfirmed = _noted("passkey_confirmed", "Step-up: the passkey of an Approve.")
EmailSent = _noted("email_sent", "The SMTP server accepted the request's email.")
EmailFailed = _noted("email_failed", "The SMTP server refused or could not be reached.")
PushSent = _noted("push_sent", "A Web Push message accepted for a device.")
PushFailed = _noted("push_failed", "A push service refused a message.")
AllowanceGranted = _noted("allowance_granted", "An Allow for … put a standing allow in force.")
AllowanceRevoked = _noted("allowance_revoked", "A standing allow was revoked before it ran out.")


class UnknownEvent(BaseModel):
    """A kind this version does not know (or data its kind's model could not read): the kind
    and the stored data, kept whole."""

    model_config = ConfigDict(frozen=True)

    kind: str
    fields: dict[str, Any]


KNOWN: tuple[type[_Event], ...] = (
    Requested,
    Approved,
    Denied,
    Expired,
    Cancelled,
    Completed,
    Failed,
    DecisionRefused,
    Delivered,
    CallbackAttempt,
    CallbackRefused,
    CallbackAbandoned,
    Result,
    Counted,
    Edited,
    SetAside,
    Coalesced,
    AllowanceUsed,
    SmsStatus,
    StandingDenySet,
    StandingDenyLifted,
    SignedIn,
    Prepared,
    Claimed,
    ExecuteSent,
    StatusAsked,
    Outcome,
    Reconciled,
    HandoffDone,
    HandoffCheck,
    Reminded,
    Escalated,
    EscalationDelivered,
    EscalationFailed,
    EditTexted,
    PasskeyConfirmed,
    EmailSent,
    EmailFailed,
    PushSent,
    PushFailed,
    AllowanceGranted,
    AllowanceRevoked,
)
MODELS: Mapping[str, type[_Event]] = {m.model_fields["kind"].default: m for m in KNOWN}
KINDS = frozenset(MODELS)
# Every stored kind has its model (checked again by a test, as kinds are added).
assert {
    *(e.value for e in AuditEvent),
    *(s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING),
} <= KINDS

TypedEvent = Annotated[
    Requested
    | Approved
    | Denied
    | Expired
    | Cancelled
    | Completed
    | Failed
    | DecisionRefused
    | Delivered
    | CallbackAttempt
    | CallbackRefused
    | CallbackAbandoned
    | Result
    | Counted
    | Edited
    | SetAside
    | Coalesced
    | AllowanceUsed,
    Field(discriminator="kind"),
]
"""The kinds with named fields, told apart by `kind`; the other known kinds parse to their own
`_Noted` models through `parse_event`."""
_TYPED: TypeAdapter[Any] = TypeAdapter(TypedEvent)


def parse_event(kind: str, data: Mapping[str, Any]) -> _Event | UnknownEvent:
    """The stored `data` of an event of `kind` as its model: `UnknownEvent` (every field kept)
    for a kind not known here, or for data its model cannot read."""
    model = MODELS.get(kind)
    if model is not None and "kind" not in data:
        try:
            return model.model_validate({**data, "kind": kind})
        except ValidationError:
            pass
    return UnknownEvent(kind=kind, fields=dict(data))


def event_data(event: _Event | UnknownEvent) -> dict[str, Any]:
    """The event as stored data: the fields given (never defaults filled in), without `kind`."""
    if isinstance(event, UnknownEvent):
        return dict(event.fields)
    return event.model_dump(mode="json", exclude_unset=True, exclude={"kind"})


def written(event: _Event) -> dict[str, Any]:
    """The event's data as a writer hands it to storage: the fields given, as given (storage
    makes them JSON), without `kind`."""
    return event.model_dump(exclude_unset=True, exclude={"kind"})


def parse_typed(event: Mapping[str, Any]) -> _Event:
    """One of `TypedEvent`'s kinds from a mapping that names its `kind` (the discriminated
    union); raises pydantic's ValidationError for anything else."""
    return _TYPED.validate_python(dict(event))  # type: ignore[no-any-return]


AuditEventModel = _Event
__all__ = [
    "ALLOWANCE_USED",
    "KINDS",
    "MODELS",
    "AuditEventModel",
    "TypedEvent",
    "UnknownEvent",
    "event_data",
    "parse_event",
    "parse_typed",
    "written",
]
