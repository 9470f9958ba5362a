/**
 * Check a decision callback before trusting it: Standard Webhooks signatures
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`),
 * verified by the `standardwebhooks` library, then the body read as a decision.
 *
 *     const decision = webhooks.verify(rawBody, request.headers, process.env.COSIGNER_CALLBACK_SECRET);
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { parseDecision, type Decision } from "./decision.js";
import { InvalidSignature } from "./errors.js";

/** Headers as a plain object, a `Headers`, or Node's `IncomingHttpHeaders`. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

const NAMES = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;

function pick(headers: HeaderSource): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of NAMES) {
    let value: string | string[] | null | undefined;
    if (typeof (headers as Headers).get === "function") value = (headers as Headers).get(name);
    else {
      const entry = Object.entries(headers).find(([k]) => k.toLowerCase() === name);
      value = entry?.[1];
    }
    if (Array.isArray(value)) value = value.join(" ");
    if (!value) throw new InvalidSignature(`no ${name} header: not a Standard Webhooks delivery from Cosigner`);
    out[name] = value;
  }
  return out;
}

/** The decision a callback carries, once its signature and age check out; throws InvalidSignature otherwise. */
export function verify(body: string | Uint8Array, headers: HeaderSource, secret: string): Decision {
  const raw = typeof body === "string" ? body : Buffer.from(body).toString("utf8");
  let payload: unknown;
  try {
    payload = new Webhook(secret).verify(raw, pick(headers));
  } catch (exc) {
    if (exc instanceof WebhookVerificationError) {
      throw new InvalidSignature(
        `callback refused (${exc.message}): forged, altered, stale, or signed with another secret ` +
          "(use this tenant's callback secret, whsec_...)",
      );
    }
    throw exc;
  }
  return parseDecision(payload);
}

/** The `webhook-id` of a verified delivery: keep it to process each delivery once. */
export function deliveryId(headers: HeaderSource): string {
  return pick(headers)["webhook-id"] as string;
}
