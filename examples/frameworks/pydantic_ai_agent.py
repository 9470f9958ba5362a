"""A Pydantic AI agent whose tool calls Cosigner approves or refuses, against `./run dev`.

    .venv/bin/python examples/frameworks/pydantic_ai_agent.py

No LLM: a `FunctionModel` looks an order up (the policy lets the read through) and asks
for a refund (a card in the sandbox's Slack channel: http://127.0.0.1:8000/sandbox).
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sandbox_client import SLACK, URL, api_key, run_id, say

from cosigner import AsyncCosigner
from cosigner.adapters.pydantic_ai import CosignerApprovals


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Look up, then refund, then answer with what the refund returned."""
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("lookup_order", {"order_id": "ord_4421"}, tool_call_id="c1")]
        )
    if len(returns) == 1:
        args = {"order_id": "ord_4421", "amount_cents": 12900}
        return ModelResponse(parts=[ToolCallPart("issue_refund", args, tool_call_id="c2")])
    return ModelResponse(parts=[TextPart(f"The refund: {returns[-1].content}")])


async def main() -> None:
    async with AsyncCosigner(URL, api_key()) as client:
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[CosignerApprovals(client, SLACK)])

        @agent.tool_plain
        def lookup_order(order_id: str) -> str:
            """Read an order."""
            return f"order {order_id}: 129.00 USD"

        @agent.tool_plain
        def issue_refund(order_id: str, amount_cents: int) -> str:
            """Refund part of an order."""
            return f"refunded {amount_cents} cents on {order_id}"

        thread = run_id("pa")
        say(f"run {thread}: approve or deny the refund at {URL}/sandbox")
        result = await agent.run("Refund order 4421", conversation_id=thread)
    say(f"model: {result.output}")


if __name__ == "__main__":
    asyncio.run(main())
