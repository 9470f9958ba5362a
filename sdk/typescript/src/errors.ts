/**
 * Every error of the Cosigner API as one class per wire code, as in the Python SDK.
 *
 *     CosignerError                 base: `code`, `status`, `message`, `details`
 *     ├── InvalidRequest            400  the body or query is malformed
 *     ├── Unauthenticated           401  no bearer key, or one Cosigner does not know
 *     ├── InvalidSignature          401  a callback whose signature does not verify
 *     ├── PermissionDenied          403  the policy, or a standing deny, refuses this tool
 *     │   └── ApprovalDenied             a person (or Cosigner) denied, or it was cancelled
 *     ├── KeyScopeError             403  an API key used outside its scope (agent vs approver)
 *     ├── StepUpRequired            403  an Approve of a step-up call needs a passkey in the inbox
 *     ├── NotAnApprover             403  the answering person may not decide this request
 *     ├── WrongConversation         403  the answer came from somewhere the request was not shown
 *     ├── WrongTenant               403  the answer came from another tenant
 *     ├── ApprovalNotFound          404  no such approval for this tenant
 *     ├── DenialNotFound            404  no such standing deny for this tenant
 *     ├── AllowanceNotFound         404  no such standing allow for this caller
 *     ├── ParametersMismatch        409  same executionId + toolCallId, other call
 *     ├── AlreadyDecided            409  the approval is closed
 *     ├── ApprovalExpired           409  the approval expired: expiry means deny
 *     ├── ApprovalPending           409  a result reported for an undecided approval
 *     ├── ApprovalModeUnsupported   422  a person is needed and the surface cannot host one
 *     ├── OperationRejected         422  the application would not prepare the operation
 *     ├── ToolCallCapExceeded       429  the execution used up its gated calls
 *     ├── SurfaceUnavailable        502  the card or text could not be delivered
 *     ├── OperationUnavailable      503  the application could not be reached
 *     ├── InternalError             500  Cosigner failed unexpectedly; nothing was decided, retry
 *     ├── HandoffFailed             409  a handoff's step was not confirmed
 *     ├── HandoffCancelled          409  a handoff was cancelled
 *     ├── HandoffTimeout            409  nobody pressed Done in time
 *     └── ToolDefinitionChanged     409  (the MCP gateway) a tool whose definition is not the approved one
 *
 * `GrantRefused` (not a wire error) says why a grant does not allow a call.
 */
import type { Decision } from "./decision.js";

/** Every error code the API answers with. */
export const ErrorCode = {
  INVALID_REQUEST: "INVALID_REQUEST",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  INVALID_SIGNATURE: "INVALID_SIGNATURE",
  PERMISSION_DENIED: "PERMISSION_DENIED",
  KEY_SCOPE: "KEY_SCOPE",
  NOT_AN_APPROVER: "NOT_AN_APPROVER",
  WRONG_CONVERSATION: "WRONG_CONVERSATION",
  WRONG_TENANT: "WRONG_TENANT",
  APPROVAL_NOT_FOUND: "APPROVAL_NOT_FOUND",
  DENIAL_NOT_FOUND: "DENIAL_NOT_FOUND",
  ALLOWANCE_NOT_FOUND: "ALLOWANCE_NOT_FOUND",
  PARAMETERS_MISMATCH: "PARAMETERS_MISMATCH",
  ALREADY_DECIDED: "ALREADY_DECIDED",
  APPROVAL_EXPIRED: "APPROVAL_EXPIRED",
  APPROVAL_PENDING: "APPROVAL_PENDING",
  APPROVAL_MODE_UNSUPPORTED: "APPROVAL_MODE_UNSUPPORTED",
  OPERATION_REJECTED: "OPERATION_REJECTED",
  TOOL_CALL_CAP_EXCEEDED: "TOOL_CALL_CAP_EXCEEDED",
  SURFACE_UNAVAILABLE: "SURFACE_UNAVAILABLE",
  OPERATION_UNAVAILABLE: "OPERATION_UNAVAILABLE",
  INTERNAL: "INTERNAL",
  HANDOFF_FAILED: "HANDOFF_FAILED",
  HANDOFF_CANCELLED: "HANDOFF_CANCELLED",
  HANDOFF_TIMEOUT: "HANDOFF_TIMEOUT",
  TOOL_DEFINITION_CHANGED: "TOOL_DEFINITION_CHANGED",
  STEP_UP_REQUIRED: "STEP_UP_REQUIRED",
} as const;

