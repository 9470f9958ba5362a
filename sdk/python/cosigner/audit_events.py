"""Typed audit events: one pydantic model per kind of event on an approval's audit chain, as
the server writes and reads them and as `AuditEvent.typed()` (`cosigner.answers`) reads an
audit trail the API returned.

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

from cosigner.enums import ApprovalStatus, AuditEvent

ALLOWANCE_USED = "allowance_used"  # a standing allow let the call run with nobody asked


class _Event(BaseModel):
    """What every event model shares: extra fields are kept, never refused."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    kind: str  # the stored kind; each model names its own (never part of the stored data)


class OnCallNote(BaseModel):
    """What a request or an escalation step records of on call: the rotations, who was on
    call, who of them was asked and who is unknown here; or why nobody on call could be
    asked (`fallback`), and the rule's other approvers were asked instead."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    rotations: list[str] | None = None
    onCall: list[str] | None = None
    asked: list[str] | None = None
    unknown: list[str] | None = None
    fallback: str | None = None


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


class SmsStatus(_Event):
    """A delivery status the SMS provider reported."""

    kind: Literal["sms_status"] = "sms_status"
    messageSid: str | None = None
    status: str | None = None
    errorCode: str | None = None


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


class Prepared(_Event):
    """The application's contract, frozen under its digest (the arguments are not repeated)."""

    kind: Literal["prepared"] = "prepared"
    operation: str | None = None
    preview: Any = None
    argumentsDigest: str | None = None


class Claimed(_Event):
    """The approved operation is now executing, once."""

    kind: Literal["claimed"] = "claimed"
    argumentsDigest: str | None = None


class ExecuteSent(_Event):
    """The operation's execute request was sent (`send` counts them)."""

    kind: Literal["execute_sent"] = "execute_sent"
    send: int | None = None
    idempotencyKey: str | None = None


class StatusAsked(_Event):
    """The operation's status was asked: what it answered."""

    kind: Literal["status_asked"] = "status_asked"
    answer: str | None = None


class Outcome(_Event):
    """The operation's final outcome (its wire form)."""

    kind: Literal["outcome"] = "outcome"
    outcome: dict[str, Any] | None = None


class Reconciled(_Event):
    """The operation's outcome, as settled by reconciling."""

    kind: Literal["reconciled"] = "reconciled"
    outcome: dict[str, Any] | None = None


class HandoffDone(_Event):
    """Done was pressed; the check against `expect` is queued under `delivery`."""

    kind: Literal["handoff_done"] = "handoff_done"
    delivery: str | None = None


class HandoffCheck(_Event):
    """What the handoff's `expect` endpoint answered (or why it could not be asked)."""

    kind: Literal["handoff_check"] = "handoff_check"
    delivery: str | None = None
    status: int | None = None
    done: bool | None = None
    error: str | None = None
    detail: str | None = None


class Reminded(_Event):
    """The one reminder: to whom, and whether it went out."""

    kind: Literal["reminded"] = "reminded"
    surface: str | None = None
    approvers: list[str] | None = None
    sent: bool | None = None
    why: str | None = None


class Escalated(_Event):
    """An escalation step: the request goes to its route too."""

    kind: Literal["escalated"] = "escalated"
    step: int | None = None
    to: str | None = None
    route: dict[str, Any] | None = None
    oncall: OnCallNote | None = None


class EscalationDelivered(_Event):
    """Where the escalated request was shown."""

    kind: Literal["escalation_delivered"] = "escalation_delivered"
    step: int | None = None
    surface: str | None = None
    conversation: str | None = None
    messages: list[Any] | None = None


class EscalationFailed(_Event):
    """The escalation step's route could not be reached (`retrying`: the job tries again)."""

    kind: Literal["escalation_failed"] = "escalation_failed"
    step: int | None = None
    why: str | None = None
    retrying: bool | None = None


class EditTexted(_Event):
    """The edited call texted to the numbers shown an earlier version."""

    kind: Literal["edit_texted"] = "edit_texted"
    digest: str | None = None
    texted: list[str] | None = None
    problems: list[str] | None = None


class _Email(_Event):
    # The data's own `kind` (which email: `request`, `notice`, …) is `email` here: `kind` is the
    # event's. It is stored as `kind`, and read back from it (`parse_event`).
    email: str | None = Field(default=None, serialization_alias="kind")


class EmailSent(_Email):
    """The SMTP server accepted the request's email (and refused these recipients)."""

    kind: Literal["email_sent"] = "email_sent"
    to: list[str] | None = None
    messageId: str | None = None
    refused: dict[str, Any] | None = None


