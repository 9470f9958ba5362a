/**
 * `Cosigner`: the agent's side of the API over `fetch`, with the same concepts as the Python
 * SDK: ask (`requestApproval`, waiting by long-poll), `admit` a run, `cancel`, `reportResult`,
 * `gate` a function, and `verifyGrant` offline against the cached `GET /v1/keys`.
 */
import { randomUUID } from "node:crypto";
import { isSettled, parseDecision, type Decision } from "./decision.js";
import { parametersDigest } from "./digest.js";
import {
  ApprovalDenied,
  ApprovalExpired,
  CosignerError,
  errorFor,
  GrantRefused,
  InvalidRequest,
  ParametersMismatch,
} from "./errors.js";
import {
  keyId,
  publicKeys,
  unverifiedToolName,
  verifyGrantWithKeys,
  type GrantClaims,
  type SeenGrants,
} from "./grants.js";
import type { Surface } from "./surfaces.js";

const URL_ENV = "COSIGNER_URL";
const KEY_ENV = "COSIGNER_API_KEY";
const MAX_WAIT = 60; // the server's long-poll limit, in seconds
const RETRY_STATUSES = new Set([502, 503, 504]);
const KEYS_MAX_AGE_MS = 300_000; // as the server's Cache-Control on /v1/keys says

/** The body of `POST /v1/approvals/{id}/decision`, as `decide` sends it. */
export interface DecisionRequest {
  decision: "approve" | "deny" | "always_deny" | "done" | "cancel";
  userId: string;
  comment?: string;
  /** Approve an edited call: the changed parameters and their new values. */
  edit?: Record<string, unknown>;
  /** The digest of the call your app showed the user (see `decide`). */
  parametersDigest?: string;
}

/** How to reach Cosigner; `url` and `apiKey` default to COSIGNER_URL and COSIGNER_API_KEY. */
export interface CosignerOptions {
  url?: string;
  /** An agent key (`cosigner tenants create NAME` prints one). */
  apiKey?: string;
  /** Milliseconds for one ordinary request; 10 000 by default. */
  timeoutMs?: number;
  /** Milliseconds to keep retrying while Cosigner cannot be reached; 30 000 by default. */
  retryForMs?: number;
  /** Another `fetch` (a test double, a proxy-aware one). */
  fetch?: typeof fetch;
}

/** One gated tool call. */
export interface ApprovalRequest {
  executionId: string;
  toolCallId: string;
  toolName: string;
  parameters: Record<string, unknown>;
  surface: Surface;
  /** The agent's claim, shown to the approver labelled as such. */
  reason?: string;
  timeoutSeconds?: number;
  callbackUrl?: string;
  /** The agent can run an edited call: an approver may change the parameters the policy marks
   * `editable`; the decision then carries the call to run (`withOriginal`). This SDK's `gate`
   * and adapters do not send it. */
  acceptsEdits?: boolean;
  /** The tool's JSON Schema: typed inputs for an edit, which must satisfy it. */
  parametersSchema?: Record<string, unknown>;
}

/** How to wait for a decision. */
export interface WaitOptions {
  /** false: return the `approval_start` at once. */
  wait?: boolean;
  /** Stop waiting (with the signal's reason) when aborted; the approval stays pending. */
  signal?: AbortSignal;
  /** Give up after this many milliseconds with a TimeoutError; by default wait until decided. */
  timeoutMs?: number;
}

/** How a function is gated (`Cosigner.gate`). */
export interface GateOptions {
  toolName: string;
  surface: Surface;
  executionId: string;
  reason?: string;
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

type Query = Record<string, string | number>;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The client: one per process is enough; it keeps the grant keys cached. */
export class Cosigner {
  readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly retryForMs: number;
  private readonly fetchFn: typeof fetch;
  private keys: { at: number; kids: Set<string>; keys: Awaited<ReturnType<typeof publicKeys>> } | null = null;

