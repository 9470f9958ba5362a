"""The wire bodies of an approval: `approval_start` while pending, the decision object after."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from bot.approvals.grants import GrantSigner
from contracts.answers import (
    AllowanceDecider,
    ApprovalGiven,
    ApprovalStart,
    CurrentCall,
    DecidedBy,
    Decision,
    PersonDecider,
    SystemDecider,
)
from contracts.digest import parameters_digest
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.grants import GRANT_DETAIL_TYPE
from contracts.handoff import CODES, HandoffStart
from storage.record_columns import ts
from storage.records import Record

Start = ApprovalStart | HandoffStart
"""What a pending request answers with: `approval_start`, or `handoff_start` for a handoff."""


def actor_of(decided_by: DecidedBy) -> dict[str, Any]:
    """A decider as the wire and the audit record show it."""
    return decided_by.model_dump(mode="json", exclude_none=True)


def operation_fields(rec: Record, *, preview: bool) -> dict[str, Any]:
    """An operation's name and digest, with its preview (pending) or outcome (decided); never
    its arguments."""
    op = rec.operation
    if op is None:
        return {}
    fields: dict[str, Any] = {"operation": op.name, "argumentsDigest": op.arguments_digest}
    if preview:
        fields["preview"] = op.preview_model
    else:
        fields["outcome"] = op.outcome_model
    return fields


def contract_claims(rec: Record) -> dict[str, str]:
    """An operation's grant binds the contract too, so the application can check with the grant
    alone that it runs what was approved: `argumentsDigest` and the preview's `previewDigest`."""
    op = rec.operation
    if op is None:
        return {}
    return {"argumentsDigest": op.arguments_digest, "previewDigest": parameters_digest(op.preview)}


def approvals_of(rec: Record) -> list[ApprovalGiven]:
    """Every Approve counted toward a quorum above 1, as the wire shows it (none for a request
    one answer decides: `decidedBy` names its approver, and the body keeps its older shape)."""
    return [ApprovalGiven(by=v.by, surface=v.surface, at=ts(v.at)) for v in rec.votes]


def quorum_claims(rec: Record) -> dict[str, object]:
    """A grant past a quorum names every approver who made it."""
    if rec.quorum <= 1:
        return {}
    return {"approvers": [{"by": v.by, "surface": v.surface.value} for v in rec.votes]}


def allowance_claims(rec: Record) -> dict[str, object]:
    """A grant a standing allow gave says so: which one, and who granted it."""
    by = rec.decided_by
    if not isinstance(by, AllowanceDecider):
        return {}
    return {"allowance": {"id": by.allowanceId, "grantedBy": f"{by.surface.value}:{by.userId}"}}


def start_body(rec: Record, *, coalesced: bool = False) -> Start:
    """The `approval_start` object (`handoff_start` for a handoff); `coalesced` for the answer to
    an identical request that this pending one answers (`bot.approvals.coalescing`)."""
    if rec.handoff is not None:
        return HandoffStart(
            approvalId=rec.id,
            executionId=rec.execution_id,
            toolCallId=rec.tool_call_id,
            toolName=rec.tool_name,
            parameters=rec.parameters,
            parametersDigest=rec.digest,
            reason=rec.handoff.reason,
            steps=list(rec.handoff.steps),
            timeout=round((rec.expires_at - rec.created_at) * 1000),
            startedAt=ts(rec.created_at),
            expiresAt=ts(rec.expires_at),
            shortCode=rec.short_code,
        )
    return ApprovalStart(
        approvalId=rec.id,
        executionId=rec.execution_id,
        toolCallId=rec.tool_call_id,
        toolName=rec.tool_name,
        parameters=rec.parameters,
        parametersDigest=rec.digest,
        timeout=round((rec.expires_at - rec.created_at) * 1000),
        startedAt=ts(rec.created_at),
        expiresAt=ts(rec.expires_at),
        status=rec.status,
        shortCode=rec.short_code,
        editable=list(rec.edit.fields) if rec.edit is not None and not rec.closed else None,
        currentCall=current_call(rec),
        quorum=rec.quorum,
        approvals=approvals_of(rec),
        coalesced=coalesced,
        **operation_fields(rec, preview=True),
    )


