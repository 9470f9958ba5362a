"""Resume a paused LangChain agent in a fresh process, from its SQLite checkpoint.

Reads COSIGNER_URL, COSIGNER_API_KEY, CHECKPOINT (the SQLite file) and THREAD; prints JSON:
the calls the tools ran and the tool messages the model then saw.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from cosigner import Cosigner, DashboardSurface
from cosigner.adapters.langchain import CosignerMiddleware, pending_approvals, resume_command
from tests.adapters.langchain_agent import ScriptedChat, agent


def main() -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    config: Any = {"configurable": {"thread_id": os.environ["THREAD"]}}
    model = ScriptedChat(messages=iter([AIMessage(content="done")]))
    with Cosigner() as client, sqlite3.connect(os.environ["CHECKPOINT"], check_same_thread=False) as db:
        middleware = CosignerMiddleware(client, DashboardSurface(user_id="u_1"), interrupt=True)
        paused = agent(model, middleware, ran, SqliteSaver(db))
        interrupts = paused.get_state(config).interrupts
        decisions = [client.get(p["approval_id"]) for p in pending_approvals(interrupts)]
        paused.invoke(resume_command(interrupts, *decisions), config)
    print(json.dumps({"ran": ran, "seen": model.tool_messages()}))


if __name__ == "__main__":
    main()
