"""An OpenAI Agents SDK run whose `needs_approval` tools Cosigner answers, against `./run dev`.

    .venv/bin/python examples/frameworks/openai_agents_agent.py

No LLM: the SDK's `ScriptedModel` looks an order up (no approval needed) and asks for a
refund (`needs_approval=True`): the run pauses, Cosigner shows the call in the sandbox's
Slack channel, and the run goes on with the decision (http://127.0.0.1:8000/sandbox).
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from sandbox_client import SLACK, URL, api_key, run_id, say

from cosigner import AsyncCosigner
from cosigner.adapters.openai_agents import CosignerApprovals


@function_tool
def lookup_order(order_id: str) -> str:
    """Read an order."""
    return f"order {order_id}: 129.00 USD"


@function_tool(needs_approval=True)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund part of an order."""
    return f"refunded {amount_cents} cents on {order_id}"


async def main() -> None:
    model = ScriptedModel(
        [
            [function_call("lookup_order", {"order_id": "ord_4421"}, call_id="c1")],
            [function_call("issue_refund", {"order_id": "ord_4421", "amount_cents": 12900}, call_id="c2")],
            [assistant_message("Done.")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[lookup_order, issue_refund])
    thread = run_id("oa")
    say(f"run {thread}: approve or deny the refund at {URL}/sandbox")
    async with AsyncCosigner(URL, api_key()) as client:
        approvals = CosignerApprovals(client, SLACK)
        result = await approvals.run(
            agent, "Refund order 4421", run_config=RunConfig(tracing_disabled=True, group_id=thread)
        )
    for item in result.new_items:
        if item.type == "tool_call_output_item":
            say(f"tool -> {item.output}")
    say(f"model: {result.final_output}")


if __name__ == "__main__":
    asyncio.run(main())
