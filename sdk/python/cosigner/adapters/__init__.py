"""Cosigner behind the approval hooks of agent frameworks, one module per framework.

Each module imports its framework and is installed with the matching extra of
`cosigner-sdk`: `cosigner.adapters.langchain` (`[langchain]`), `cosigner.adapters.openai_agents`
(`[openai-agents]`), `cosigner.adapters.pydantic_ai` (`[pydantic-ai]`) and
`cosigner.adapters.temporal` (`[temporal]`). This package itself imports no framework.
"""

from __future__ import annotations

from cosigner.adapters.verdict import Approver, ToolCall, Verdict, denial_message, refusal_message

__all__ = ["Approver", "ToolCall", "Verdict", "denial_message", "refusal_message"]
