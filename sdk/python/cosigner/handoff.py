"""Wire models of a handoff: a step only a person may do, checked against the application.

A tool whose policy has a `handoff` section is not approved but handed to a person:
`POST /v1/approvals` answers `201` with a `HandoffStart` (the reason and the numbered steps
to show), the person presses Done or Cancel, and on Done Cosigner asks the application's
`expect` endpoint (`ExpectCall`, signed like callbacks) whether the step really happened
(`ExpectAnswer`). The decision object then has status `completed` (with a
`HandoffReceipt`), `failed`, `cancelled` or `expired`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

__all__ = [
    "DETAIL_MAX",
    "ExpectAnswer",
    "ExpectCall",
    "HandoffReceipt",
    "HandoffStart",
]

DETAIL_MAX = 500
"""The longest `detail` an application may give; a longer one is cut to this."""


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_Timestamp = Annotated[
    datetime,
    PlainSerializer(_iso, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        strict=True,
        json_schema_serialization_defaults_required=True,
    )


class HandoffStart(_Wire):
    """`201` for a handoff tool: a person must do the steps, then press Done (or Cancel)."""

    type: Literal["handoff_start"] = "handoff_start"
    approvalId: str
    executionId: str
    toolCallId: str
    toolName: str
    parameters: dict[str, Any] = Field(description="Redacted, exactly as displayed.")
    parametersDigest: str
    reason: str = Field(description="Why a person must do this, from the policy (not the agent).")
    steps: list[str] = Field(description="What the person does, in order.")
    timeout: int = Field(description="Milliseconds.")
    startedAt: _Timestamp
    expiresAt: _Timestamp
    status: Literal["pending"] = "pending"
    shortCode: str | None = None


class HandoffReceipt(_Wire):
    """Proof that the application confirmed the step: when, what it said, and its answer's hash."""

    checkedAt: _Timestamp
    delivery: str = Field(description="The webhook-id of the signed expect call.")
    responseDigest: str = Field(description='"sha256:" + hex of the raw body the application answered.')
    detail: str | None = None


class ExpectCall(_Wire):
    """The body Cosigner POSTs to a handoff's `expect` URL once a person pressed Done.

    `parameters` are the unredacted parameters: the application checks its own state for
    exactly this call. The request is signed like callbacks (Standard Webhooks, `cosigner.webhooks`).
    """

    approvalId: str
    tenant: str
    executionId: str
    toolCallId: str
    toolName: str
    parameters: dict[str, Any]


class ExpectAnswer(BaseModel):
    """The application's `200` answer: `{"done": true}` only if the step really happened."""

    model_config = ConfigDict(strict=True, extra="ignore")

    done: bool
    detail: Annotated[str, Field(max_length=DETAIL_MAX * 4)] | None = None
