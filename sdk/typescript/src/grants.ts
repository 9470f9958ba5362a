/**
 * Check a grant without calling Cosigner: a compact JWS (RFC 7515) signed with Ed25519
 * (`alg: EdDSA`) whose payload is the JCS form of its claims, checked with `jose` against
 * the JWKS of `GET /v1/keys`. Any mismatch throws `GrantRefused`: do not run the call then.
 *
 * Besides Cosigner's own claims a grant carries `jti` (one per approval and call), `aud` where
 * the policy names the executor, and RFC 9396 `authorization_details`
 * (`[{type: "cosigner_tool_call", tool, parameters_digest, arguments_digest?}]`). Pass
 * `audience` to accept a grant naming one (one naming an audience is refused without it, as
 * RFC 7519 asks) and `seen` (a Set, or a function recording a `jti` and saying whether it had
 * it already) to refuse a second use.
 */
import { compactVerify, errors as joseErrors, importJWK, type CryptoKey, type JWK } from "jose";
import { CanonicalFormError, parametersDigest } from "./digest.js";
import { GrantRefused } from "./errors.js";

/** The JWS `typ` of a Cosigner grant. */
export const GRANT_TYPE = "cosigner-grant+jwt";
const ALGORITHM = "EdDSA";
const ISSUER = "cosigner";
const TEXT_CLAIMS = ["sub", "tenant", "executionId", "toolCallId", "toolName", "digest"] as const;
/** The RFC 9396 `authorization_details` type of a grant: one tool call, bound by its digests. */
export const GRANT_DETAIL_TYPE = "cosigner_tool_call";

/** Grant ids (`jti`) already used: a Set this check adds to, or a function that records one
 * and returns true when it had it already (a store shared by several executors). */
export type SeenGrants = Set<string> | ((jti: string) => boolean | Promise<boolean>);

/** What a verified grant allows. */
export interface GrantClaims {
  tenant: string;
  approvalId: string;
  executionId: string;
  toolCallId: string;
  toolName: string;
  digest: string;
  issuedAt: number;
  expiresAt: number;
  /** A grant past a quorum above 1: every approver who made it. */
  approvers?: { by: string; surface: string }[];
  /** `jti` (grants from servers before it have none). */
  grantId?: string;
  /** `aud`: the executor the grant is for, where the policy names one. */
  audience?: string;
}

/** What the call about to run must match, and the moment of the check. */
export interface GrantCheck {
  toolName: string;
  parameters: unknown;
  toolCallId?: string;
  tenant?: string;
  approvalId?: string;
  /** Unix seconds; defaults to now. */
  now?: number;
  /** Seconds of clock skew tolerated; 5 by default. */
  leeway?: number;
  /** This executor's name: required to accept a grant with `aud`, and then it must match. */
  audience?: string;
  /** Refuse a grant whose `jti` was used already, and record this use. */
  seen?: SeenGrants;
}

/** A JSON Web Key Set, as `GET /v1/keys` returns it. */
export interface Jwks {
  keys: JWK[];
}

function part(token: string, index: number): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(Buffer.from(token.split(".")[index] ?? "", "base64url").toString("utf8"));
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // refused below
  }
  throw new GrantRefused("malformed grant: expected a compact JWS of three base64url parts");
}

/** The `kid` a grant says it was signed with (unverified: only to pick the key). */
export function keyId(token: string): string {
  return String(part(token, 0).kid);
}

/** The tool a grant names, unverified: used only when the caller did not say. */
export function unverifiedToolName(token: string): string {
  return String(part(token, 1).toolName);
}

/** The Ed25519 verification keys of a JWKS by `kid`; other key types never count. */
export async function publicKeys(jwks: unknown): Promise<Map<string, CryptoKey | Uint8Array>> {
  const keys = (jwks as Jwks | null)?.keys;
  if (!Array.isArray(keys)) {
    throw new GrantRefused('the key set is not a JWKS ({"keys": [...]}); pass the JSON of GET /v1/keys');
  }
  const found = new Map<string, CryptoKey | Uint8Array>();
  for (const jwk of keys) {
    // Only Ed25519 public keys: an `oct` or RSA entry under the same kid must not become a
    // way to check the token with another algorithm.
    if (jwk?.kty !== "OKP" || jwk.crv !== "Ed25519" || "d" in jwk || typeof jwk.kid !== "string") continue;
    try {
      found.set(jwk.kid, await importJWK({ kty: "OKP", crv: "Ed25519", x: jwk.x }, ALGORITHM));
    } catch {
      continue;
    }
  }
  return found;
}

