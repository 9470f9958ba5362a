"""Every error Cosigner raises on purpose, each carrying the wire code and HTTP status.

    CosignerError                 base: a code, an HTTP status, a message naming the fix
    ├── InvalidRequest            400  the body or query is malformed; `field` names where
    ├── Unauthenticated           401  no bearer key, or one we do not know
    ├── InvalidSignature          401  an inbound webhook whose signature does not verify
    ├── PermissionDenied          403  the policy has a standing deny for this tool
    ├── NotAnApprover             403  the answering person may not decide this request
    ├── WrongConversation         403  the answer came from somewhere the request was not shown
    ├── WrongTenant               403  the answer came from another tenant's workspace or number
    ├── ApprovalNotFound          404  no such approval for this tenant
    ├── ParametersMismatch        409  same executionId + toolCallId, other call
    ├── AlreadyDecided            409  the approval is closed; the message names its state
    ├── ApprovalExpired           409  the approval expired before this answer
    ├── ApprovalPending           409  a result reported for an approval nobody decided yet
    ├── ApprovalModeUnsupported   422  a person is needed and the surface cannot host one
    ├── ToolCallCapExceeded       429  the execution used up its gated calls
    ├── OperationRejected         422  the application refused to prepare the operation (its safe message)
    ├── SurfaceUnavailable        502  the card or text could not be delivered
    ├── OperationUnavailable      503  the application could not be reached to prepare it
    └── PolicyError               (not on the wire) the policy file is invalid; lists every problem

Foreign errors (SQLAlchemy, slack_sdk, twilio) are translated into these at the boundary
where they occur and never cross into the engine.
"""

from __future__ import annotations

from typing import Any

from contracts.answers import ErrorBody
from contracts.enums import ErrorCode


class CosignerError(Exception):
    """Base of every deliberate error: a wire code, an HTTP status and a message."""

    code: ErrorCode = ErrorCode.INVALID_REQUEST
    status: int = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The JSON error body, `{"error": {"code", "message", ...details}}`."""
        return ErrorBody.of(self.code, self.message, self.details).dump()


class InvalidRequest(CosignerError):
    """The request is malformed; `field` names the offending field."""

    code = ErrorCode.INVALID_REQUEST
    status = 400


class Unauthenticated(CosignerError):
    """Missing or unknown API key."""

    code = ErrorCode.UNAUTHENTICATED
    status = 401


class InvalidSignature(CosignerError):
    """An inbound webhook whose signature does not verify."""

    code = ErrorCode.INVALID_SIGNATURE
    status = 401


class PermissionDenied(CosignerError):
    """A standing deny in the policy."""

    code = ErrorCode.PERMISSION_DENIED
    status = 403


class NotAnApprover(CosignerError):
    """The person answering is not an approver of this request."""

    code = ErrorCode.NOT_AN_APPROVER
    status = 403


class WrongConversation(CosignerError):
    """The answer came from a conversation or number the request was not delivered to."""

    code = ErrorCode.WRONG_CONVERSATION
    status = 403


class WrongTenant(CosignerError):
    """The answer came from another tenant's workspace, enterprise or number."""

    code = ErrorCode.WRONG_TENANT
    status = 403


class ApprovalNotFound(CosignerError):
    """No approval with this id belongs to the caller's tenant."""

    code = ErrorCode.APPROVAL_NOT_FOUND
    status = 404


class ParametersMismatch(CosignerError):
    """The executionId + toolCallId pair is already used for another call."""

    code = ErrorCode.PARAMETERS_MISMATCH
    status = 409


class AlreadyDecided(CosignerError):
    """The approval is already closed."""

    code = ErrorCode.ALREADY_DECIDED
    status = 409


class ApprovalExpired(CosignerError):
    """The approval expired; expiry means deny."""

    code = ErrorCode.APPROVAL_EXPIRED
    status = 409


class ApprovalPending(CosignerError):
    """The approval is still pending, so no call can have run and there is no result."""

    code = ErrorCode.APPROVAL_PENDING
    status = 409


class ApprovalModeUnsupported(CosignerError):
    """A person must approve, and the surface cannot host one."""

    code = ErrorCode.APPROVAL_MODE_UNSUPPORTED
    status = 422


class ToolCallCapExceeded(CosignerError):
    """The execution has used up its gated tool calls."""

    code = ErrorCode.TOOL_CALL_CAP_EXCEEDED
    status = 429


class SurfaceUnavailable(CosignerError):
    """The card or text could not be delivered; the request fails closed."""

    code = ErrorCode.SURFACE_UNAVAILABLE
    status = 502


class OperationRejected(CosignerError):
    """The application would not turn the request into a contract; nothing is pending."""

    code = ErrorCode.OPERATION_REJECTED
    status = 422


class OperationUnavailable(CosignerError):
    """The application's endpoint failed or could not be reached; nothing is pending."""

    code = ErrorCode.OPERATION_UNAVAILABLE
    status = 503


class PolicyError(Exception):
    """The policy file is invalid; `problems` lists each one as "key.path: what to do"."""

    def __init__(self, problems: list[str], source: str = "policy") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source} has {len(problems)} problem(s):\n{lines}")
