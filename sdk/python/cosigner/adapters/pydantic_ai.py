"""Cosigner as a Pydantic AI capability: deferred tool approvals answered by the policy or a person.

agent = Agent(model, capabilities=[CosignerApprovals(AsyncCosigner(), surface)])

Every tool call (or those named in `tools`, plus any tool made with `requires_approval=True`)
is asked about first: one Cosigner approves at once (a read the policy allows) runs; one
that waits for a person, or is refused, is deferred for approval (`ApprovalRequired`), and
the capability's `handle_deferred_tool_calls` hook, the one `HandleDeferredToolCalls`
uses, asks Cosigner and answers `ToolApproved()` or `ToolDenied(message)` inline. With
`wait=False` a call that waits for a person stays unresolved, so the run ends with
`DeferredToolRequests` as its output (give the agent `output_type=[str,
DeferredToolRequests]`); resume later, in any process, with
`agent.run(message_history=saved)`: the same calls are deferred again and Cosigner
answers them. Before an approved call runs, its decision is checked against
Cosigner again (whoever built the `DeferredToolResults`), and its result is reported off
the call's path (`report_result(wait=False)`).

The execution id is the run's `conversation_id` (kept in the message history across runs)
and the tool call id the model's. The capability accepts edits (the tool's own JSON schema
goes with the request): an approver's edit is answered `ToolApproved(override_args=…)`, with
the same tool, and the call runs once with exactly the edited arguments, checked again
against Cosigner's decision and grant before it runs.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved, ToolDenied
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, SkipToolExecution
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

from cosigner import AsyncCosigner, Cosigner
from cosigner.adapters.verdict import Approver, ToolCall, Verdict, error_report, result_report, snapshot
from cosigner.surfaces import Surface

__all__ = ["CosignerApprovals"]


class CosignerApprovals(AbstractCapability[Any]):
    """Defer tool calls for approval and answer them through Cosigner; report what approved calls return."""

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        tools: Collection[str] | None = None,
        wait: bool = True,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        super().__init__()
        self.approver = Approver(
            client, surface, reason=reason, timeout_seconds=timeout_seconds, accepts_edits=True
        )
        self.gated = None if tools is None else frozenset(tools)
        self._schemas: dict[str, dict[str, Any]] = {}
        self.wait = wait
        self._decided: dict[tuple[str, str], Verdict] = {}
        self._running: dict[tuple[str, str], Verdict] = {}

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not buildable from an agent spec: it needs a client."""
        return None

    def _call(self, ctx: RunContext[Any], part: ToolCallPart) -> ToolCall:
        if not ctx.conversation_id:
            raise ValueError(
                "Cosigner needs the run's conversation_id as its execution id; pass conversation_id="
            )
        return ToolCall(
            ctx.conversation_id,
            part.tool_call_id,
            part.tool_name,
            snapshot(part.args_as_dict()),
            self._schemas.get(part.tool_name),
        )

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Ask Cosigner about each call waiting for approval; answer those it decided."""
        return await self.handle(ctx, requests)

    async def handle(
        self, ctx: RunContext[Any], requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """The handler itself, also usable as `HandleDeferredToolCalls(handler=approvals.handle)`."""
        approvals: dict[str, ToolApproved | ToolDenied] = {}
        for part in requests.approvals:
            call = self._call(ctx, part)
            verdict = await self.approver.aask(call, wait=self.wait)
            if verdict.pending:
                continue
            if verdict.allowed:
                self._decided[(call.execution_id, call.tool_call_id)] = verdict
                edited = verdict.edited is not None
                approvals[call.tool_call_id] = ToolApproved(
                    override_args=verdict.arguments if edited else None
                )
            else:
                assert verdict.message is not None
                approvals[call.tool_call_id] = ToolDenied(verdict.message)
        return DeferredToolResults(approvals=dict(approvals)) if approvals else None

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        """Defer a gated call until approved; once approved, confirm it with Cosigner before it runs."""
        gated = self.gated is None or call.tool_name in self.gated
        if not gated and not ctx.tool_call_approved:
            return args
        self._schemas[tool_def.name] = tool_def.parameters_json_schema
        asked = self._call(ctx, call)
        key = (asked.execution_id, asked.tool_call_id)
        if not ctx.tool_call_approved:
            # A call the policy allows (or a person already approved) runs at once; only one
            # that waits for a person, or is refused, goes through the framework's deferral.
            early = await self.approver.aask(asked, wait=False)
            if not early.allowed:
                raise ApprovalRequired()
            self._running[key] = early
            return args
        verdict = self._decided.pop(key, None)
        # An approved edit arrives as the call's arguments (`override_args`): it must be
        # exactly the edited call Cosigner approved, as any other approved call must be.
        if (
            verdict is None
            or verdict.call.tool_name != asked.tool_name
            or verdict.arguments != asked.parameters
        ):
            verdict = await self.approver.aconfirm(asked)
        if not verdict.allowed:
            raise SkipToolExecution(
                verdict.message
                or f"Not run: `{call.tool_name}` is still waiting for approval. Do not retry it; "
                "the run goes on once a person decides."
            )
        self._running[key] = verdict
        return args

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        """Report what an approved call returned."""
        verdict = self._running.pop((ctx.conversation_id or "", call.tool_call_id), None)
        if verdict is not None:
            await self.approver.areport(verdict, result_report(result), wait=False)
        return result

    async def on_tool_execute_error(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        error: Exception,
    ) -> Any:
        """Report the error an approved call raised, then let it propagate."""
        verdict = self._running.pop((ctx.conversation_id or "", call.tool_call_id), None)
        if verdict is not None:
            await self.approver.areport(verdict, error_report(error), wait=False)
        raise error
