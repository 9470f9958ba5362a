// The client's handling of the network, with a scripted `fetch`: retries while Cosigner
// cannot be reached, long-poll reconnects, no repeat of an unsafe request, errors by code.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AlreadyDecided, Cosigner, CosignerError, KeyScopeError } from "../src/index.js";
import { keysOf } from "./server.js";

const START = {
  type: "approval_start", approvalId: "apv_1", executionId: "run_1", toolCallId: "call_1", toolName: "issue_refund",
  parameters: { orderId: "ord_1" }, parametersDigest: "sha256:x", timeout: 300000, startedAt: "2026-12-01T00:00:00Z",
  expiresAt: "2026-12-01T00:05:00Z", status: "pending",
};
const DECIDED = {
  type: "approval_decided", approvalId: "apv_1", executionId: "run_1", toolCallId: "call_1", toolName: "issue_refund",
  status: "approved", decidedBy: { kind: "person", surface: "dashboard", userId: "u_1" }, decidedAt: "2026-12-01T00:01:00Z",
  comment: null, parametersDigest: "sha256:x", grant: "a.b.c",
};

type Step = (url: URL, init: RequestInit) => Response | Promise<Response>;

function scripted(steps: Step[]): { fetch: typeof fetch; seen: string[] } {
  const seen: string[] = [];
  const fake = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input));
    seen.push(`${init?.method} ${url.pathname}${url.search}`);
    const step = steps.shift();
    if (step === undefined) throw new Error(`unexpected request ${url}`);
    return step(url, init ?? {});
  };
  return { fetch: fake as typeof fetch, seen };
}

const json = (status: number, body: unknown) => () => new Response(JSON.stringify(body), { status });
const refused: Step = () => {
  throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
};

test("waits through an unreachable Cosigner, a gateway 503 and a long-poll that ends pending", async () => {
  const { fetch, seen } = scripted([refused, () => new Response("bad gateway", { status: 503 }), json(201, START), json(200, START), json(200, DECIDED)]);
  const cosigner = new Cosigner({ url: "http://cosigner.test/", apiKey: "k", fetch });
  const decision = await cosigner.requestApproval({
    executionId: "run_1", toolCallId: "call_1", toolName: "issue_refund", parameters: { orderId: "ord_1" }, surface: { type: "api" },
  });
  assert.equal(decision.status, "approved");
  assert.deepEqual(seen, [
    "POST /v1/approvals", "POST /v1/approvals", "POST /v1/approvals",
    "GET /v1/approvals/apv_1?wait=60", "GET /v1/approvals/apv_1?wait=60",
  ]);
});

test("a request that may have arrived is not sent again unless repeating it is safe", async () => {
  const reset: Step = () => {
    throw new TypeError("fetch failed", { cause: { code: "ECONNRESET" } });
  };
  const { fetch, seen } = scripted([reset]);
  await assert.rejects(new Cosigner({ url: "http://cosigner.test", apiKey: "k", fetch }).cancel("apv_1"), /fetch failed/);
  assert.deepEqual(seen, ["POST /v1/approvals/apv_1/cancel"]);
});

test("error bodies become their classes; an unknown code keeps its code and status", async () => {
  const { fetch } = scripted([
    json(409, { error: { code: "ALREADY_DECIDED", message: "approval apv_1 is approved", status: "approved" } }),
    json(403, { error: { code: "KEY_SCOPE", message: "use an agent key" } }),
    json(418, { error: { code: "TEAPOT", message: "newer server" } }),
  ]);
  const cosigner = new Cosigner({ url: "http://cosigner.test", apiKey: "k", fetch });
  await assert.rejects(cosigner.cancel("apv_1"), (exc: unknown) => exc instanceof AlreadyDecided && exc.details.status === "approved");
  await assert.rejects(cosigner.getApproval("apv_1"), (exc: unknown) => exc instanceof KeyScopeError && exc.status === 403);
  await assert.rejects(cosigner.getApproval("apv_1"), (exc: unknown) => exc instanceof CosignerError && exc.code === "TEAPOT" && exc.status === 418);
});

test("a value with no JSON form is refused before anything is sent, naming it", async () => {
  const { fetch, seen } = scripted([]);
  const cosigner = new Cosigner({ url: "http://cosigner.test", apiKey: "k", fetch });
  await assert.rejects(
    cosigner.requestApproval({ executionId: "r", toolCallId: "c", toolName: "t", parameters: { amount: Number.NaN }, surface: { type: "api" } }),
    /parameters\.amount: is NaN or Infinity/,
  );
  assert.deepEqual(seen, []);
});

test("timeoutMs gives up waiting with a TimeoutError", async () => {
  const pending: Step[] = [json(201, START), ...Array.from({ length: 10_000 }, () => json(200, START))];
  const { fetch } = scripted(pending);
  const cosigner = new Cosigner({ url: "http://cosigner.test", apiKey: "k", fetch });
  await assert.rejects(
    cosigner.requestApproval(
      { executionId: "run_1", toolCallId: "call_1", toolName: "issue_refund", parameters: { orderId: "ord_1" }, surface: { type: "api" } },
      { timeoutMs: 20 },
    ),
    { name: "TimeoutError" },
  );
});

test("the test server's keys: the approver key when tenants create prints one, else the agent key", () => {
  assert.deepEqual(keysOf("API key (shown once; only its hash is stored): csk_a\n"), { agent: "csk_a", approver: "csk_a" });
  assert.deepEqual(keysOf("Agent key (shown once): csk_a\nApprover key (shown once): csk_b\n"), { agent: "csk_a", approver: "csk_b" });
});
