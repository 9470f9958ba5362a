"""The audit events of what happened around a request: where it was delivered, reminders and
escalations, texts, emails and pushes, the agent's callback, an operation's execution and a
handoff's check (`cosigner.audit_events` gathers every kind)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cosigner._audit_base import OnCallNote, _Event


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


class SmsStatus(_Event):
    """A delivery status the SMS provider reported."""

    kind: Literal["sms_status"] = "sms_status"
    messageSid: str | None = None
    status: str | None = None
    errorCode: str | None = None


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