async function signedClaims(token: string, keys: Map<string, CryptoKey | Uint8Array>): Promise<Record<string, unknown>> {
  if (typeof token !== "string" || token.split(".").length !== 3) {
    throw new GrantRefused("malformed grant: expected a compact JWS of three base64url parts");
  }
  const header = part(token, 0);
  if (header.alg !== ALGORITHM || header.typ !== GRANT_TYPE) {
    throw new GrantRefused(`not a Cosigner grant (alg must be ${ALGORITHM}, typ ${GRANT_TYPE})`);
  }
  const key = keys.get(String(header.kid));
  if (key === undefined) throw new GrantRefused(`unknown key id ${JSON.stringify(header.kid)}; refresh GET /v1/keys`);
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(token, key, { algorithms: [ALGORITHM] }));
  } catch (exc) {
    if (exc instanceof joseErrors.JWSSignatureVerificationFailed) {
      throw new GrantRefused("signature does not verify: the grant was altered or forged");
    }
    throw new GrantRefused(`malformed grant: ${(exc as Error).message}`);
  }
  let claims: Record<string, unknown>;
  try {
    claims = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
  } catch {
    throw new GrantRefused("malformed grant: the claims are not JSON");
  }
  if (claims.iss !== ISSUER) throw new GrantRefused(`grant was not issued by "${ISSUER}"`);
  for (const name of TEXT_CLAIMS) {
    if (!(name in claims)) throw new GrantRefused(`grant lacks the "${name}" claim`);
    if (typeof claims[name] !== "string") throw new GrantRefused(`grant claim "${name}" must be a string`);
  }
  for (const name of ["iat", "exp"]) {
    if (!Number.isSafeInteger(claims[name])) throw new GrantRefused(`grant claim "${name}" must be whole seconds`);
  }
  return claims;
}

/** Verify signature, lifetime, tool (and call, tenant, approval if given) and the digest of
 * the parameters about to be used, against an already parsed key set. */
export async function verifyGrantWithKeys(
  token: string,
  keys: Map<string, CryptoKey | Uint8Array>,
  check: GrantCheck,
): Promise<GrantClaims> {
  const claims = await signedClaims(token, keys);
  const now = check.now ?? Date.now() / 1000;
  const leeway = check.leeway ?? 5;
  if (now >= (claims.exp as number) + leeway) throw new GrantRefused("grant expired; ask Cosigner for a fresh decision");
  if ((claims.iat as number) > now + leeway) {
    throw new GrantRefused("grant is issued in the future; check this machine's clock");
  }
  if (claims.toolName !== check.toolName) {
    throw new GrantRefused(`grant is for tool "${String(claims.toolName)}", not "${check.toolName}"`);
  }
  if (check.toolCallId !== undefined && claims.toolCallId !== check.toolCallId) {
    throw new GrantRefused("grant is for another tool call");
  }
  if (check.tenant !== undefined && claims.tenant !== check.tenant) throw new GrantRefused("grant is for another tenant");
  if (check.approvalId !== undefined && claims.sub !== check.approvalId) {
    throw new GrantRefused("grant is for another approval");
  }
  checkAudience(claims, check.audience);
  let digest: string;
  try {
    digest = parametersDigest(check.parameters);
  } catch (exc) {
    if (exc instanceof CanonicalFormError) {
      throw new GrantRefused(`parameters have no canonical JSON form (${exc.message})`);
    }
    throw exc;
  }
  if (claims.digest !== digest) {
    throw new GrantRefused("parameters differ from the ones the approver saw; do not run the call");
  }
  checkDetails(claims);
  await firstUse(claims, check.seen);
  return {
    tenant: claims.tenant as string,
    approvalId: claims.sub as string,
    executionId: claims.executionId as string,
    toolCallId: claims.toolCallId as string,
    toolName: claims.toolName as string,
    digest: claims.digest as string,
    issuedAt: claims.iat as number,
    expiresAt: claims.exp as number,
    ...(claims.approvers === undefined ? {} : { approvers: approversOf(claims.approvers) }),
    ...(typeof claims.jti === "string" ? { grantId: claims.jti } : {}),
    ...(typeof claims.aud === "string" ? { audience: claims.aud } : {}),
  };
}