/** One of the codes above. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base of every Cosigner error: a wire code, an HTTP status, a message naming the fix. */
export class CosignerError extends Error {
  /** The wire code; a code this SDK does not know arrives as sent. */
  code: string = ErrorCode.INVALID_REQUEST;
  /** The HTTP status Cosigner answered with. */
  status = 400;
  /** The error body's other fields (`field`, `approvalId`, ...). */
  readonly details: Record<string, unknown>;
  /** The decision behind a refused gate (`ApprovalDenied`, `ApprovalExpired`, handoffs). */
  decision: Decision | undefined = undefined;

  constructor(message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

function coded(code: ErrorCode, status: number) {
  return class extends CosignerError {
    override code: string = code;
    override status = status;
  };
}

/** The request is malformed; `details.field` names the offending field. */
export class InvalidRequest extends coded(ErrorCode.INVALID_REQUEST, 400) {}
/** Missing or unknown API key. */
export class Unauthenticated extends coded(ErrorCode.UNAUTHENTICATED, 401) {}
/** A callback whose signature does not verify, or that is too old. */
export class InvalidSignature extends coded(ErrorCode.INVALID_SIGNATURE, 401) {}
/** The policy denies this tool, or an approver's standing deny does. */
export class PermissionDenied extends coded(ErrorCode.PERMISSION_DENIED, 403) {}
/** The call was not approved: denied by a person or by Cosigner, or cancelled. */
export class ApprovalDenied extends PermissionDenied {
  /** The approver's comment, if any. */
  get comment(): string | null {
    return this.decision?.comment ?? null;
  }
}
/** An API key used outside its scope: agents use an agent key, deciding needs an approver key. */
export class KeyScopeError extends coded(ErrorCode.KEY_SCOPE, 403) {}
/** An Approve of a step-up call counts only once confirmed with a passkey in the inbox. */
export class StepUpRequired extends coded(ErrorCode.STEP_UP_REQUIRED, 403) {}
/** The person answering is not an approver of this request. */
export class NotAnApprover extends coded(ErrorCode.NOT_AN_APPROVER, 403) {}
/** The answer came from a conversation or number the request was not delivered to. */
export class WrongConversation extends coded(ErrorCode.WRONG_CONVERSATION, 403) {}
/** The answer came from another tenant's workspace, enterprise or number. */
export class WrongTenant extends coded(ErrorCode.WRONG_TENANT, 403) {}
/** No approval with this id belongs to the caller's tenant. */
export class ApprovalNotFound extends coded(ErrorCode.APPROVAL_NOT_FOUND, 404) {}
/** No standing deny with this id belongs to the caller's tenant. */
export class DenialNotFound extends coded(ErrorCode.DENIAL_NOT_FOUND, 404) {}
/** No standing allow with this id belongs to the caller's tenant (or to the person asking). */
export class AllowanceNotFound extends coded(ErrorCode.ALLOWANCE_NOT_FOUND, 404) {}
/** The executionId + toolCallId pair is already used for another call (or arguments changed). */
export class ParametersMismatch extends coded(ErrorCode.PARAMETERS_MISMATCH, 409) {}
/** The approval is already closed. */
export class AlreadyDecided extends coded(ErrorCode.ALREADY_DECIDED, 409) {}
/** The approval expired; expiry means deny. */
export class ApprovalExpired extends coded(ErrorCode.APPROVAL_EXPIRED, 409) {}
/** The approval is still pending, so no call can have run and there is no result. */
export class ApprovalPending extends coded(ErrorCode.APPROVAL_PENDING, 409) {}
/** A person must approve, and the surface cannot host one. */
export class ApprovalModeUnsupported extends coded(ErrorCode.APPROVAL_MODE_UNSUPPORTED, 422) {}
/** The application refused to prepare the operation. */
export class OperationRejected extends coded(ErrorCode.OPERATION_REJECTED, 422) {}
/** The execution has used up its gated tool calls. */
export class ToolCallCapExceeded extends coded(ErrorCode.TOOL_CALL_CAP_EXCEEDED, 429) {}
/** The card or text could not be delivered; the request fails closed. */
export class SurfaceUnavailable extends coded(ErrorCode.SURFACE_UNAVAILABLE, 502) {}
/** The operation's application could not be reached; nothing is pending. */
export class OperationUnavailable extends coded(ErrorCode.OPERATION_UNAVAILABLE, 503) {}
/** Cosigner failed unexpectedly; nothing was decided, so retrying is safe. */
export class InternalError extends coded(ErrorCode.INTERNAL, 500) {}
/** A handoff's step was not confirmed by the application. */
export class HandoffFailed extends coded(ErrorCode.HANDOFF_FAILED, 409) {}
/** A handoff was cancelled. */
export class HandoffCancelled extends coded(ErrorCode.HANDOFF_CANCELLED, 409) {}
/** Nobody pressed Done on a handoff before it expired. */
export class HandoffTimeout extends coded(ErrorCode.HANDOFF_TIMEOUT, 409) {}
/** The MCP gateway refused a tool whose definition is not the approved one, or is new. */
export class ToolDefinitionChanged extends coded(ErrorCode.TOOL_DEFINITION_CHANGED, 409) {}

/** The grant does not allow this call; the message says which check failed. */
export class GrantRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GrantRefused";
  }
}

