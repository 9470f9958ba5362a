/**
 * Cosigner behind the OpenAI Agents SDK's tool approvals (`@openai/agents`), as the Python
 * adapter does it.
 *
 *     const approvals = new CosignerApprovals(new Cosigner(), { executionId: "run_81", surface });
 *     const result = await approvals.run(agent, "refund ord_1");
 *
 * Tools made with `needsApproval: true` interrupt the run; `run` asks Cosigner for each
 * interruption, checks the grant against the very arguments, resumes with `state.approve`
 * or `state.reject(item, { message })` (the model reads the approver's comment), and reports
 * each approved call's output. `approvals.gate(tool)` makes a tool ask Cosigner when it is
 * called, so a call the policy allows runs without interrupting the run at all.
 */
import { Runner, type Agent, type RunResult, type RunState, type RunToolApprovalItem } from "@openai/agents";
import { Cosigner, refuseUnlessApproved } from "./client.js";
import type { Decision } from "./decision.js";
import { CosignerError, GrantRefused } from "./errors.js";
import type { Surface } from "./surfaces.js";

/** The run the approvals belong to. */
export interface CosignerApprovalsOptions {
  /** The run's id (your conversation or thread id). */
  executionId: string;
  surface: Surface;
  reason?: string;
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

interface Call {
  callId: string;
  name: string;
  arguments: Record<string, unknown>;
}

function callOf(item: RunToolApprovalItem): Call {
  const raw = item.rawItem as { callId?: string; name?: string; arguments?: string };
  const name = item.name ?? raw.name ?? "unknown_tool";
  if (!raw.callId) throw new TypeError(`the approval of ${name} carries no call id; Cosigner needs the model's call ids`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(item.arguments ?? raw.arguments ?? "{}");
  } catch {
    parsed = undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new TypeError(`the model's arguments for ${name} are not a JSON object; Cosigner cannot show them`);
  }
  return { callId: raw.callId, name, arguments: parsed as Record<string, unknown> };
}

/** Answer `needsApproval` interruptions through Cosigner, and resume the run. */
export class CosignerApprovals {
  private readonly ran = new Map<string, Decision>();

  constructor(
    private readonly cosigner: Cosigner,
    private readonly options: CosignerApprovalsOptions,
  ) {}

  private ask(call: Call, wait: boolean): Promise<Decision> {
    return this.cosigner.requestApproval(
      {
        executionId: this.options.executionId,
        toolCallId: call.callId,
        toolName: call.name,
        parameters: call.arguments,
        surface: this.options.surface,
        reason: this.options.reason,
        timeoutSeconds: this.options.timeoutSeconds,
      },
      { wait, signal: this.options.signal },
    );
  }

  /** Make `tool` ask Cosigner when called: a call Cosigner allows at once runs in the same
   * turn; one that waits for a person, or is refused, interrupts the run (returned for chaining). */
  gate<T extends { name: string; needsApproval: unknown }>(tool: T): T {
    tool.needsApproval = async (_context: unknown, input: unknown, callId?: string): Promise<boolean> => {
      if (!callId || typeof input !== "object" || input === null) return true;
      const call = { callId, name: tool.name, arguments: input as Record<string, unknown> };
      const decision = await this.ask(call, false);
      if (decision.status !== "approved") return true; // a person or a refusal: `decide` answers it
      await this.cosigner.verifyGrant(decision.grant, call.arguments, { toolName: call.name, toolCallId: callId });
      this.ran.set(callId, decision);
      return false;
    };
    return tool;
  }

  /** Approve or reject each interruption of `state` as Cosigner decided (waiting for a person). */
  async decide(state: RunState<any, any>): Promise<void> {
    for (const item of state.getInterruptions()) {
      const call = callOf(item);
      const decision = await this.ask(call, true);
      try {
        refuseUnlessApproved(decision, call.arguments);
        await this.cosigner.verifyGrant(decision.grant, call.arguments, { toolName: call.name, toolCallId: call.callId });
      } catch (exc) {
        if (!(exc instanceof CosignerError || exc instanceof GrantRefused)) throw exc;
        state.reject(item, { message: `Not run: ${exc.message}` });
        continue;
      }
      state.approve(item);
      this.ran.set(call.callId, decision);
    }
  }

  /** `run(agent, input)`, answering every approval interruption through Cosigner until the run ends. */
  async run(
    agent: Agent<any, any>,
    input: string | RunState<any, any>,
    options: { runner?: Runner; maxTurns?: number } = {},
  ): Promise<RunResult<any, any>> {
    const runner = options.runner ?? new Runner();
    let next: string | RunState<any, any> = input;
    if (typeof input !== "string" && input.getInterruptions().length > 0) await this.decide(input);
    for (;;) {
      const result = (await runner.run(agent, next as string, { maxTurns: options.maxTurns })) as RunResult<any, any>;
      await this.report(result);
      if (result.interruptions.length === 0) return result;
      await this.decide(result.state);
      next = result.state;
    }
  }

  private async report(result: RunResult<any, any>): Promise<void> {
    for (const item of result.newItems) {
      if (item.type !== "tool_call_output_item") continue;
      const callId = (item.rawItem as { callId?: string }).callId ?? "";
      const decision = this.ran.get(callId);
      if (decision === undefined) continue;
      this.ran.delete(callId);
      // A result that cannot be reported never fails the run.
      await this.cosigner.reportResult(decision, (item as { output?: unknown }).output ?? null).catch(() => undefined);
    }
  }
}
