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

The models are defined in `cosigner.audit_decisions` (the request and what is decided about
it) and `cosigner.audit_notes` (what happened around it), on `cosigner._audit_base`; this
module gathers them, and is where every reader and writer takes them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from cosigner._audit_base import OnCallNote, UnknownEvent, _Event
from cosigner.audit_decisions import (
    AllowanceGranted,
    AllowanceRevoked,
    AllowanceUsed,
    Approved,
    Cancelled,
    Coalesced,
    Completed,
    Counted,
    DecisionRefused,
    Denied,
    Edited,
    Expired,
    Failed,
    PasskeyConfirmed,
    Requested,
    Result,
    SetAside,
    SignedIn,
    StandingDenyLifted,
    StandingDenySet,
    _Closing,
)
from cosigner.audit_notes import (
    CallbackAbandoned,
    CallbackAttempt,
    CallbackRefused,
    Claimed,
    Delivered,
    EditTexted,
    EmailFailed,
    EmailSent,
    Escalated,
    EscalationDelivered,
    EscalationFailed,
    ExecuteSent,
    HandoffCheck,
    HandoffDone,
    Outcome,
    Prepared,
    PushFailed,
    PushSent,
    Reconciled,
    Reminded,
    SmsStatus,
    StatusAsked,
)
from cosigner.enums import ApprovalStatus, AuditEvent

ALLOWANCE_USED = "allowance_used"  # a standing allow let the call run with nobody asked


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