def current_call(rec: Record) -> CurrentCall | None:
    """A pending call an approver edited: the call the approvers are asked to approve now."""
    result = rec.edit.result if rec.edit is not None else None
    if result is None or rec.closed:
        return None
    return CurrentCall(
        parameters=result.parameters,
        editedFields=list(result.fields),
        digest=result.digest,
        editedBy=result.by,
        editedOn=SurfaceType(result.surface) if result.surface else None,
    )


def edit_fields(rec: Record) -> dict[str, Any]:
    """An approved edit's fields of the decision object: the call to run (as shown), the changed
    parameters, both digests; nothing for a call approved as asked."""
    result = rec.edit.result if rec.edit is not None else None
    if result is None or rec.status is not ApprovalStatus.APPROVED:
        return {}
    return {
        "edited": True,
        "parameters": result.parameters,
        "editedFields": list(result.fields),
        "originalDigest": rec.digest,
        "digest": result.digest,
    }


def step_up_claims(rec: Record) -> dict[str, Any]:
    """A step-up approval's grant says how its approver authenticated (RFC 8176 `amr`): every
    Approve that counted was confirmed with a passkey."""
    if rec.step_up and rec.status is ApprovalStatus.APPROVED and isinstance(rec.decided_by, PersonDecider):
        return {"amr": ["webauthn"]}
    return {}


def approved_digest(rec: Record) -> str:
    """The digest of the call to run: the edited one when an approver edited it."""
    result = rec.edit.result if rec.edit is not None else None
    return result.digest if result is not None and rec.status is ApprovalStatus.APPROVED else rec.digest


def grant_id(approval_id: str, digest: str, issued_at: int) -> str:
    """The grant's `jti`: one per approval and call, the same on every read and replica (the
    token is deterministic), so an executor's seen-set refuses its second use."""
    seed = f"{approval_id}\n{digest}\n{issued_at}".encode()
    return "grt_" + base64.urlsafe_b64encode(hashlib.sha256(seed).digest()[:16]).decode().rstrip("=")


def standard_claims(rec: Record, digest: str, issued_at: int, audience: str | None) -> dict[str, object]:
    """The registered and RFC 9396 claims beside Cosigner's own: `jti`, `aud` where the policy
    names the executor, and `authorization_details` saying what exactly is authorized."""
    detail: dict[str, object] = {
        "type": GRANT_DETAIL_TYPE,
        "tool": rec.tool_name,
        "parameters_digest": digest,
    }
    if rec.operation is not None:
        detail["arguments_digest"] = rec.operation.arguments_digest
    claims: dict[str, object] = {
        "jti": grant_id(rec.id, digest, issued_at),
        "authorization_details": [detail],
    }
    if audience is not None:
        claims["aud"] = audience
    return claims


def decision_body(
    rec: Record, signer: GrantSigner, grant_ttl: float, audience: str | None = None
) -> Decision:
    """The decision object; `grant` (a signed JWS) only when approved, binding the call to run
    (for the executor `audience`, where the policy names one)."""
    grant = None
    digest = approved_digest(rec)
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
                "digest": digest,
                "iat": int(decided_at),
                "exp": int(decided_at + grant_ttl),
                **contract_claims(rec),
                **quorum_claims(rec),
                **step_up_claims(rec),
                **standard_claims(rec, digest, int(decided_at), audience),
                **allowance_claims(rec),
            }
        )
    handoff = rec.handoff
    return Decision(
        approvalId=rec.id,
        executionId=rec.execution_id,
        toolCallId=rec.tool_call_id,
        toolName=rec.tool_name,
        status=rec.status,
        decidedBy=rec.decided_by or SystemDecider(code="UNKNOWN"),
        decidedAt=ts(decided_at),
        comment=rec.comment,
        parametersDigest=digest,
        grant=grant,
        quorum=rec.quorum,
        approvals=approvals_of(rec),
        traceId=rec.trace_id,
        **operation_fields(rec, preview=False),
        code=CODES.get(rec.status) if handoff is not None else None,
        receipt=handoff.receipt if handoff is not None else None,
        detail=handoff.detail if handoff is not None else None,
        **edit_fields(rec),
    )
