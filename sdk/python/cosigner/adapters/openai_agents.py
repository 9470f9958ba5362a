"""Cosigner behind the OpenAI Agents SDK's tool approvals, and as a blocking tool guardrail.

Approvals (tools made with `function_tool(needs_approval=True)`):

    approvals = CosignerApprovals(AsyncCosigner(), surface)
    result = await approvals.run(agent, "refund ord_1", run_config=RunConfig(group_id="run_81"))

`run` answers every interruption (`result.interruptions`) through Cosigner with
`RunState.approve` / `RunState.reject(..., rejection_message=...)` and resumes until the run
ends. `approvals.gate(tool)` (instead of `needs_approval=True`) asks Cosigner when the model
calls the tool, inside `run`: a call the policy allows runs at once, and only a call that
needs a person (or is refused) interrupts the run. With `wait=False` it returns while a
person has yet to answer: keep `result.to_state().to_string()`, and later (any process)
pass `await RunState.from_string(agent, saved)` to `run` again.

Guardrail (any function tool, no interruption): `CosignerGuardrail(client, surface).gate(tool)`
adds a `tool_input_guardrail` that waits for the decision and a `tool_output_guardrail`
that reports the result.

The execution id is the run's `RunConfig.group_id` (the conversation), else its `trace_id`,
else `execution_id=`; the tool call id is the model's `call_id`.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    Runner,
    RunResult,
    RunState,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.items import ToolApprovalItem, ToolCallOutputItem

from cosigner import AsyncCosigner, Cosigner
from cosigner.adapters.verdict import Approver, ToolCall, Verdict, result_report, snapshot
from cosigner.surfaces import Surface

__all__ = ["CosignerApprovals", "CosignerGuardrail", "execution_id_of"]


def execution_id_of(run_config: RunConfig | None, execution_id: str | None = None) -> str:
    """The run's execution id: `execution_id`, else `RunConfig.group_id`, else `RunConfig.trace_id`."""
    found = execution_id or (run_config and (run_config.group_id or run_config.trace_id))
    if not found:
        raise ValueError(
            "Cosigner needs the run's id as its execution id: pass RunConfig(group_id='run_81') "
            "(your conversation or thread id), or execution_id="
        )
    return found


# The run `CosignerApprovals.run` is in, and the calls Cosigner allowed before they ran.
_RUN: ContextVar[tuple[str, dict[str, Verdict]] | None] = ContextVar("cosigner_agents_run", default=None)


def _arguments(raw: str | None, tool: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"the model's arguments for {tool} are not a JSON object; Cosigner cannot show them")
    return parsed


