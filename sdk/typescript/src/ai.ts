/**
 * Cosigner behind the Vercel AI SDK's tool approval (`ai` 7: `toolApproval`, the successor of
 * a tool's `needsApproval`).
 *
 *     const gated = cosignerTools(new Cosigner(), { issue_refund, lookup_order }, { executionId, surface });
 *     await generateText({ model, ...gated, prompt });
 *
 * For each tool call the model makes, `toolApproval` asks Cosigner and waits: a call the
 * policy allows runs at once, one that needs a person runs once a person approves, and a
 * denied one never runs: the model reads the approver's comment as the denial's reason.
 * The tools' `execute` is wrapped as well, so a call runs only with a decision for exactly
 * its input whose grant verifies (even where `toolApproval` was not passed), and its result
 * is reported to Cosigner's audit record.
 *
 * With `wait: false` a call that needs a person comes back as the AI SDK's own approval
 * request (`tool-approval-request` in the response) instead; `cosignerResponses(cosigner,
 * messages, options)` later answers those from Cosigner's decisions, as the tool message to
 * append before calling `generateText` again. Cosigner decides either way: an approval
 * response that Cosigner did not give is overruled when the run resumes.
 */
import type { ModelMessage, ToolSet } from "ai";
import { Cosigner, refuseUnlessApproved } from "./client.js";
import type { Decision } from "./decision.js";
import type { Surface } from "./surfaces.js";

/** The run the tools belong to. */
export interface CosignerToolsOptions {
  executionId: string;
  surface: Surface;
  /** The agent's claim, shown to the approver labelled as such. */
  reason?: string;
  timeoutSeconds?: number;
  /** Stops waiting for a person (the run then fails; the approval stays pending). */
  signal?: AbortSignal;
  /** false: a call that needs a person ends the step as an approval request (see above). */
  wait?: boolean;
}

/** What to spread into `generateText` / `streamText`: the wrapped tools and the approval hook. */
export interface CosignerTools<TOOLS extends ToolSet> {
  tools: TOOLS;
  toolApproval: (options: { toolCall: { toolCallId: string; toolName: string; input: unknown } }) => Promise<
    { type: "approved" } | { type: "denied"; reason: string } | { type: "user-approval"; reason: string }
  >;
}

function parametersOf(input: unknown, toolName: string): Record<string, unknown> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new TypeError(`the model's input for ${toolName} is not a JSON object; Cosigner cannot show it`);
  }
  return input as Record<string, unknown>;
}

/** `tools` behind Cosigner, with the `toolApproval` that asks it (see the module's comment). */
export function cosignerTools<TOOLS extends ToolSet>(
  cosigner: Cosigner,
  tools: TOOLS,
  options: CosignerToolsOptions,
): CosignerTools<TOOLS> {
  const decisions = new Map<string, Promise<Decision>>();

  const ask = (toolCallId: string, toolName: string, input: unknown): Promise<Decision> => {
    // One request per tool call, whichever of the hook and `execute` asks first.
    let asked = decisions.get(toolCallId);
    if (asked === undefined) {
      asked = askCosigner(cosigner, options, toolCallId, toolName, input, true);
      decisions.set(toolCallId, asked);
    }
    return asked;
  };

  const wrapped: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute;
    if (execute === undefined) {
      wrapped[name] = tool;
      continue;
    }
    wrapped[name] = {
      ...tool,
      execute: async (input: unknown, execution: { toolCallId: string }) => {
        const decision = await ask(execution.toolCallId, name, input);
        refuseUnlessApproved(decision, input);
        await cosigner.verifyGrant(decision.grant, input, { toolName: name, toolCallId: execution.toolCallId });
        decisions.delete(execution.toolCallId);
        return cosigner.runReported(decision, () => (execute as (i: unknown, o: unknown) => unknown)(input, execution));
      },
    };
  }

  return {
    tools: wrapped as TOOLS,
    toolApproval: async ({ toolCall }) => {
      const { toolCallId, toolName, input } = toolCall;
      const decision = await (options.wait === false
        ? askCosigner(cosigner, options, toolCallId, toolName, input, false)
        : ask(toolCallId, toolName, input));
      if (decision.status === "pending") {
        return { type: "user-approval", reason: `waiting for a person in Cosigner (approval ${decision.approvalId})` };
      }
      if (decision.status === "approved") return { type: "approved" };
      decisions.delete(toolCallId);
      return { type: "denied", reason: denialOf(decision) };
    },
  };
}

function askCosigner(
  cosigner: Cosigner,
  options: CosignerToolsOptions,
  toolCallId: string,
  toolName: string,
  input: unknown,
  wait: boolean,
): Promise<Decision> {
  return cosigner.requestApproval(
    {
      executionId: options.executionId,
      toolCallId,
      toolName,
      parameters: parametersOf(input, toolName),
      surface: options.surface,
      reason: options.reason,
      timeoutSeconds: options.timeoutSeconds,
    },
    { signal: options.signal, wait },
  );
}

function denialOf(decision: Decision): string {
  const by = decision.decidedBy?.kind === "person" ? "the approver" : `Cosigner (${decision.status})`;
  return decision.comment ? `Denied by ${by}: ${decision.comment}` : `Denied by ${by}`;
}

type Part = { type: string; toolCallId?: string; toolName?: string; input?: unknown; approvalId?: string };

/**
 * The tool message answering every open `tool-approval-request` in `messages` from
 * Cosigner's decisions (waiting for the person unless `wait: false`, which leaves a
 * pending one out), or null when there is nothing to answer.
 */
export async function cosignerResponses(
  cosigner: Cosigner,
  messages: ModelMessage[],
  options: CosignerToolsOptions,
): Promise<ModelMessage | null> {
  const calls = new Map<string, Part>();
  const open = new Map<string, Part>();
  for (const message of messages) {
    if (typeof message.content === "string") continue;
    for (const part of message.content as Part[]) {
      if (part.type === "tool-call" && part.toolCallId) calls.set(part.toolCallId, part);
      if (part.type === "tool-approval-request" && part.approvalId) open.set(part.approvalId, part);
      if (part.type === "tool-approval-response" && part.approvalId) open.delete(part.approvalId);
    }
  }
  const content: { type: "tool-approval-response"; approvalId: string; approved: boolean; reason?: string }[] = [];
  for (const [approvalId, request] of open) {
    const call = calls.get(request.toolCallId ?? "");
    if (call === undefined || !call.toolName) continue; // not a call of this conversation
    const decision = await askCosigner(cosigner, options, call.toolCallId!, call.toolName, call.input, options.wait !== false);
    if (decision.status === "pending") continue;
    content.push(
      decision.status === "approved"
        ? { type: "tool-approval-response", approvalId, approved: true }
        : { type: "tool-approval-response", approvalId, approved: false, reason: denialOf(decision) },
    );
  }
  return content.length > 0 ? ({ role: "tool", content } as ModelMessage) : null;
}