class EmailFailed(_Email):
    """The SMTP server refused or could not be reached: retried or not, and then what."""

    kind: Literal["email_failed"] = "email_failed"
    attempt: int | None = None
    reason: str | None = None
    retrying: bool | None = None
    retryAt: str | None = None
    then: str | None = None


class _Pushed(_Event):
    sent: int | None = None
    gone: int | None = None
    failed: dict[str, str] | None = None  # each failure by push service
    retrying: bool | None = None
    error: str | None = None  # a push that could not be tried at all


class PushSent(_Pushed):
    """A Web Push message accepted for a device."""

    kind: Literal["push_sent"] = "push_sent"


class PushFailed(_Pushed):
    """A push service refused a message."""

    kind: Literal["push_failed"] = "push_failed"


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
    | AllowanceUsed
    | SmsStatus
    | StandingDenySet
    | StandingDenyLifted
    | SignedIn
    | Prepared
    | Claimed
    | ExecuteSent
    | StatusAsked
    | Outcome
    | Reconciled
    | HandoffDone
    | HandoffCheck
    | Reminded
    | Escalated
    | EscalationDelivered
    | EscalationFailed
    | EditTexted
    | PasskeyConfirmed
    | EmailSent
    | EmailFailed
    | PushSent
    | PushFailed
    | AllowanceGranted
    | AllowanceRevoked,
    Field(discriminator="kind"),
]
"""Every known kind, told apart by `kind` (`parse_typed`); `parse_event` reads stored data,
whose kind is stored beside it."""
_TYPED: TypeAdapter[Any] = TypeAdapter(TypedEvent)


def _own_kind(model: type[_Event]) -> str | None:
    # The field a model keeps its data's own `kind` in (stored as `kind`), if it has one.
    return next((n for n, f in model.model_fields.items() if f.serialization_alias == "kind"), None)


def parse_event(kind: str, data: Mapping[str, Any]) -> _Event | UnknownEvent:
    """The stored `data` of an event of `kind` as its model: `UnknownEvent` (every field kept)
    for a kind not known here, or for data its model cannot read."""
    model = MODELS.get(kind)
    if model is not None:
        fields = dict(data)
        own = _own_kind(model)
        if own is not None and "kind" in fields and own not in fields:
            fields[own] = fields.pop("kind")  # an email's own kind (`_Email`)
        if "kind" not in fields:
            try:
                return model.model_validate({**fields, "kind": kind})
            except ValidationError:
                pass
    return UnknownEvent(kind=kind, fields=dict(data))


def event_data(event: _Event | UnknownEvent) -> dict[str, Any]:
    """The event as stored data: the fields given (never defaults filled in), without `kind`."""
    if isinstance(event, UnknownEvent):
        return dict(event.fields)
    return event.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"kind"})


def written(event: _Event) -> dict[str, Any]:
    """The event's data as a writer hands it to storage: the fields given, as given (storage
    makes them JSON), without `kind`."""
    return event.model_dump(by_alias=True, exclude_unset=True, exclude={"kind"})


def parse_typed(event: Mapping[str, Any]) -> _Event:
    """One of `TypedEvent`'s kinds from a mapping that names its `kind` (the discriminated
    union); raises pydantic's ValidationError for anything else."""
    return _TYPED.validate_python(dict(event))  # type: ignore[no-any-return]


AuditEventModel = _Event
Closing = _Closing
__all__ = [
    "ALLOWANCE_USED",
    "KINDS",
    "KNOWN",
    "MODELS",
    "AllowanceGranted",
    "AllowanceRevoked",
    "AllowanceUsed",
    "Approved",
    "AuditEventModel",
    "CallbackAbandoned",
    "CallbackAttempt",
    "CallbackRefused",
    "Cancelled",
    "Claimed",
    "Closing",
    "Coalesced",
    "Completed",
    "Counted",
    "DecisionRefused",
    "Delivered",
    "Denied",
    "EditTexted",
    "Edited",
    "EmailFailed",
    "EmailSent",
    "Escalated",
    "EscalationDelivered",
    "EscalationFailed",
    "ExecuteSent",
    "Expired",
    "Failed",
    "HandoffCheck",
    "HandoffDone",
    "OnCallNote",
    "Outcome",
    "PasskeyConfirmed",
    "Prepared",
    "PushFailed",
    "PushSent",
    "Reconciled",
    "Reminded",
    "Requested",
    "Result",
    "SetAside",
    "SignedIn",
    "SmsStatus",
    "StandingDenyLifted",
    "StandingDenySet",
    "StatusAsked",
    "TypedEvent",
    "UnknownEvent",
    "event_data",
    "parse_event",
    "parse_typed",
    "written",
]
