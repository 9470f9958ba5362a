/** Decision: an approval, pending or decided, as the SDK returns it (the wire's own camelCase). */
import { parametersDigest } from "./digest.js";
import { InvalidRequest, ParametersMismatch } from "./errors.js";

/** Every status an approval can be in. */
export const ApprovalStatus = {
  PENDING: "pending",
  APPROVED: "approved",
  DENIED: "denied",
  EXPIRED: "expired",
  CANCELLED: "cancelled",
  COMPLETED: "completed",
  FAILED: "failed",
} as const;

/** One of the statuses above. */
export type ApprovalStatus = (typeof ApprovalStatus)[keyof typeof ApprovalStatus];

/** Who or what closed the approval. */
export interface DecidedBy {
  kind: "person" | "policy" | "timeout" | "agent" | "cosigner" | "allowance";
  surface?: string;
  /** For `kind: "allowance"`: the standing allow that decided (`alw_…`); `surface`, `userId`
   * and `teamId` name the person who granted it. */
  allowanceId?: string;
  userId?: string;
  teamId?: string;
  rule?: string;
  code?: string;
}

/** One approver's Approve counted toward the quorum: their id on the surface, the surface, when. */
export interface ApprovalGiven {
  by: string;
  surface: string;
  at: string;
}

/** A pending call an approver edited (a quorum must approve): the call every approver is asked to
 * approve now instead of the agent's. Answer it with `parametersDigest` = `digest`. */
export interface CurrentCall {
  parameters: Record<string, unknown>;
  editedFields: string[];
  digest: string;
  editedBy?: string;
  editedOn?: string;
}

/** An approval as the agent sees it; only `status === "approved"` with a verified grant allows a call. */
export interface Decision {
  type: "approval_start" | "approval_decided" | "handoff_start";
  approvalId: string;
  executionId: string;
  toolCallId: string;
  toolName: string;
  status: ApprovalStatus;
  parametersDigest: string;
  /** While pending: the redacted parameters exactly as the approver sees them. */
  parameters?: Record<string, unknown>;
  expiresAt?: string;
  shortCode?: string | null;
  decidedBy?: DecidedBy;
  decidedAt?: string;
  comment?: string | null;
  /** A compact JWS, only on an approval. */
  grant?: string | null;
  operation?: string;
  outcome?: unknown;
  code?: string;
  detail?: string;
  /** While pending, when the agent accepts edits: the parameters an approver may change. */
  editable?: string[];
  /** While pending, once an approver edited the call (a quorum): the call asked now. */
  currentCall?: CurrentCall;
  /** An approval of an edited call (only for requests that said `acceptsEdits`). `parameters` is
   * then the call to run as the approver saw it (see `withOriginal`), `parametersDigest` and
   * `digest` its digest, `originalDigest` the asked call's. */
  edited?: boolean;
  editedFields?: string[];
  originalDigest?: string;
  digest?: string;
  /** While pending: true when an identical request (tenant, execution, tool, requester, digest)
   * was pending already and this is that approval (its own `toolCallId`); wait on `approvalId`. */
  coalesced?: boolean;
  /** How many distinct approvers must approve (absent from servers without quorums: 1). */
  quorum?: number;
  /** Every Approve counted so far, oldest first (approved: the approvers who made the quorum). */
  approvals?: ApprovalGiven[];
}

const STATUSES = new Set<string>(Object.values(ApprovalStatus));
const TYPES = new Set(["approval_start", "approval_decided", "handoff_start"]);

/** For an approval of an edited call: the call to run, given the call asked for. It is the asked
 * call with the approver's `editedFields` taken from `parameters` (values the policy hides are
 * never edited, so the asked ones run), and must match the approved digest. The asked call
 * itself for a decision approved as asked. Throws ParametersMismatch otherwise. */
export function withOriginal(decision: Decision, asked: Record<string, unknown>): Record<string, unknown> {
  if (!decision.edited || decision.parameters === undefined) return asked;
  const call: Record<string, unknown> = { ...asked };
  for (const name of decision.editedFields ?? []) call[name] = decision.parameters[name];
  if (parametersDigest(call) !== decision.parametersDigest) {
    throw new ParametersMismatch(
      `the edited call of ${decision.approvalId} does not follow from these parameters; pass the parameters the approval was asked with`,
      { approvalId: decision.approvalId },
    );
  }
  return call;
}

/** A Decision from a response body; a body that is not one is refused, never guessed at. */
export function parseDecision(body: unknown): Decision {
  const value = body as Record<string, unknown> | null;
  const ok =
    typeof value === "object" &&
    value !== null &&
    TYPES.has(String(value.type)) &&
    STATUSES.has(String(value.status)) &&
    ["approvalId", "executionId", "toolCallId", "toolName", "parametersDigest"].every(
      (k) => typeof value[k] === "string",
    );
  if (!ok) {
    throw new InvalidRequest("Cosigner's answer is not an approval; check COSIGNER_URL points at Cosigner", {
      field: "body",
    });
  }
  return value as unknown as Decision;
}

/** True once nobody can change the decision any more (an approved operation: once carried out). */
export function isSettled(decision: Decision): boolean {
  if (decision.status === ApprovalStatus.PENDING) return false;
  return decision.operation === undefined || decision.status !== ApprovalStatus.APPROVED || decision.outcome != null;
}