class CosignerApprovals:
    """Answer `needs_approval` interruptions through Cosigner, and resume the run."""

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        # RunState.approve runs the call as the model made it: an edited call could not run,
        # so the request says so (acceptsEdits false) and no approver is offered an edit.
        self.approver = Approver(
            client, surface, reason=reason, timeout_seconds=timeout_seconds, accepts_edits=False
        )

    def gate(self, tool: FunctionTool) -> FunctionTool:
        """Make `tool` ask Cosigner when it is called in `run` (returned for chaining).

        Its `needs_approval` becomes a check that asks Cosigner before the run would be
        interrupted: a call Cosigner approves at once (a read the policy allows) runs in the
        same turn, and only a call that waits for a person, or is refused, interrupts the run
        and is answered as a `needs_approval=True` tool's would be. Called outside `run`, the
        tool always interrupts.
        """
        name = tool.name

        async def needs_approval(
            context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await self._needs_approval(name, params, call_id)

        tool.needs_approval = needs_approval
        return tool

    async def _needs_approval(self, name: str, params: dict[str, Any], call_id: str) -> bool:
        run = _RUN.get()
        if run is None or not call_id or not isinstance(params, dict):
            return True
        run_id, allowed = run
        verdict = await self.approver.aask(ToolCall(run_id, call_id, name, snapshot(params)), wait=False)
        if not verdict.allowed:
            return True  # a person or a refusal: interrupt, and `decide` answers it
        allowed[call_id] = verdict
        return False

    async def decide(
        self, state: RunState[Any, Any], execution_id: str, *, wait: bool = True
    ) -> tuple[dict[str, Verdict], bool]:
        """Approve or reject each interruption of `state` as Cosigner decided.

        Returns the approved verdicts by call id and whether any call is still pending.
        """
        approved: dict[str, Verdict] = {}
        pending = False
        for item in state.get_interruptions():
            verdict = await self.approver.aask(_call(item, execution_id), wait=wait)
            if verdict.pending:
                pending = True
            elif verdict.allowed:
                state.approve(item)
                approved[verdict.call.tool_call_id] = verdict
            else:
                state.reject(item, rejection_message=verdict.message)
        return approved, pending

    async def run(
        self,
        agent: Agent[Any],
        input: str | list[Any] | RunState[Any, Any],
        *,
        run_config: RunConfig | None = None,
        execution_id: str | None = None,
        wait: bool = True,
        **options: Any,
    ) -> RunResult:
        """`Runner.run`, answering every approval interruption through Cosigner until the run ends.

        With `wait=False` it returns the result with its interruptions as soon as one of them
        waits for a person (save `result.to_state().to_string()` and call `run` again later).
        """
        run_id = execution_id_of(run_config, execution_id)
        approved: dict[str, Verdict] = {}
        allowed: dict[str, Verdict] = {}  # by the tools' `needs_approval` (see `gate`)
        next_input = input
        if isinstance(input, RunState) and input.get_interruptions():
            approved, pending = await self.decide(input, run_id, wait=wait)
            if pending:
                raise _still_pending(input)
        token = _RUN.set((run_id, allowed))
        try:
            while True:
                result = await Runner.run(agent, next_input, run_config=run_config, **options)
                # One report per call that ran, however it was allowed (a call answered after
                # an interruption may be asked about again by its `needs_approval` on resume).
                ran = {**allowed, **approved}
                allowed.clear()
                await self._report(result, ran)
                allowed.update(ran)  # allowed in this turn but not run yet
                if not result.interruptions:
                    return result
                state = result.to_state()
                approved, pending = await self.decide(state, run_id, wait=wait)
                if pending:
                    return result
                next_input = state
        finally:
            _RUN.reset(token)

    async def _report(self, result: RunResult, approved: dict[str, Verdict]) -> None:
        for item in result.new_items:
            if isinstance(item, ToolCallOutputItem):
                raw = item.raw_item
                call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
                verdict = approved.pop(str(call_id), None)
                if verdict is not None:
                    await self.approver.areport(verdict, result_report(item.output), wait=False)


def _call(item: ToolApprovalItem, execution_id: str) -> ToolCall:
    name = item.name or "unknown_tool"
    if not item.call_id:
        raise ValueError(f"the approval of {name} carries no call id; Cosigner needs the model's call ids")
    return ToolCall(execution_id, item.call_id, name, _arguments(item.arguments, name))


def _still_pending(state: RunState[Any, Any]) -> RuntimeError:
    names = ", ".join(str(i.name) for i in state.get_interruptions())
    return RuntimeError(f"a person has yet to answer ({names}): resume once Cosigner decided, or wait=True")


class CosignerGuardrail:
    """A blocking gate for any function tool: ask Cosigner before it runs, report what it returned."""

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        execution_id: str | None = None,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        # RunState.approve runs the call as the model made it: an edited call could not run,
        # so the request says so (acceptsEdits false) and no approver is offered an edit.
        self.approver = Approver(
            client, surface, reason=reason, timeout_seconds=timeout_seconds, accepts_edits=False
        )
        self.execution_id = execution_id
        self._running: dict[tuple[str, str], Verdict] = {}
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._ask, name="cosigner")
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._report, name="cosigner_result")

    def gate(self, tool: FunctionTool) -> FunctionTool:
        """Add the guardrails to `tool` (returned for chaining)."""
        tool.tool_input_guardrails = [*(tool.tool_input_guardrails or []), self.input]
        tool.tool_output_guardrails = [*(tool.tool_output_guardrails or []), self.output]
        return tool

    def _key(self, data: ToolInputGuardrailData) -> tuple[str, str]:
        context = data.context
        return execution_id_of(context.run_config, self.execution_id), context.tool_call_id

    async def _ask(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        run_id, call_id = self._key(data)
        call = ToolCall(
            run_id, call_id, context.tool_name, _arguments(context.tool_arguments, context.tool_name)
        )
        verdict = await self.approver.aask(call)
        if not verdict.allowed:
            assert verdict.message is not None
            return ToolGuardrailFunctionOutput.reject_content(verdict.message)
        self._running[(run_id, call_id)] = verdict
        return ToolGuardrailFunctionOutput.allow()

    async def _report(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        verdict = self._running.pop(self._key(data), None)
        if verdict is not None:
            await self.approver.areport(verdict, result_report(data.output), wait=False)
        return ToolGuardrailFunctionOutput.allow()
