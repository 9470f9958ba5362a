// The client against a real Cosigner: what the policy allows, a person approving and denying,
// a headless run refused, waiting cancelled by an AbortSignal, and errors by class.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  ApprovalDenied,
  ApprovalModeUnsupported,
  ApprovalNotFound,
  Cosigner,
  GrantRefused,
  ParametersMismatch,
  Unauthenticated,
} from "../src/index.js";
import { HEADLESS, noting, pendingApproval, resultsOf, runId, startCosigner, SURFACE, USER, type Server } from "./server.js";

let server: Server;
before(async () => {
  server = await startCosigner();
});
after(async () => {
  await server?.stop();
});

const REFUND = { orderId: "ord_4421", amountCents: 12900, note: "Zoë – 日本" };

test("a read the policy allows needs nobody, and its grant verifies offline", async () => {
  const cosigner = server.client();
  const decision = await cosigner.requestApproval({
    executionId: runId(),
    toolCallId: "call_1",
    toolName: "lookup_order",
    parameters: { orderId: "ord_1" },
    surface: HEADLESS,
  });
  assert.equal(decision.status, "approved");
  assert.equal(decision.decidedBy?.kind, "policy");
  const claims = await cosigner.verifyGrant(decision.grant, { orderId: "ord_1" }, { toolName: "lookup_order" });
  assert.equal(claims.toolCallId, "call_1");
  await assert.rejects(cosigner.verifyGrant(decision.grant, { orderId: "ord_2" }), GrantRefused);
});

test("gate: approved by a person, the function runs once with the shown arguments", async () => {
  const run = runId();
  const agent = new Cosigner({ url: server.url, apiKey: server.agentKey, fetch: noting });
  const calls: unknown[] = [];
  const refund = agent.gate(
    async (p: typeof REFUND) => {
      calls.push(p);
      return { refunded: p.amountCents };
    },
    { toolName: "issue_refund", surface: SURFACE, executionId: run },
  );
  const running = refund({ ...REFUND });
  const id = await pendingApproval(server, run, "issue_refund");
  const shown = await server.approver().getApproval(id);
  assert.deepEqual(shown.parameters, REFUND);
  await server.approver().decide(id, "approve", USER);
  assert.deepEqual(await running, { refunded: 12900 });
  assert.deepEqual(calls, [REFUND]);
  assert.deepEqual(await resultsOf(server, id), [{ outcome: "succeeded", result: { refunded: 12900 }, error: null }]);
});

test("gate: denied, the function never runs and the comment arrives", async () => {
  const run = runId();
  const agent = new Cosigner({ url: server.url, apiKey: server.agentKey, fetch: noting });
  let ran = false;
  const refund = agent.gate(
    () => {
      ran = true;
    },
    { toolName: "issue_refund", surface: SURFACE, executionId: run },
  );
  const running = refund({ ...REFUND });
  const id = await pendingApproval(server, run, "issue_refund");
  await server.approver().decide(id, "deny", USER, "not this customer");
  await assert.rejects(running, (exc: unknown) => {
    assert.ok(exc instanceof ApprovalDenied);
    assert.equal(exc.comment, "not this customer");
    return true;
  });
  assert.equal(ran, false);
});

test("a headless run is refused before it starts and at the call", async () => {
  const cosigner = server.client();
  await assert.rejects(cosigner.admit(runId(), HEADLESS, ["issue_refund", "lookup_order"]), ApprovalModeUnsupported);
  await cosigner.admit(runId(), HEADLESS, ["lookup_order"]);
  await assert.rejects(
    cosigner.requestApproval({
      executionId: runId(),
      toolCallId: "call_1",
      toolName: "issue_refund",
      parameters: REFUND,
      surface: HEADLESS,
    }),
    ApprovalModeUnsupported,
  );
});

test("an AbortSignal stops the wait; the approval stays pending and can be cancelled", async () => {
  const cosigner = server.client();
  const request = { executionId: runId(), toolCallId: "call_1", toolName: "issue_refund", parameters: REFUND, surface: SURFACE };
  const controller = new AbortController();
  const waiting = cosigner.requestApproval(request, { signal: controller.signal });
  const pending = await cosigner.requestApproval(request, { wait: false });
  assert.equal(pending.status, "pending");
  controller.abort(new Error("the user left"));
  await assert.rejects(waiting, /the user left/);
  assert.equal((await cosigner.getApproval(pending)).status, "pending");
  assert.equal((await cosigner.cancel(pending)).status, "cancelled");
  await assert.rejects(
    cosigner.requestApproval({ ...request, parameters: { ...REFUND, amountCents: 1 } }, { wait: false }),
    ParametersMismatch,
  );
});

test("errors arrive as their classes", async () => {
  await assert.rejects(new Cosigner({ url: server.url, apiKey: "nope" }).getApproval("apv_x"), Unauthenticated);
  await assert.rejects(server.client().getApproval("apv_missing"), ApprovalNotFound);
  assert.throws(() => new Cosigner({ url: "", apiKey: "" }), /COSIGNER_URL/);
});
