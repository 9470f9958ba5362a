"""A LangChain v1 agent whose tool calls Cosigner gates, against `./run dev`.

    .venv/bin/python examples/frameworks/langchain_agent.py

No LLM: LangChain's fake chat model is scripted to look an order up (a read: the policy
lets it through) and then to refund it (a danger: a card appears in the sandbox's Slack
channel; press Approve or Deny at http://127.0.0.1:8000/sandbox).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from sandbox_client import SLACK, URL, api_key, run_id, say

from cosigner import Cosigner
from cosigner.adapters.langchain import CosignerMiddleware


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, with tools bound (it ignores them)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self


@tool
def lookup_order(order_id: str) -> str:
    """Read an order."""
    return f"order {order_id}: 129.00 USD, paid by card"


@tool
def issue_refund(order_id: str, amount_cents: int, card_token: str) -> str:
    """Refund part of an order to the card it was paid with."""
    return f"refunded {amount_cents} cents on {order_id}"


def main() -> None:
    model = ScriptedChat(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "lookup_order", "args": {"order_id": "ord_4421"}, "id": "c1"}]
                ),
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "issue_refund",
                            "args": {"order_id": "ord_4421", "amount_cents": 12900, "card_token": "tok_x"},
                            "id": "c2",
                        }
                    ],
                ),
                AIMessage("Done."),
            ]
        )
    )
    with Cosigner(URL, api_key()) as client:
        agent = create_agent(
            model,
            [lookup_order, issue_refund],
            middleware=[
                CosignerMiddleware(client, SLACK, reason="Customer says the discount was not applied")
            ],
            checkpointer=InMemorySaver(),
        )
        thread = run_id("lc")
        say(f"run {thread}: approve or deny the refund at {URL}/sandbox")
        result = agent.invoke(
            {"messages": [("user", "Refund order 4421")]}, {"configurable": {"thread_id": thread}}
        )
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            say(f"{message.name} -> {message.content}")


if __name__ == "__main__":
    main()
