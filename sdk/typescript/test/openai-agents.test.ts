// The OpenAI Agents SDK adapter with a scripted Model (the SDK's own Model interface, no network)
// against a real Cosigner.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Agent, setTracingDisabled, tool, Usage, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { ApprovalModeUnsupported, Cosigner } from "../src/index.js";
import { CosignerApprovals } from "../src/openai-agents.js";
import { HEADLESS, noting, pendingApproval, resultsOf, runId, startCosigner, SURFACE, USER, type Server } from "./server.js";

setTracingDisabled(true);

let server: Server;
before(async () => {
  server = await startCosigner();
});
after(async () => {
  await server?.stop();
});

/** A model that calls `name` with `input` once, then says what the tool answered. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(
    private readonly name: string,
    private readonly input: Record<string, unknown>,
  ) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const items = Array.isArray(request.input) ? request.input : [];
    const answered = items.find((i) => (i as { type?: string }).type === "function_call_result");
    const output = answered
      ? [{ type: "message" as const, role: "assistant" as const, status: "completed" as const, content: [{ type: "output_text" as const, text: `tool said ${JSON.stringify(answered)}` }] }]
      : [{ type: "function_call" as const, callId: "call_1", name: this.name, arguments: JSON.stringify(this.input), status: "completed" as const }];
    return { usage: new Usage(), output, responseId: `resp_${this.requests.length}` };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error("the scripted model does not stream");
  }
}

function shop(ran: unknown[]) {
  return {
    refund: tool({
      name: "issue_refund",
      description: "Refund an order",
      parameters: z.object({ orderId: z.string(), amountCents: z.number() }),
      needsApproval: true,
      execute: async (input) => {
        ran.push(input);
        return `refunded ${input.amountCents}`;
      },
    }),
    lookup: tool({
      name: "lookup_order",
      description: "Read an order",
      parameters: z.object({ orderId: z.string() }),
      needsApproval: true,
      execute: async (input) => {
        ran.push(input);
        return "shipped";
      },
    }),
  };
}

function agentWith(model: Model, tools: ReturnType<typeof shop>): Agent {
  return new Agent({ name: "shop", instructions: "help", model, tools: [tools.refund, tools.lookup] });
}

test("approved by a person: the tool runs once with the arguments shown", async () => {
  const run = runId();
  const ran: unknown[] = [];
  const model = new ScriptedModel("issue_refund", { orderId: "ord_1", amountCents: 500 });
  const client = new Cosigner({ url: server.url, apiKey: server.agentKey, fetch: noting });
  const running = new CosignerApprovals(client, { executionId: run, surface: SURFACE }).run(agentWith(model, shop(ran)), "refund");
  const id = await pendingApproval(server, run, "issue_refund");
  assert.deepEqual((await server.approver().getApproval(id)).parameters, { orderId: "ord_1", amountCents: 500 });
  await server.approver().decide(id, "approve", USER);
  const result = await running;
  assert.deepEqual(ran, [{ orderId: "ord_1", amountCents: 500 }]);
  assert.match(String(result.finalOutput), /refunded 500/);
  assert.deepEqual(await resultsOf(server, id), [{ outcome: "succeeded", result: "refunded 500", error: null }]);
});

test("denied: the tool never runs and the model reads the comment", async () => {
  const run = runId();
  const ran: unknown[] = [];
  const model = new ScriptedModel("issue_refund", { orderId: "ord_1", amountCents: 500 });
  const client = new Cosigner({ url: server.url, apiKey: server.agentKey, fetch: noting });
  const running = new CosignerApprovals(client, { executionId: run, surface: SURFACE }).run(agentWith(model, shop(ran)), "refund");
  const id = await pendingApproval(server, run, "issue_refund");
  await server.approver().decide(id, "deny", USER, "refunds need a ticket");
  const result = await running;
  assert.deepEqual(ran, []);
  assert.match(String(result.finalOutput), /refunds need a ticket/);
});

test("a read the policy allows needs nobody and, gated, does not interrupt the run", async () => {
  const ran: unknown[] = [];
  const model = new ScriptedModel("lookup_order", { orderId: "ord_1" });
  const approvals = new CosignerApprovals(server.client(), { executionId: runId(), surface: SURFACE });
  const tools = shop(ran);
  approvals.gate(tools.lookup);
  const result = await approvals.run(agentWith(model, tools), "where is it");
  assert.deepEqual(ran, [{ orderId: "ord_1" }]);
  assert.match(String(result.finalOutput), /shipped/);
  assert.equal(model.requests.length, 2); // one call, one answer: no interruption in between
});

test("a headless run is refused and the tool never runs", async () => {
  const ran: unknown[] = [];
  const model = new ScriptedModel("issue_refund", { orderId: "ord_1", amountCents: 500 });
  const approvals = new CosignerApprovals(server.client(), { executionId: runId(), surface: HEADLESS });
  await assert.rejects(approvals.run(agentWith(model, shop(ran)), "refund"), ApprovalModeUnsupported);
  assert.deepEqual(ran, []);
});
