"""An OpenAI Agents SDK agent on its `ScriptedModel`, for the adapter tests and the resume process."""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

REFUND = {"order_id": "ord_1", "amount_cents": 12900}


def config(run: str) -> RunConfig:
    """The run's config: tracing off, the execution id as its group (conversation) id."""
    return RunConfig(tracing_disabled=True, group_id=run)


def model(
    tool: str = "issue_refund", args: dict[str, Any] | None = None, *, answer: bool = True
) -> ScriptedModel:
    """A scripted model that calls one tool (call id `call_1`), then answers `done`."""
    steps: list[Any] = [[function_call(tool, args or REFUND, call_id="call_1")]]
    return ScriptedModel([*steps, [assistant_message("done")]] if answer else steps)


def tools(ran: list[tuple[str, dict[str, Any]]], *, needs_approval: bool) -> list[FunctionTool]:
    """The tools under test; each records the arguments it ran with."""

    @function_tool(needs_approval=needs_approval)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        """Refund part of an order."""
        ran.append(("issue_refund", {"order_id": order_id, "amount_cents": amount_cents}))
        return f"refunded {amount_cents} on {order_id}"

    @function_tool(needs_approval=needs_approval)
    def lookup_order(order_id: str) -> str:
        """Read an order."""
        ran.append(("lookup_order", {"order_id": order_id}))
        return f"order {order_id}: 12900"

    return [issue_refund, lookup_order]


def agent(
    scripted: ScriptedModel, ran: list[tuple[str, dict[str, Any]]], *, needs_approval: bool = True
) -> Agent[Any]:
    """The agent under test."""
    return Agent(name="support", model=scripted, tools=list(tools(ran, needs_approval=needs_approval)))


def seen(scripted: ScriptedModel) -> list[str]:
    """The tool outputs in the model's last input."""
    return [
        i["output"]
        for i in scripted.calls[-1].input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