const BY_CODE: Record<string, new (message: string, details?: Record<string, unknown>) => CosignerError> = {
  [ErrorCode.INVALID_REQUEST]: InvalidRequest,
  [ErrorCode.UNAUTHENTICATED]: Unauthenticated,
  [ErrorCode.INVALID_SIGNATURE]: InvalidSignature,
  [ErrorCode.PERMISSION_DENIED]: PermissionDenied,
  [ErrorCode.KEY_SCOPE]: KeyScopeError,
  [ErrorCode.STEP_UP_REQUIRED]: StepUpRequired,
  [ErrorCode.NOT_AN_APPROVER]: NotAnApprover,
  [ErrorCode.WRONG_CONVERSATION]: WrongConversation,
  [ErrorCode.WRONG_TENANT]: WrongTenant,
  [ErrorCode.APPROVAL_NOT_FOUND]: ApprovalNotFound,
  [ErrorCode.DENIAL_NOT_FOUND]: DenialNotFound,
  [ErrorCode.ALLOWANCE_NOT_FOUND]: AllowanceNotFound,
  [ErrorCode.PARAMETERS_MISMATCH]: ParametersMismatch,
  [ErrorCode.ALREADY_DECIDED]: AlreadyDecided,
  [ErrorCode.APPROVAL_EXPIRED]: ApprovalExpired,
  [ErrorCode.APPROVAL_PENDING]: ApprovalPending,
  [ErrorCode.APPROVAL_MODE_UNSUPPORTED]: ApprovalModeUnsupported,
  [ErrorCode.OPERATION_REJECTED]: OperationRejected,
  [ErrorCode.TOOL_CALL_CAP_EXCEEDED]: ToolCallCapExceeded,
  [ErrorCode.SURFACE_UNAVAILABLE]: SurfaceUnavailable,
  [ErrorCode.OPERATION_UNAVAILABLE]: OperationUnavailable,
  [ErrorCode.INTERNAL]: InternalError,
  [ErrorCode.HANDOFF_FAILED]: HandoffFailed,
  [ErrorCode.HANDOFF_CANCELLED]: HandoffCancelled,
  [ErrorCode.HANDOFF_TIMEOUT]: HandoffTimeout,
  [ErrorCode.TOOL_DEFINITION_CHANGED]: ToolDefinitionChanged,
};

/** The error for an error body; a code this SDK does not know keeps its code and status. */
export function errorFor(
  status: number,
  code: string,
  message: string,
  details: Record<string, unknown> = {},
): CosignerError {
  const cls = BY_CODE[code];
  if (cls !== undefined) return new cls(message, details);
  const unknown = new CosignerError(message, details);
  unknown.code = code;
  unknown.status = status;
  return unknown;
}
