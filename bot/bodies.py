"""The wire bodies of an approval: `approval_start` while pending, the decision object after."""

from __future__ import annotations

from typing import Any

from bot.grants import GrantSigner
from contracts.enums import ApprovalStatus
from contracts.wire import DecidedBy, SystemDecider
from storage.records import Record, iso


def actor_of(decided_by: DecidedBy) -> dict[str, Any]:
    """A decider as the wire and the audit record show it."""
    return decided_by.model_dump(mode="json", exclude_none=True)


def start_body(rec: Record) -> dict[str, Any]:
    """The `approval_start` object."""
    return {
        "type": "approval_start",
        "approvalId": rec.id,
        "executionId": rec.execution_id,
        "toolCallId": rec.tool_call_id,
        "toolName": rec.tool_name,
        "parameters": rec.parameters,
        "parametersDigest": rec.digest,
        "timeout": round((rec.expires_at - rec.created_at) * 1000),
        "startedAt": iso(rec.created_at),
        "expiresAt": iso(rec.expires_at),
        "status": rec.status.value,
        "shortCode": rec.short_code,
    }


def decision_body(rec: Record, signer: GrantSigner, grant_ttl: float) -> dict[str, Any]:
    """The decision object; `grant` only when approved."""
    grant = None
    decided_at = rec.decided_at or rec.created_at
    if rec.status is ApprovalStatus.APPROVED:
        grant = signer.sign(
            {
                "iss": "cosigner",
                "sub": rec.id,
                "tenant": rec.tenant,
                "executionId": rec.execution_id,
                "toolCallId": rec.tool_call_id,
                "toolName": rec.tool_name,
                "digest": rec.digest,
                "iat": int(decided_at),
                "exp": int(decided_at + grant_ttl),
            }
        )
    return {
        "type": "approval_decided",
        "approvalId": rec.id,
        "executionId": rec.execution_id,
        "toolCallId": rec.tool_call_id,
        "toolName": rec.tool_name,
        "status": rec.status.value,
        "decidedBy": (rec.decided_by or SystemDecider(code="UNKNOWN")).model_dump(
            mode="json", exclude_none=True
        ),
        "decidedAt": iso(decided_at),
        "comment": rec.comment,
        "parametersDigest": rec.digest,
        "grant": grant,
    }
