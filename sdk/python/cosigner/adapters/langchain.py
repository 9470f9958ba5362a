"""Cosigner as LangChain v1 agent middleware: every tool call asks the policy, and a person if needed.

agent = create_agent(model, tools, middleware=[CosignerMiddleware(Cosigner(), surface)],
                     checkpointer=InMemorySaver())
agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "run_81"}})

The execution id is the LangGraph thread id and the tool call id the model's. Blocking (the
default), `wrap_tool_call` waits for the decision. With `interrupt=True` it creates the
approval, pauses the graph with `interrupt()` (value: `PendingApproval`), and a later process
resumes it with `resume_command(...)` once Cosigner decided. Answers use the
`HumanInTheLoopMiddleware` vocabulary: approve, edit (`edited_action`, the same tool with the
approver's arguments), or reject with a message. The middleware says it accepts edits (the
tool's argument schema goes with the request): an edited call runs with exactly the edited
arguments, and its result tells the model the call was edited, so it does not retry its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final, Literal, TypedDict, cast

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command, Interrupt, interrupt

from cosigner import AsyncCosigner, Cosigner, Decision
from cosigner.adapters.verdict import (
    Approver,
    ToolCall,
    Verdict,
    denial_message,
    edited_note,
    error_report,
    result_report,
    snapshot,
)
from cosigner.surfaces import Surface

__all__ = ["CosignerMiddleware", "PendingApproval", "hitl_decision", "pending_approvals", "resume_command"]

PENDING: Final = "cosigner_approval"
Result = ToolMessage | Command[Any]


class PendingApproval(TypedDict):
    """The value of the interrupt raised for a call waiting on a person (interrupt mode)."""

    type: Literal["cosigner_approval"]
    approval_id: str
    tool_call_id: str
    name: str
    args: dict[str, Any]
    expires_at: str | None
    description: str


def hitl_decision(decision: Decision) -> dict[str, Any]:
    """A Cosigner decision in `HumanInTheLoopMiddleware`'s words: approve, edit (the same tool,
    the edited arguments: pass a decision `with_original` so they are the whole call), or reject
    with a message."""
    if decision.pending:
        raise ValueError(f"approval {decision.approval_id} is still pending; resume once it is decided")
    if decision.approved and decision.edited:
        return {
            "type": "edit",
            "edited_action": {"name": decision.tool_name, "args": dict(decision.parameters or {})},
        }
    if decision.approved:
        return {"type": "approve"}
    return {"type": "reject", "message": denial_message(decision)}


def pending_approvals(interrupts: Sequence[Interrupt]) -> list[PendingApproval]:
    """The Cosigner approvals among a paused graph's interrupts (`agent.get_state(config).interrupts`)."""
    return [
        cast(PendingApproval, i.value)
        for i in interrupts
        if isinstance(i.value, dict) and i.value.get("type") == PENDING
    ]


def resume_command(interrupts: Sequence[Interrupt], *decisions: Decision) -> Command[Any]:
    """The `Command(resume=...)` that answers the interrupts these decided approvals paused.

    The middleware asks Cosigner again when the node re-runs, so the resume value is only the
    signal to go on: a decision it carries never overrides Cosigner's.
    """
    by_approval = {
        i.value["approval_id"]: i.id
        for i in interrupts
        if isinstance(i.value, dict) and i.value.get("type") == PENDING
    }
    resume: dict[str, Any] = {}
    for decision in decisions:
        interrupt_id = by_approval.get(decision.approval_id)
        if interrupt_id is None:
            raise ValueError(f"no interrupt of this thread waits for approval {decision.approval_id}")
        resume[interrupt_id] = hitl_decision(decision)
    return Command(resume=resume)


class CosignerMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Ask Cosigner before each tool call (or those named in `tools`); run it only once approved."""

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        tools: Collection[str] | None = None,
        interrupt: bool = False,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        super().__init__()
        self.approver = Approver(
            client, surface, reason=reason, timeout_seconds=timeout_seconds, accepts_edits=True
        )
        self.gated = None if tools is None else frozenset(tools)
        self.interrupt = interrupt

    def _call(self, request: ToolCallRequest) -> ToolCall | None:
        tool_call = request.tool_call
        if self.gated is not None and tool_call["name"] not in self.gated:
            return None
        if not tool_call.get("id"):
            raise ValueError(
                f"tool call {tool_call['name']} has no id; Cosigner needs the model's tool call ids"
            )
        return ToolCall(
            _thread_id(request),
            str(tool_call["id"]),
            tool_call["name"],
            snapshot(tool_call["args"]),
            _schema_of(request),
        )

    def _pause(self, verdict: Verdict) -> None:
        decision = verdict.decision
        assert decision is not None
        value: PendingApproval = {
            "type": PENDING,
            "approval_id": decision.approval_id,
            "tool_call_id": verdict.call.tool_call_id,
            "name": verdict.call.tool_name,
            "args": decision.parameters or {},
            "expires_at": decision.expires_at.isoformat() if decision.expires_at else None,
            "description": f"Waiting in Cosigner for approval {decision.approval_id}",
        }
        # Returns only on resume; Cosigner's decision is read again below, not taken from the value.
        interrupt(value)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]
    ) -> Result:
        """Ask Cosigner, then run the call with exactly the approved arguments, or answer the model."""
        call = self._call(request)
        if call is None:
            return handler(request)
        verdict = self.approver.ask(call, wait=not self.interrupt)
        if verdict.pending:
            self._pause(verdict)
            verdict = self.approver.wait(verdict)
        if not verdict.allowed:
            return _refused(request, verdict)
        try:
            result = handler(_exactly(request, verdict))
        except Exception as exc:
            self.approver.report(verdict, error_report(exc), wait=False)
            raise
        self.approver.report(verdict, _report(result), wait=False)
        return _told(result, verdict)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        """Ask Cosigner, then run the call with exactly the approved arguments, or answer the model."""
        call = self._call(request)
        if call is None:
            return await handler(request)
        verdict = await self.approver.aask(call, wait=not self.interrupt)
        if verdict.pending:
            self._pause(verdict)
            verdict = await self.approver.await_decision(verdict)
        if not verdict.allowed:
            return _refused(request, verdict)
        try:
            result = await handler(_exactly(request, verdict))
        except Exception as exc:
            await self.approver.areport(verdict, error_report(exc), wait=False)
            raise
        await self.approver.areport(verdict, _report(result), wait=False)
        return _told(result, verdict)


def _thread_id(request: ToolCallRequest) -> str:
    configurable = request.runtime.config.get("configurable") or {}
    thread_id = configurable.get("thread_id") or request.runtime.config.get("run_id")
    if not thread_id:
        raise ValueError(
            "Cosigner needs the run's thread id as its execution id: invoke the agent with "
            "config={'configurable': {'thread_id': 'run_81'}}"
        )
    return str(thread_id)


def _exactly(request: ToolCallRequest, verdict: Verdict) -> ToolCallRequest:
    """The request with the arguments Cosigner approved (an approver's edit included), so
    nothing else can run; the tool name never changes."""
    return request.override(tool_call={**request.tool_call, "args": snapshot(verdict.arguments)})


def _schema_of(request: ToolCallRequest) -> dict[str, Any] | None:
    """The tool's argument schema as the model is given it, if the tool has one."""
    tool = request.tool
    if tool is None:
        return None
    try:
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
    except Exception:
        return None
    return schema if isinstance(schema, dict) else None


def _told(result: Result, verdict: Verdict) -> Result:
    """An edited call's result, with a note that tells the model its call was edited."""
    note = edited_note(verdict)
    if not note or not isinstance(result, ToolMessage) or not isinstance(result.content, str):
        return result
    return result.model_copy(update={"content": f"{result.content}\n\n{note}"})


def _refused(request: ToolCallRequest, verdict: Verdict) -> ToolMessage:
    assert verdict.message is not None
    return ToolMessage(
        content=verdict.message,
        name=request.tool_call["name"],
        tool_call_id=request.tool_call["id"],
        status="error",
    )


def _report(result: Result) -> dict[str, Any]:
    if isinstance(result, ToolMessage):
        if result.status == "error":
            return error_report(str(result.content))
        return result_report(result.content)
    return result_report({"command": repr(result.update)})
