"""Every error of the Cosigner API as one exception class per wire code.

The server raises and serialises these same classes, and the SDK raises them from an
error body, so a code, its HTTP status and its class are defined here and nowhere else.

    CosignerError                 base: `code`, `status`, `message`, `details` (the body's extra fields)
    ├── InvalidRequest            400  the body or query is malformed; `details["field"]` names where
    │   └── BodyTooLarge          413  the body is longer than the route takes (`details["limit"]` bytes)
    ├── Unauthenticated           401  no bearer key, or one Cosigner does not know
    ├── InvalidSignature          401  a webhook or callback whose signature does not verify
    │   └── ReplayedDelivery           a callback delivery already received (answer 2xx, skip it)
    ├── PermissionDenied          403  the policy, or an approver's standing deny, refuses this tool
    │   └── ApprovalDenied             a person (or Cosigner, failing closed) denied, or it was cancelled
    ├── NotAnApprover             403  the answering person may not decide this request
    ├── WrongConversation         403  the answer came from somewhere the request was not shown
    ├── WrongTenant               403  the answer came from another tenant's workspace or number
    ├── WrongKeyScope             403  a key used outside its scope; `details["needs"]` names the one needed
    ├── StepUpRequired            403  an Approve of a step-up call counts only with a passkey in the inbox
    ├── ApprovalNotFound          404  no such approval for this tenant
    ├── DenialNotFound            404  no such standing deny for this tenant
    ├── AllowanceNotFound         404  no such standing allow for this caller
    ├── ParametersMismatch        409  same executionId + toolCallId, other call (or arguments changed)
    ├── AlreadyDecided            409  the approval is closed; the message names its state
    ├── ApprovalExpired           409  the approval expired: expiry means deny
    ├── ApprovalPending           409  a result reported for an approval nobody decided yet
    ├── ApprovalModeUnsupported   422  a person is needed and the surface cannot host one
    ├── ToolCallCapExceeded       429  the execution used up its gated calls
    ├── OperationRejected         422  the application would not prepare the operation: fix the request
    ├── SurfaceUnavailable        502  the card or text could not be delivered
    ├── OperationUnavailable      503  the application could not be reached; nothing is pending
    ├── InternalError             500  Cosigner failed unexpectedly; nothing was decided, retry
    ├── HandoffFailed             409  a handoff's step was not confirmed by the application
    ├── HandoffCancelled          409  a handoff was cancelled
    ├── HandoffTimeout            409  nobody pressed Done on a handoff in time
    └── ToolDefinitionChanged     409  (the MCP gateway) a tool whose definition is not the approved one

Apart from the wire codes, `ConfigurationError` (a `ValueError`) is raised when a client is
built without Cosigner's URL or an API key; its message names the argument and the variable.

`ApprovalDenied` and `ApprovalExpired` are also what `gate` raises when the decision is not
an approval (the three Handoff errors, for a handoff that did not complete); the decision is
then on `.decision` and a denial's comment on `.comment`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cosigner.answers import ErrorBody
from cosigner.enums import ErrorCode
from cosigner.grants import GrantRefused

if TYPE_CHECKING:
    from cosigner.decision import Decision

__all__ = [
    "AllowanceNotFound",
    "AlreadyDecided",
    "ApprovalDenied",
    "ApprovalExpired",
    "ApprovalModeUnsupported",
    "ApprovalNotFound",
    "ApprovalPending",
    "BodyTooLarge",
    "ConfigurationError",
    "CosignerError",
    "DenialNotFound",
    "GrantRefused",
    "HandoffCancelled",
    "HandoffFailed",
    "HandoffTimeout",
    "InternalError",
    "InvalidRequest",
    "InvalidSignature",
    "NotAnApprover",
    "OperationRejected",
    "OperationUnavailable",
    "ParametersMismatch",
    "PermissionDenied",
    "ReplayedDelivery",
    "StepUpRequired",
    "SurfaceUnavailable",
    "ToolCallCapExceeded",
    "ToolDefinitionChanged",
    "Unauthenticated",
    "WrongConversation",
    "WrongKeyScope",
    "WrongTenant",
    "error_for",
]


class ConfigurationError(ValueError):
    """A client built without what it needs (its URL, an API key); the message names the fix."""


class CosignerError(Exception):
    """Base of every Cosigner error: a wire code, an HTTP status, a message naming the fix.

    `code` is an ErrorCode, or the code as sent when a newer server answers one this
    version does not know.
    """

    code: str = ErrorCode.INVALID_REQUEST
    status: int = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.decision: Decision | None = None

    def body(self) -> dict[str, Any]:
        """The JSON error body: `{"error": {"code", "message", ...details}}`."""
        if isinstance(self.code, ErrorCode):
            return ErrorBody.of(self.code, self.message, self.details).dump()
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class InvalidRequest(CosignerError):
    """The request is malformed; `details["field"]` names the offending field."""

    code = ErrorCode.INVALID_REQUEST
    status = 400


class BodyTooLarge(InvalidRequest):
    """The body is longer than the route takes (`details["limit"]` bytes); nothing was done."""

    status = 413


class Unauthenticated(CosignerError):
    """Missing or unknown API key."""

    code = ErrorCode.UNAUTHENTICATED
    status = 401


class InvalidSignature(CosignerError):
    """An inbound webhook or callback whose signature does not verify, or that is too old."""

    code = ErrorCode.INVALID_SIGNATURE
    status = 401


class ReplayedDelivery(InvalidSignature):
    """A correctly signed callback delivery that was already received; process it once."""


class PermissionDenied(CosignerError):
    """The policy denies this tool, or an approver's standing deny does (`details["denial"]`)."""

    code = ErrorCode.PERMISSION_DENIED
    status = 403


