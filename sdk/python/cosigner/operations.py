"""Operation contracts on the wire: what Cosigner and an application say to each other.

The agent proposes an operation; the application `prepare`s it into typed arguments and a
fixed preview (both frozen under `argumentsDigest`); a person approves that contract; the
application `execute`s it once and answers an outcome; `status` tells a lost answer.
Every call is a `POST` signed by Standard Webhooks, as callbacks are (`cosigner.webhooks`).

    cosigner → application          application → cosigner
    PrepareCall                     Prepared | PrepareRejection (422)
    ExecuteCall                     Succeeded | NeedsReconciliation | RevisionRequired | TerminalFailure
    StatusCall                      any of those four | NotStarted | InProgress

`OperationOutcome` is the outcome as the agent is told it on the decision object.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cosigner.digest import parameters_digest

__all__ = [
    "ExecuteAnswer",
    "ExecuteCall",
    "ExecuteOutcome",
    "InProgress",
    "NeedsReconciliation",
    "NotStarted",
    "OperationOutcome",
    "OutcomeType",
    "PrepareCall",
    "PrepareRejection",
    "Prepared",
    "Preview",
    "PreviewField",
    "RevisionRequired",
    "StatusAnswer",
    "StatusCall",
    "Succeeded",
    "TerminalFailure",
    "arguments_digest",
    "execute_answer",
    "outcome_of",
    "status_answer",
]

OPERATION_NAME = r"^[A-Za-z0-9_.\-]{1,128}$"
"""The shape of an operation name (the same as a tool name)."""


class OutcomeType(StrEnum):
    """How an executed operation ended; every type but `needs_reconciliation` is final."""

    SUCCEEDED = "succeeded"
    NEEDS_RECONCILIATION = "needs_reconciliation"
    REVISION_REQUIRED = "revision_required"
    TERMINAL_FAILURE = "terminal_failure"


def _absent(value: Any) -> bool:
    return value is None


class Model(BaseModel):
    """Base of the contract models: unknown fields refused, nothing coerced."""

    model_config = ConfigDict(
        extra="forbid", strict=True, populate_by_name=True, json_schema_serialization_defaults_required=True
    )


Text = Annotated[str, Field(min_length=1, max_length=2000)]

# --- the preview: what a person approves -------------------------------------


class PreviewField(Model):
    """One labelled line of the preview, e.g. Amount: $129.00."""

    label: Annotated[str, Field(min_length=1, max_length=200)]
    value: Annotated[str, Field(max_length=2000)]


class Preview(Model):
    """The application's fixed description of the contract: title, labelled fields, effects."""

    title: Annotated[str, Field(min_length=1, max_length=200)]
    fields: list[PreviewField] = Field(default_factory=list, max_length=50)
    effects: list[Text] = Field(default_factory=list, max_length=20)


def arguments_digest(operation: str, arguments: dict[str, Any], preview: Preview) -> str:
    """`sha256:` + hex of the RFC 8785 form of `{"operation", "arguments", "preview"}`."""
    return parameters_digest(
        {"operation": operation, "arguments": arguments, "preview": preview.model_dump(mode="json")}
    )


# --- cosigner → application ------------------------------------------------------


class PrepareCall(Model):
    """Turn the agent's request into a contract (typed arguments and a preview)."""

    type: Literal["prepare"] = "prepare"
    operation: str
    tenant: str
    proposalId: str
    executionId: str
    toolCallId: str
    request: dict[str, Any]
    requestedBy: dict[str, Any]


class ExecuteCall(Model):
    """Carry out the approved contract, once: `idempotencyKey` is the same on every retry."""

    type: Literal["execute"] = "execute"
    operation: str
    tenant: str
    proposalId: str
    arguments: dict[str, Any]
    preview: Preview
    argumentsDigest: str
    approvedBy: dict[str, Any]
    approvedAt: str
    idempotencyKey: str
    grant: str | None = None


class StatusCall(Model):
    """What became of the execution with this `idempotencyKey`?"""

    type: Literal["status"] = "status"
    operation: str
    tenant: str
    proposalId: str
    idempotencyKey: str


# --- application → cosigner ------------------------------------------------------


class Prepared(Model):
    """`200` to prepare: the frozen arguments and preview."""

    arguments: dict[str, Any]
    preview: Preview
    expiresInSeconds: Annotated[int, Field(ge=1, le=7 * 24 * 3600)] | None = None


