"""A Pydantic AI agent on its `FunctionModel`, for the adapter tests and the resume process."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from cosigner.adapters.pydantic_ai import CosignerApprovals

REFUND = {"order_id": "ord_1", "amount_cents": 12900}


class Script:
    """A model that calls one tool (id `call_1`) first, then answers `done`; it records what it saw."""

    def __init__(self, tool: str = "issue_refund", args: dict[str, Any] | None = None) -> None:
        self.tool, self.args = tool, args or REFUND
        self.seen: list[list[ModelMessage]] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The model's turn."""
        self.seen.append(list(messages))
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart(self.tool, self.args, tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart("done")])

    def tool_returns(self) -> list[str]:
        """The tool returns in the model's last input."""
        return [str(p.content) for m in self.seen[-1] for p in m.parts if isinstance(p, ToolReturnPart)]


def agent(
    script: Script, approvals: CosignerApprovals, ran: list[tuple[str, dict[str, Any]]]
) -> Agent[None, Any]:
    """The agent: the scripted model, two tools, Cosigner as a capability."""
    support: Agent[None, Any] = Agent(
        FunctionModel(script.respond), output_type=[str, DeferredToolRequests], capabilities=[approvals]
    )

    @support.tool_plain
    def issue_refund(order_id: str, amount_cents: int) -> str:
        """Refund part of an order."""
        ran.append(("issue_refund", {"order_id": order_id, "amount_cents": amount_cents}))
        return f"refunded {amount_cents} on {order_id}"

    @support.tool_plain
    def lookup_order(order_id: str) -> str:
        """Read an order."""
        ran.append(("lookup_order", {"order_id": order_id}))
        return f"order {order_id}: 12900"

    return support