/** RFC 7519 4.1.3: a grant naming an audience is for that executor only. */
function checkAudience(claims: Record<string, unknown>, audience: string | undefined): void {
  if (!("aud" in claims)) {
    if (audience !== undefined) throw new GrantRefused(`grant names no audience, and this executor is "${audience}"`);
    return;
  }
  const names = typeof claims.aud === "string" ? [claims.aud] : claims.aud;
  if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === "string")) {
    throw new GrantRefused("grant claim 'aud' must be a string or a list of strings");
  }
  if (audience === undefined) throw new GrantRefused(`grant is for audience "${names[0]}"; pass audience to check it`);
  if (!names.includes(audience)) throw new GrantRefused(`grant is for audience "${names[0]}", not "${audience}"`);
}

/** RFC 9396 `authorization_details`, where present: exactly one `cosigner_tool_call` naming
 * this grant's tool, digest and (an operation's) arguments digest. */
function checkDetails(claims: Record<string, unknown>): void {
  if (!("authorization_details" in claims)) return; // a grant from a server before them
  const details = claims.authorization_details;
  if (!Array.isArray(details) || !details.every((d) => typeof d === "object" && d !== null && !Array.isArray(d))) {
    throw new GrantRefused("grant claim 'authorization_details' must be a list of objects");
  }
  const ours = (details as Record<string, unknown>[]).filter((d) => d.type === GRANT_DETAIL_TYPE);
  if (ours.length !== 1) {
    throw new GrantRefused(`authorization_details must hold one '${GRANT_DETAIL_TYPE}' entry, not ${ours.length}`);
  }
  const detail = ours[0] as Record<string, unknown>;
  if (detail.tool !== claims.toolName) throw new GrantRefused("authorization_details names another tool than the grant");
  if (detail.parameters_digest !== claims.digest) {
    throw new GrantRefused("authorization_details names other parameters than the grant");
  }
  if (detail.arguments_digest !== claims.argumentsDigest) {
    throw new GrantRefused("authorization_details names other arguments than the grant");
  }
}

/** Refuse a grant whose `jti` was used already; record this use. Called last, so a grant
 * refused for any other reason is not recorded. */
async function firstUse(claims: Record<string, unknown>, seen: SeenGrants | undefined): Promise<void> {
  if (seen === undefined) return;
  const jti = claims.jti;
  if (typeof jti !== "string" || jti === "") {
    throw new GrantRefused("grant has no 'jti', so its reuse cannot be checked; ask Cosigner for a fresh decision");
  }
  if (typeof seen === "function") {
    if (await seen(jti)) throw new GrantRefused(`grant ${jti} was used already; a grant runs its call once`);
    return;
  }
  if (seen.has(jti)) throw new GrantRefused(`grant ${jti} was used already; a grant runs its call once`);
  seen.add(jti);
}

function approversOf(value: unknown): { by: string; surface: string }[] {
  const ok =
    Array.isArray(value) &&
    value.every((a) => typeof a === "object" && a !== null && typeof a.by === "string" && typeof a.surface === "string");
  if (!ok) throw new GrantRefused('grant claim "approvers" must list {by, surface} objects');
  return (value as { by: string; surface: string }[]).map((a) => ({ by: a.by, surface: a.surface }));
}

/** `verifyGrantWithKeys` for the JSON of `GET /v1/keys`. */
export async function verifyGrant(token: string, jwks: unknown, check: GrantCheck): Promise<GrantClaims> {
  return verifyGrantWithKeys(token, await publicKeys(jwks), check);
}