class ApprovalDenied(PermissionDenied):
    """The call was not approved: denied by a person or by Cosigner, or cancelled."""

    @property
    def comment(self) -> str | None:
        """The approver's comment, if any."""
        return self.decision.comment if self.decision is not None else None


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


class WrongKeyScope(CosignerError):
    """A key used outside its scope; `details["needs"]` names the scope the route needs."""

    code = ErrorCode.KEY_SCOPE
    status = 403


class StepUpRequired(CosignerError):
    """The policy asks for step-up on this call: an Approve counts only once the approver
    confirms it with a passkey in the inbox (a Deny counts anywhere)."""

    code = ErrorCode.STEP_UP_REQUIRED
    status = 403


class ApprovalNotFound(CosignerError):
    """No approval with this id belongs to the caller's tenant."""

    code = ErrorCode.APPROVAL_NOT_FOUND
    status = 404


class DenialNotFound(CosignerError):
    """No standing deny with this id belongs to the caller's tenant."""

    code = ErrorCode.DENIAL_NOT_FOUND
    status = 404


class AllowanceNotFound(CosignerError):
    """No standing allow with this id belongs to the caller's tenant (or to the person asking)."""

    code = ErrorCode.ALLOWANCE_NOT_FOUND
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
    """The application refused to prepare the operation; its safe message says what to correct."""

    code = ErrorCode.OPERATION_REJECTED
    status = 422


class OperationUnavailable(CosignerError):
    """The operation's application could not be reached; nothing is pending, so asking again is safe."""

    code = ErrorCode.OPERATION_UNAVAILABLE
    status = 503


class InternalError(CosignerError):
    """Cosigner failed unexpectedly (its log has the cause); nothing was decided, so retrying is safe."""

    code = ErrorCode.INTERNAL
    status = 500


class HandoffFailed(CosignerError):
    """A handoff's step was not confirmed: the application said no, or could not be asked."""

    code = ErrorCode.HANDOFF_FAILED
    status = 409


class HandoffCancelled(CosignerError):
    """A handoff was cancelled by the person (or the agent)."""

    code = ErrorCode.HANDOFF_CANCELLED
    status = 409


class HandoffTimeout(CosignerError):
    """Nobody pressed Done on a handoff before it expired."""

    code = ErrorCode.HANDOFF_TIMEOUT
    status = 409


class ToolDefinitionChanged(CosignerError):
    """The MCP gateway's answer to a call of a tool whose definition (description, schema,
    annotations) is not the one approved, or is new: not run until an approver approves it."""

    code = ErrorCode.TOOL_DEFINITION_CHANGED
    status = 409


BY_CODE: dict[str, type[CosignerError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        InvalidSignature,
        PermissionDenied,
        NotAnApprover,
        WrongConversation,
        WrongTenant,
        WrongKeyScope,
        StepUpRequired,
        ApprovalNotFound,
        DenialNotFound,
        AllowanceNotFound,
        ParametersMismatch,
        AlreadyDecided,
        ApprovalExpired,
        ApprovalPending,
        ApprovalModeUnsupported,
        ToolCallCapExceeded,
        SurfaceUnavailable,
        OperationRejected,
        OperationUnavailable,
        InternalError,
        HandoffFailed,
        HandoffCancelled,
        HandoffTimeout,
        ToolDefinitionChanged,
    )
}


def error_for(status: int, code: str, message: str, details: dict[str, Any]) -> CosignerError:
    """The exception for an error body; a code this SDK does not know keeps its code and status."""
    cls = BY_CODE.get(code)
    if cls is InvalidRequest and status == BodyTooLarge.status:
        cls = BodyTooLarge
    if cls is not None:
        return cls(message, **details)
    unknown = CosignerError(message, **details)
    unknown.code, unknown.status = code, status
    return unknown