class RejectionDetail(Model):
    """The safe text the model may read, saying what to correct."""

    message: Text


class PrepareRejection(Model):
    """`422` to prepare: the request cannot become a contract."""

    error: RejectionDetail


class Succeeded(Model):
    """The operation was carried out."""

    outcome: Literal["succeeded"] = "succeeded"
    result: dict[str, Any] | None = None
    message: Text | None = None


class NeedsReconciliation(Model):
    """It may or may not have happened yet; Cosigner asks `status` until it knows."""

    outcome: Literal["needs_reconciliation"] = "needs_reconciliation"
    statusPath: Text
    message: Text | None = None


class RevisionRequired(Model):
    """Revalidation failed against current state: nothing was done; `reason` says why."""

    outcome: Literal["revision_required"] = "revision_required"
    reason: Text


class TerminalFailure(Model):
    """It failed for good; only a reference for the operator is given."""

    outcome: Literal["terminal_failure"] = "terminal_failure"
    correlationId: Annotated[str, Field(min_length=1, max_length=200)]


class NotStarted(Model):
    """`status`: no execution with that key began, so `execute` may be sent again."""

    outcome: Literal["not_started"] = "not_started"


class InProgress(Model):
    """`status`: the execution is still running."""

    outcome: Literal["in_progress"] = "in_progress"


ExecuteAnswer = Annotated[
    Succeeded | NeedsReconciliation | RevisionRequired | TerminalFailure, Field(discriminator="outcome")
]
StatusAnswer = Annotated[
    Succeeded | NeedsReconciliation | RevisionRequired | TerminalFailure | NotStarted | InProgress,
    Field(discriminator="outcome"),
]
_EXECUTE: TypeAdapter[Any] = TypeAdapter(ExecuteAnswer)
_STATUS: TypeAdapter[Any] = TypeAdapter(StatusAnswer)
ExecuteOutcome = Succeeded | NeedsReconciliation | RevisionRequired | TerminalFailure


def execute_answer(raw: bytes) -> ExecuteOutcome:
    """An `execute` answer body; raises `pydantic.ValidationError` for anything else."""
    found: ExecuteOutcome = _EXECUTE.validate_json(raw)
    return found


def status_answer(raw: bytes) -> ExecuteOutcome | NotStarted | InProgress:
    """A `status` answer body; raises `pydantic.ValidationError` for anything else."""
    found: ExecuteOutcome | NotStarted | InProgress = _STATUS.validate_json(raw)
    return found


# --- cosigner → agent --------------------------------------------------------------


class OperationOutcome(Model):
    """The outcome on the decision object; `terminal_failure` carries its reference only."""

    type: OutcomeType
    message: str | None = Field(default=None, exclude_if=_absent)
    result: dict[str, Any] | None = Field(default=None, exclude_if=_absent)
    statusPath: str | None = Field(default=None, exclude_if=_absent)
    reason: str | None = Field(default=None, exclude_if=_absent)
    correlationId: str | None = Field(default=None, exclude_if=_absent)

    @property
    def final(self) -> bool:
        """False only while the application is still reconciling."""
        return self.type is not OutcomeType.NEEDS_RECONCILIATION

    def summary(self) -> str:
        """One line for people: "Refunded $129.00", "Needs reconciliation", "Revision required: …"."""
        if self.type is OutcomeType.SUCCEEDED:
            return self.message or "Succeeded"
        if self.type is OutcomeType.NEEDS_RECONCILIATION:
            return "Needs reconciliation" + (f": {self.message}" if self.message else "")
        if self.type is OutcomeType.REVISION_REQUIRED:
            return f"Revision required: {self.reason}"
        return f"Failed, reference {self.correlationId}"


def outcome_of(answer: ExecuteOutcome) -> OperationOutcome:
    """The agent's view of an application's outcome (a terminal failure keeps only its reference)."""
    if isinstance(answer, Succeeded):
        return OperationOutcome(type=OutcomeType.SUCCEEDED, message=answer.message, result=answer.result)
    if isinstance(answer, NeedsReconciliation):
        return OperationOutcome(
            type=OutcomeType.NEEDS_RECONCILIATION, message=answer.message, statusPath=answer.statusPath
        )
    if isinstance(answer, RevisionRequired):
        return OperationOutcome(type=OutcomeType.REVISION_REQUIRED, reason=answer.reason)
    return OperationOutcome(type=OutcomeType.TERMINAL_FAILURE, correlationId=answer.correlationId)
