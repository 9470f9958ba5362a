"""A LangChain v1 agent on a scripted fake chat model, for the adapter tests and the resume process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import Field

from cosigner.adapters.langchain import CosignerMiddleware


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, able to bind tools, recording what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def tool_messages(self) -> list[str]:
        """The tool messages in the model's last input."""
        return [str(m.content) for m in self.seen[-1] if isinstance(m, ToolMessage)]


def calls(*tool_calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    """A model turn that calls tools: (name, args, call id) each."""
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in tool_calls])


def tools(ran: list[tuple[str, dict[str, Any]]]) -> list[BaseTool]:
    """The tools under test; each records the arguments it ran with."""

    @tool
    def issue_refund(order_id: str, amount_cents: int) -> str:
        """Refund part of an order."""
        ran.append(("issue_refund", {"order_id": order_id, "amount_cents": amount_cents}))
        return f"refunded {amount_cents} on {order_id}"

    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        ran.append(("lookup_order", {"order_id": order_id}))
        return {"orderId": order_id, "total": 12900}

    @tool
    def delete_account(account_id: str) -> str:
        """Delete an account."""
        ran.append(("delete_account", {"account_id": account_id}))
        return "deleted"

    return [issue_refund, lookup_order, delete_account]


def agent(
    model: ScriptedChat,
    middleware: CosignerMiddleware,
    ran: list[tuple[str, dict[str, Any]]],
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> Any:
    """The agent: the scripted model, the three tools, Cosigner as middleware."""
    return create_agent(model, tools(ran), middleware=[middleware], checkpointer=checkpointer)
