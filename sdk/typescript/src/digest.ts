/**
 * The canonical JSON form (RFC 8785, JCS) and the parameters digest that binds a decision
 * to a call: `sha256:` + hex of the JCS bytes of the unredacted parameters.
 */
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";

/** A value has no RFC 8785 form; the message names where it is and what to send instead. */
export class CanonicalFormError extends TypeError {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path}: ${problem}`);
    this.name = "CanonicalFormError";
  }
}

function locate(value: unknown, path: string): CanonicalFormError | null {
  // Walked before the library runs, so a refusal names the member; JSON.stringify (which
  // the library uses) would otherwise drop undefined and functions without a word.
  if (value === null || typeof value === "boolean") return null;
  if (typeof value === "string") {
    return /\p{Surrogate}/u.test(value.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ""))
      ? new CanonicalFormError(path, "holds a lone UTF-16 surrogate; send valid Unicode text")
      : null;
  }
  if (typeof value === "number") {
    return Number.isFinite(value)
      ? null
      : new CanonicalFormError(path, "is NaN or Infinity, which JSON cannot hold; send a finite number");
  }
  if (typeof value === "bigint") {
    return new CanonicalFormError(path, "is a BigInt, which JSON numbers cannot hold exactly; send it as a string");
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = locate(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  if (typeof value === "object" && value !== null) {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      return new CanonicalFormError(path, `is a ${proto?.constructor?.name ?? "object"}, not a plain JSON object`);
    }
    for (const [key, item] of Object.entries(value)) {
      const found = locate(key, `${path}.<key>`) ?? locate(item, member(path, key));
      if (found) return found;
    }
    return null;
  }
  return new CanonicalFormError(path, `is ${typeof value}, which is not a JSON value`);
}

function member(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key.slice(0, 64))}]`;
}

/** The RFC 8785 (JCS) text of `value`; throws `CanonicalFormError` naming a member that has none. */
export function canonicalJson(value: unknown, path = "$"): string {
  const problem = locate(value, path);
  if (problem) throw problem;
  const text = canonicalize(value);
  if (text === undefined) throw new CanonicalFormError(path, "is not a JSON value");
  return text;
}

/** `sha256:` + hex of the JCS bytes of the unredacted parameters. */
export function parametersDigest(parameters: unknown): string {
  return digestOfCanonical(canonicalJson(parameters, "parameters"));
}

/** The digest of a canonical text already at hand. */
export function digestOfCanonical(canonical: string): string {
  return "sha256:" + createHash("sha256").update(canonical, "utf8").digest("hex");
}