  constructor(options: CosignerOptions = {}) {
    const url = options.url ?? process.env[URL_ENV];
    const key = options.apiKey ?? process.env[KEY_ENV];
    if (!url) throw new TypeError(`no Cosigner URL: pass { url } or set ${URL_ENV} (e.g. http://127.0.0.1:8000)`);
    if (!key) {
      throw new TypeError(`no API key: pass { apiKey } or set ${KEY_ENV} (\`cosigner tenants create NAME\` prints one)`);
    }
    this.url = url.replace(/\/+$/, "");
    this.headers = { Authorization: `Bearer ${key.trim()}`, "User-Agent": "cosigner-sdk-typescript" };
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retryForMs = options.retryForMs ?? 30_000;
    this.fetchFn = options.fetch ?? fetch;
  }

  /** One request, again with backoff while Cosigner cannot be reached; throws its API error. */
  private async send(
    method: string,
    path: string,
    body?: unknown,
    opts: { query?: Query; idempotent?: boolean; signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<unknown> {
    const target = new URL(this.url + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) target.searchParams.set(k, String(v));
    const init: RequestInit = { method, headers: { ...this.headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["Content-Type"] = "application/json";
    }
    const started = Date.now();
    let delay = 50;
    for (;;) {
      const { signal, done } = deadlineSignal(opts.timeoutMs ?? this.timeoutMs, opts.signal);
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await this.fetchFn(target, { ...init, signal });
      } catch (exc) {
        done();
        if (opts.signal?.aborted) throw opts.signal.reason;
        // A request that may have reached the server is sent again only if that is safe.
        if (opts.idempotent === false && !connectFailure(exc)) throw exc;
        failure = exc;
      }
      if (response !== undefined) {
        let text: string;
        try {
          text = await response.text();
        } finally {
          done();
        }
        if (!(await retryable(response.status, text))) return answer(response.status, text);
        failure = errorFor(response.status, `HTTP_${response.status}`, `Cosigner answered HTTP ${response.status}`);
      }
      if (Date.now() - started >= this.retryForMs) throw failure;
      await sleep(delay * (0.5 + Math.random() / 2), opts.signal);
      delay = Math.min(delay * 2, 2000);
    }
  }

  /** `POST /v1/approvals`, then (unless `wait: false`) long-poll until decided. */
  async requestApproval(request: ApprovalRequest, options: WaitOptions = {}): Promise<Decision> {
    checkRequest(request);
    const body = Object.fromEntries(Object.entries(request).filter(([, v]) => v !== undefined));
    const decision = parseDecision(await this.send("POST", "/v1/approvals", body, { signal: options.signal }));
    if (options.wait === false || isSettled(decision)) return decision;
    return this.waitFor(decision, options);
  }

  /** Long-poll `GET /v1/approvals/{id}?wait=N` until decided, reconnecting across the 60 s limit. */
  async waitFor(approval: string | Decision, options: Omit<WaitOptions, "wait"> = {}): Promise<Decision> {
    const path = pathOf(approval);
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    for (;;) {
      const wait = deadline === undefined ? MAX_WAIT : Math.max(0, Math.min(MAX_WAIT, Math.floor((deadline - Date.now()) / 1000)));
      const answered = await this.send("GET", path, undefined, {
        query: { wait },
        signal: options.signal,
        timeoutMs: (wait + 15) * 1000,
      });
      const decision = parseDecision(answered);
      if (isSettled(decision)) return decision;
      if (deadline !== undefined && Date.now() >= deadline) {
        const error = new Error(`approval ${decision.approvalId} is still pending after ${options.timeoutMs} ms`);
        error.name = "TimeoutError";
        throw error;
      }
    }
  }

  /** `GET /v1/approvals/{id}`. */
  async getApproval(approval: string | Decision): Promise<Decision> {
    return parseDecision(await this.send("GET", pathOf(approval)));
  }

  /** `POST /v1/runs/admit`: throws ApprovalModeUnsupported if the surface cannot host a needed person. */
  async admit(executionId: string, surface: Surface, tools: string[]): Promise<void> {
    await this.send("POST", "/v1/runs/admit", { executionId, surface, tools });
  }

  /** `POST /v1/approvals/{id}/cancel`. */
  async cancel(approval: string | Decision): Promise<Decision> {
    return parseDecision(await this.send("POST", pathOf(approval, "/cancel"), undefined, { idempotent: false }));
  }

  /** `POST /v1/approvals/{id}/result`: what the executed call returned (or the error it threw). */
  async reportResult(approval: string | Decision, result: unknown, error?: string): Promise<void> {
    const body =
      error === undefined ? { outcome: "succeeded", result: result ?? null } : { outcome: "failed", error: error.slice(0, 2000) };
    await this.send("POST", pathOf(approval, "/result"), body, { idempotent: false });
  }

  /** `GET /v1/approvals/{id}/audit`: the approval's hash-chained audit events. */
  async audit(approval: string | Decision): Promise<{ event: string; data: Record<string, unknown> }[]> {
    const body = (await this.send("GET", pathOf(approval, "/audit"))) as { events?: unknown };
    if (!Array.isArray(body?.events)) throw new InvalidRequest("Cosigner's audit answer has no events list", { field: "events" });
    return body.events as { event: string; data: Record<string, unknown> }[];
  }

  /** `POST /v1/approvals/{id}/decision` (dashboard surface; needs an approver key where keys are scoped).
   * `parametersDigest` names the call your app showed the user (the approval's `parametersDigest`, or its
   * `currentCall.digest` once an approver edited it); an answer for another version is refused with
   * ParametersMismatch (409): fetch the approval and show its current call. */
  async decide(
    approval: string | Decision,
    decision: "approve" | "deny",
    userId: string,
    comment?: string,
    parametersDigest?: string,
  ): Promise<Decision> {
    const body: DecisionRequest = { decision, userId };
    if (comment !== undefined) body.comment = comment;
    if (parametersDigest !== undefined) body.parametersDigest = parametersDigest;
    return parseDecision(await this.send("POST", pathOf(approval, "/decision"), body, { idempotent: false }));
  }

  /** Check a decision's grant offline for the parameters about to be used; fetches `/v1/keys` only when needed. */
  async verifyGrant(
    grant: string | null | undefined,
    parameters: unknown,
    check: { toolName?: string; toolCallId?: string; tenant?: string; audience?: string; seen?: SeenGrants } = {},
  ): Promise<GrantClaims> {
    if (!grant) throw new GrantRefused("no grant: only an approved decision carries one");
    const kid = keyId(grant);
    if (this.keys === null || Date.now() - this.keys.at > KEYS_MAX_AGE_MS || !this.keys.kids.has(kid)) {
      const jwks = (await this.send("GET", "/v1/keys")) as { keys?: { kid?: unknown }[] };
      const keys = await publicKeys(jwks);
      this.keys = { at: Date.now(), kids: new Set(keys.keys()), keys };
    }
    return verifyGrantWithKeys(grant, this.keys.keys, {
      toolName: check.toolName ?? unverifiedToolName(grant),
      parameters,
      toolCallId: check.toolCallId,
      tenant: check.tenant,
      audience: check.audience,
      seen: check.seen,
    });
  }

  /**
   * `fn` behind Cosigner: each call asks, waits, and runs `fn` only when these very
   * arguments were approved and the grant verifies; its result (or error) is reported.
   */
  gate<P extends Record<string, unknown>, R>(
    fn: (parameters: P) => R | Promise<R>,
    options: GateOptions,
  ): (parameters: P, toolCallId?: string) => Promise<R> {
    return async (parameters: P, toolCallId?: string) => {
      // A copy: what is approved must not change if the caller mutates the object while waiting.
      const snapshot = structuredClone(parameters);
      const decision = await this.requestApproval(
        {
          executionId: options.executionId,
          toolCallId: toolCallId ?? `call_${randomUUID()}`,
          toolName: options.toolName,
          parameters: snapshot,
          surface: options.surface,
          reason: options.reason,
          timeoutSeconds: options.timeoutSeconds,
        },
        { signal: options.signal },
      );
      refuseUnlessApproved(decision, parameters);
      await this.verifyGrant(decision.grant, parameters, { toolName: options.toolName, toolCallId: decision.toolCallId });
      return this.runReported(decision, () => fn(parameters));
    };
  }

  /** Run an approved call's body and report what it returned or threw (a failed report is never thrown over it). */
  async runReported<R>(decision: Decision, body: () => R | Promise<R>): Promise<R> {
    let result: R;
    try {
      result = await body();
    } catch (exc) {
      await this.reportResult(decision, undefined, `${(exc as Error)?.name ?? "Error"}: ${String((exc as Error)?.message ?? exc)}`).catch(
        () => undefined,
      );
      throw exc;
    }
    await this.reportResult(decision, jsonable(result)).catch(() => undefined);
    return result;
  }
}

/** Throw unless `decision` approves exactly `parameters`: ApprovalDenied (with the comment),
 * ApprovalExpired, a handoff's error, or ParametersMismatch. */
export function refuseUnlessApproved(decision: Decision, parameters: unknown): void {
  if (decision.code !== undefined && decision.code !== null) {
    const failed = errorFor(409, decision.code, `handoff ${decision.approvalId} for ${decision.toolName} ${decision.status}`);
    failed.decision = decision;
    throw failed;
  }
  if (decision.status === "expired") {
    const expired = new ApprovalExpired(`approval ${decision.approvalId} for ${decision.toolName} expired: expiry means deny`, {
      approvalId: decision.approvalId,
    });
    expired.decision = decision;
    throw expired;
  }
  if (decision.status !== "approved" && decision.status !== "completed") {
    const who = decision.decidedBy?.kind ?? "nobody";
    const said = decision.comment ? `: ${decision.comment}` : "";
    const denied = new ApprovalDenied(`${decision.toolName} was ${decision.status} by ${who}${said}`, {
      approvalId: decision.approvalId,
      status: decision.status,
    });
    denied.decision = decision;
    throw denied;
  }
  if (parametersDigest(parameters) !== decision.parametersDigest) {
    throw new ParametersMismatch(
      `the arguments of ${decision.toolName} are not the ones approved in ${decision.approvalId}; the call was not run`,
      { approvalId: decision.approvalId },
    );
  }
}

function checkRequest(request: ApprovalRequest): void {
  for (const name of ["executionId", "toolCallId", "toolName"] as const) {
    if (typeof request[name] !== "string" || request[name] === "") {
      throw new InvalidRequest(`${name} must be a non-empty string`, { field: name });
    }
  }
  if (typeof request.parameters !== "object" || request.parameters === null || Array.isArray(request.parameters)) {
    throw new InvalidRequest("parameters must be a JSON object", { field: "parameters" });
  }
  parametersDigest(request.parameters); // a value with no JSON form is refused here, naming it
}

/** A signal that aborts after `ms` or when `outer` does; `done` releases its timer.
 * (AbortSignal.any would do, but Node 18 lacks it.) */
function deadlineSignal(ms: number, outer?: AbortSignal): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DOMException("Cosigner did not answer in time", "TimeoutError")), ms);
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    },
  };
}

