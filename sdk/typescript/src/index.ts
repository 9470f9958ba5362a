/** `@cosigner/sdk`: ask Cosigner before a gated tool call runs, and check what it answered. */
export { Cosigner, refuseUnlessApproved } from "./client.js";
export type { ApprovalRequest, CosignerOptions, DecisionRequest, GateOptions, WaitOptions } from "./client.js";
export { ApprovalStatus, isSettled, parseDecision, withOriginal } from "./decision.js";
export type { ApprovalGiven, CurrentCall, DecidedBy, Decision } from "./decision.js";
export { CanonicalFormError, canonicalJson, parametersDigest } from "./digest.js";
export * from "./errors.js";
export { GRANT_DETAIL_TYPE, GRANT_TYPE, publicKeys, verifyGrant, verifyGrantWithKeys } from "./grants.js";
export type { GrantCheck, GrantClaims, Jwks, SeenGrants } from "./grants.js";
export type { Surface, SurfaceType } from "./surfaces.js";
export * as webhooks from "./webhooks.js";
