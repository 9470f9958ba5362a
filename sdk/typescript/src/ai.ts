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
 */
import type { ToolSet } from "ai";
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
}

/** What to spread into `generateText` / `streamText`: the wrapped tools and the approval hook. */
export interface CosignerTools<TOOLS extends ToolSet> {
  tools: TOOLS;
  toolApproval: (options: { toolCall: { toolCallId: string; toolName: string; input: unknown } }) => Promise<
    { type: "approved" } | { type: "denied"; reason: string }
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
      asked = cosigner.requestApproval(
        {
          executionId: options.executionId,
          toolCallId,
          toolName,
          parameters: parametersOf(input, toolName),
          surface: options.surface,
          reason: options.reason,
          timeoutSeconds: options.timeoutSeconds,
        },
        { signal: options.signal },
      );
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
      const decision = await ask(toolCall.toolCallId, toolCall.toolName, toolCall.input);
      if (decision.status === "approved") return { type: "approved" };
      decisions.delete(toolCall.toolCallId);
      const by = decision.decidedBy?.kind === "person" ? "the approver" : `Cosigner (${decision.status})`;
      return { type: "denied", reason: decision.comment ? `Denied by ${by}: ${decision.comment}` : `Denied by ${by}` };
    },
  };
}