function pathOf(approval: string | Decision, tail = ""): string {
  const id = typeof approval === "string" ? approval : approval.approvalId;
  return `/v1/approvals/${encodeURIComponent(id)}${tail}`;
}

function connectFailure(exc: unknown): boolean {
  const code = (exc as { cause?: { code?: string } })?.cause?.code;
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "UND_ERR_CONNECT_TIMEOUT";
}

async function retryable(status: number, text: string): Promise<boolean> {
  // A gateway or restart answer without a Cosigner error body: try again.
  if (!RETRY_STATUSES.has(status)) return false;
  try {
    return typeof JSON.parse(text)?.error?.code !== "string";
  } catch {
    return true;
  }
}

function answer(status: number, text: string): unknown {
  let body: unknown;
  try {
    body = text === "" ? null : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (status < 400) {
    if (body === undefined) throw new InvalidRequest("Cosigner answered with a body that is not JSON; check COSIGNER_URL");
    return body;
  }
  const error = (body as { error?: Record<string, unknown> } | undefined)?.error;
  if (error && typeof error.code === "string" && typeof error.message === "string") {
    const { code, message, ...details } = error;
    throw errorFor(status, code, message, details);
  }
  throw errorFor(status, `HTTP_${status}`, `Cosigner answered HTTP ${status} without an error body; check COSIGNER_URL`);
}

function jsonable(value: unknown): unknown {
  try {
    return value === undefined ? null : JSON.parse(JSON.stringify(value));
  } catch {
    return String(value);
  }
}


